"""agentbox setup-delegation USER [--remove]: as root on a cgroup v1 or
hybrid host, USER's own group in each controller and an enabled systemd
unit that makes them again at boot; --remove takes both away; refused to
others.
Uses the account `nobody`, and removes what it made. AGENTBOX_BIN names the
binary."""

import os
import subprocess
import unittest

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")
USER = "nobody"
UNIT = "/etc/systemd/system/agentbox-delegation-%s.service" % USER
WANTS = "/etc/systemd/system/multi-user.target.wants/agentbox-delegation-%s.service" % USER
V1 = os.path.isdir("/sys/fs/cgroup/memory") or os.path.isdir("/sys/fs/cgroup/pids")


def ab(*args, user=None):
    argv = [BIN, *args]
    if user:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


class SetupDelegation(unittest.TestCase):
    def test_refused_to_a_plain_user_and_bad_input(self):
        if os.getuid() == 0:
            r = ab("setup-delegation", "root")
            self.assertEqual(r.returncode, 125)
            self.assertIn("root needs no delegation", r.stderr)
        else:
            r = ab("setup-delegation", USER)
            self.assertEqual(r.returncode, 125)
            self.assertIn("only root", r.stderr)
        r = ab("setup-delegation", "no-such-user-here")
        self.assertEqual(r.returncode, 125)
        self.assertIn("no user no-such-user-here", r.stderr)
        self.assertEqual(ab("setup-delegation").returncode, 125)

    @unittest.skipUnless(os.getuid() == 0, "gives cgroups away: root only")
    def test_groups_given_kept_across_boots_and_taken_back(self):
        if not V1:
            r = ab("setup-delegation", USER)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("systemd's user manager delegates", r.stdout)
            return
        self.addCleanup(ab, "setup-delegation", "--remove", USER)
        r = ab("setup-delegation", USER)
        self.assertEqual((r.returncode, r.stdout), (0, "/agentbox-%s\n" % USER), r.stderr)
        self.assertIn("--cgroup-parent /agentbox-%s" % USER, r.stderr)
        uid = int(subprocess.check_output(["id", "-u", USER]))
        for ctrl in ("memory", "pids"):
            d = "/sys/fs/cgroup/%s/agentbox-%s" % (ctrl, USER)
            self.assertEqual(os.stat(d).st_uid, uid, d)
            self.assertEqual(os.stat(d + "/cgroup.procs").st_uid, uid, d)
        with open(UNIT) as f:
            unit = f.read()
        exec_start = [x for x in unit.splitlines() if x.startswith("ExecStart=")]
        self.assertEqual(exec_start, ["ExecStart=%s setup-delegation %s"
                                      % (os.path.realpath(BIN), USER)])
        self.assertIn("WantedBy=multi-user.target", unit)
        self.assertEqual(os.readlink(WANTS), "../" + os.path.basename(UNIT))
        # what a boot does: the unit's command makes the groups anew
        for ctrl in os.listdir("/sys/fs/cgroup"):
            d = "/sys/fs/cgroup/%s/agentbox-%s" % (ctrl, USER)
            if os.path.isdir(d):
                os.rmdir(d)
        r = subprocess.run(exec_start[0][len("ExecStart="):].split(), capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.stat("/sys/fs/cgroup/memory/agentbox-%s" % USER).st_uid, uid)
        # again: nothing breaks on groups that exist
        self.assertEqual(ab("setup-delegation", USER).returncode, 0)
        r = ab("setup-delegation", "--remove", USER)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(UNIT) or os.path.lexists(WANTS))
        self.assertFalse(os.path.exists("/sys/fs/cgroup/memory/agentbox-%s" % USER))


if __name__ == "__main__":
    unittest.main()
