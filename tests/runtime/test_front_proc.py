"""agentbox runtime's network front (issue 49): HTTP and gRPC are parsed in
a confined process that holds no sandbox control; the session is in its
child. Checked from outside, through /proc."""

import os
import signal
import time
import unittest

from rtlib import Runtime, descendants


def listener_pid(port):
    inode = None
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            for line in f.readlines()[1:]:
                c = line.split()
                if int(c[1].split(":")[1], 16) == port and c[3] == "0A":
                    inode = c[9]
    assert inode, "no listening socket on port %d" % port
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == "socket:[%s]" % inode:
                    found.append(int(pid))
                    break
        except OSError:
            pass
    return found


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def fd_targets(pid):
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return out


class Front(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime()
        self.addCleanup(self.rt.close)

    def test_the_listener_is_held_by_a_confined_process_without_the_sandbox(self):
        pids = listener_pid(self.rt.port)
        if os.geteuid() == 0:
            self.assertEqual(pids, [self.rt.p.pid])  # the process started, alone
        else:  # not dumpable: its fds are not even its own user's to read
            self.assertEqual(pids, [])
            self.assertRaises(PermissionError, os.listdir, "/proc/%d/fd" % self.rt.p.pid)
        st = status(self.rt.p.pid)
        self.assertEqual(int(st["CapEff"], 16), 0)
        self.assertEqual(int(st["CapBnd"], 16), 0 if os.geteuid() == 0 else int(st["CapBnd"], 16))
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")
        if os.geteuid() == 0:
            self.assertNotIn("0", st["Uid"].split())
            self.assertNotIn("0", st["Gid"].split())
        targets = fd_targets(self.rt.p.pid) if os.geteuid() == 0 else []
        self.assertFalse([t for t in targets if "pidfd" in t or "cgroup" in t or
                          "seccomp" in t], targets)
        # and it serves: a command runs in the sandbox its child holds
        st, _, body = self.rt.request("POST", "/execute", b'{"command":"echo hi"}')
        self.assertEqual(st, 200)
        self.assertIn(b"hi", body)

    def test_killing_the_front_ends_the_sandbox(self):
        kids = descendants(self.rt.p.pid)
        self.assertTrue(kids)
        self.rt.p.send_signal(signal.SIGKILL)
        self.rt.p.wait(10)
        deadline = time.time() + 10
        while time.time() < deadline and any(os.path.exists("/proc/%d" % k) for k in kids):
            time.sleep(0.05)
        self.assertFalse([k for k in kids if os.path.exists("/proc/%d/status" % k) and
                          status(k).get("State", "").split()[0] != "Z"])
        time.sleep(0.2)
        self.assertIn("closed its link without a drain", "".join(self.rt.err))


if __name__ == "__main__":
    unittest.main()
