"""Privilege: setuid and file-capability binaries gain nothing, ids cannot
be changed, no new user namespace, no write to /proc/sys, /sys or a
cgroup's release_agent, and the kernel interfaces an exploit would start
from (keyctl, bpf, perf_event_open, userfaultfd, io_uring, foreign ABIs)
are refused and reported."""

import os
import shutil
import stat
import subprocess
import unittest

from attacklib_b import Extra
import harness
from harness import ROOT, SANDBOX_UID, Attacks, both_modes


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return "unreadable: %s" % e.strerror


def release_agents():
    """Every release_agent of the host's cgroup v1 hierarchies."""
    found = {}
    if os.path.isdir("/sys/fs/cgroup"):
        for h in os.listdir("/sys/fs/cgroup"):
            p = os.path.join("/sys/fs/cgroup", h, "release_agent")
            if os.path.exists(p):
                found[p] = read(p)
    return found


class Privilege(Extra, Attacks):
    def test_setuid_root_binary(self):
        if ROOT:
            # a setuid-root copy of id in the workspace, made by host root
            shutil.copy("/usr/bin/id", os.path.join(self.ws, "id"))
            os.chown(os.path.join(self.ws, "id"), 0, 0)
            os.chmod(os.path.join(self.ws, "id"), 0o4755)
            self.assertTrue(os.stat(os.path.join(self.ws, "id")).st_mode & stat.S_ISUID)
            r = self.sh("/workspace/id -u; /workspace/id -ru; id -u")
            euid, ruid, me = r.out.split()
            self.assertEqual(euid, me, r)
            self.assertEqual(ruid, me, r)
            self.assertNotEqual(euid, "0", r)
        else:
            # an unprivileged caller cannot make one: su of the system view
            r = self.sh("su -c 'id -u' root </dev/null; echo su=$?; id -u")
            self.assertIn("su=1", r.out.split(), r)
            self.assertNotIn("0", r.out.split(), r)

    def test_setuid_binary_of_the_system_view(self):
        # passwd waits for the current password: its ids while it waits
        r = self.sh("sleep 3 | passwd >/dev/null 2>&1 & sleep 1; "
                    "grep -E '^(Uid|Gid|CapEff):' /proc/$!/status; tr '\\0' ' ' </proc/$!/cmdline; "
                    "echo; kill $! 2>/dev/null; id -u; id -g")
        lines = r.out.splitlines()
        self.assertEqual(lines[3], "passwd ", r)  # it was passwd that we watched
        uid, gid = lines[4], lines[5]
        self.assertEqual(lines[0].split()[1:], [uid] * 4, r)  # real, effective, saved, fs
        self.assertEqual(lines[1].split()[1:], [gid] * 4, r)
        self.assertEqual(lines[2].split()[1], "0000000000000000", r)
        self.assertNotEqual(uid, "0", r)
        self.assertTrue(os.stat("/usr/bin/passwd").st_mode & stat.S_ISUID)

    def test_file_capability_binary(self):
        cat = os.path.join(self.ws, "cat")
        shutil.copy("/bin/cat", cat)
        if ROOT:
            os.chown(cat, SANDBOX_UID, SANDBOX_UID)
            subprocess.run(["setcap", "cap_dac_read_search+ep", cat], check=True)
        else:
            # an unprivileged user sets a namespaced (v3) file capability
            # as root of a user namespace of its own
            subprocess.run(["unshare", "-r", "setcap", "cap_dac_read_search+ep", cat],
                           check=True)
        self.assertIn("cap_dac_read_search",
                      subprocess.run(["getcap", cat], capture_output=True, text=True).stdout)
        r = self.sh("/workspace/cat /etc/shadow >/dev/null 2>&1; echo shadow=$?; "
                    "/workspace/cat /proc/self/status | grep -E '^Cap(Prm|Eff):'")
        lines = r.out.splitlines()
        self.assertEqual(lines[0], "shadow=1", r)
        self.assertEqual([ln.split()[1] for ln in lines[1:]], ["0000000000000000"] * 2, r)

    def test_leave_a_setuid_file_behind(self):
        # as root, the workspace is idmapped: what the command makes is
        # root's on the host, so a setuid bit would make a setuid-root file
        r = self.sh("cp /bin/sh sh-copy; chmod 4755 sh-copy; chmod 2755 sh-copy; "
                    "cp -p /usr/bin/passwd passwd-copy; "
                    "python3 -c 'import os; os.open(\"made\", os.O_CREAT|os.O_WRONLY, 0o6755)'; true")
        for name in ("sh-copy", "passwd-copy", "made"):
            p = os.path.join(self.ws, name)
            if not os.path.exists(p):
                continue
            st = os.stat(p)
            if ROOT:
                self.assertEqual(st.st_uid, 0, r)  # the workspace owner's, through the idmap
                self.assertEqual(st.st_mode & (stat.S_ISUID | stat.S_ISGID), 0, (name, r))
            else:
                self.assertEqual(st.st_uid, os.getuid(), r)  # the caller's own, never root
        # in the layer of an overlay, not on the host (commit strips the bits)
        self.assertEqual(os.path.exists(os.path.join(self.ws, "sh-copy")), not harness.OVERLAY, r)

    def test_setuid_to_root(self):
        r = self.sh("for s in setuid setresuid setgid setgroups; do /probe sys $s; done; "
                    "id -u; grep -E '^(Uid|Gid):' /proc/self/status")
        res = dict(ln.split("=") for ln in r.out.splitlines()[:4])
        for name, err in res.items():
            self.assertNotEqual(err, "ok", "%s(0) worked: %r" % (name, r))
        uid = r.out.splitlines()[4]
        self.assertNotEqual(uid, "0", r)
        self.assertEqual(r.out.splitlines()[5].split()[1:], [uid] * 4, r)

    def test_unshare_user_namespace(self):
        r = self.sh("unshare -U -r id -u; echo unshare=$?; unshare -Ur -m -n true; echo all=$?; "
                    "/probe sys unshare_newuser")
        self.assertEqual(r.out.split(), ["unshare=1", "all=1", "unshare_newuser=EPERM"], r)
        self.assertIn("unshare", r.denied, r)

    def test_clone_new_user_namespace(self):
        r = self.probe("sys", "clone_newuser")
        self.assertEqual(r.out, "clone_newuser=EPERM\n", r)
        self.assertIn("clone", r.denied, r)

    def test_proc_sys_writes(self):
        watched = ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
                   "/proc/sys/kernel/hostname", "/proc/sys/fs/suid_dumpable"]
        before = {p: read(p) for p in watched}
        # core_pattern and modprobe are the classic ways to run a program
        # of the sandbox as host root
        r = self.guarded(
            "w() { (printf '%s\\n' \"$2\" >/proc/sys/$1) 2>/dev/null && echo $1=written || "
            "echo $1=refused; }; "
            "w kernel/core_pattern '|/workspace/pwn'; w kernel/modprobe /workspace/pwn; "
            "w kernel/hostname pwned; w fs/suid_dumpable 2; w vm/drop_caches 1; "
            "(echo h >/proc/sysrq-trigger) 2>/dev/null && echo sysrq=written || "
            "echo sysrq=refused")
        self.assertEqual(r.out.split(), [
            "kernel/core_pattern=refused", "kernel/modprobe=refused",
            "kernel/hostname=refused", "fs/suid_dumpable=refused",
            "vm/drop_caches=refused", "sysrq=refused"], r)
        self.assertEqual({p: read(p) for p in watched}, before)

    def test_sys_writes(self):
        helper = "/sys/kernel/uevent_helper"
        before = read(helper)
        r = self.guarded(
            "[ -e /sys ] && echo has-sys; "
            "(echo /workspace/pwn >/sys/kernel/uevent_helper) 2>/dev/null && echo written; "
            "mkdir -p /tmp/sys; mount -t sysfs sysfs /tmp/sys 2>/dev/null && echo mounted; "
            "ls /tmp/sys | wc -l; "
            "unshare -Urmn mount -t sysfs sysfs /tmp/sys 2>/dev/null && echo mounted-in-ns; "
            "echo end")
        self.assertEqual(r.out.split(), ["0", "end"], r)
        self.assertIn("mount", r.denied, r)
        self.assertEqual(read(helper), before)

    def test_cgroup_release_agent(self):
        # CVE-2022-0492: mount a cgroup v1 hierarchy (in a new user and
        # cgroup namespace if need be) and set its release_agent; /tmp/cg
        # is a plain directory unless a mount worked
        before = release_agents()
        r = self.guarded(
            "mkdir -p /tmp/cg; "
            "for c in rdma memory pids; do "
            "mount -t cgroup -o $c cgroup /tmp/cg 2>/dev/null && echo mounted-$c; "
            "[ -e /tmp/cg/cgroup.procs ] && echo cgroupfs-$c; "
            "unshare -UrmC sh -c \"mount -t cgroup -o $c cgroup /tmp/cg && "
            "echo /workspace/pwn >/tmp/cg/release_agent && echo written-in-ns-$c\" "
            "2>/dev/null; done; "
            "for f in /sys/fs/cgroup/*/release_agent; do "
            "(echo /workspace/pwn >$f) 2>/dev/null && echo written-$f; done; echo end")
        self.assertEqual(r.out, "end\n", r)
        self.assertIn("mount", r.denied, r)
        self.assertIn("unshare", r.denied, r)
        self.assertEqual(release_agents(), before)

    def test_cgroup_procs_of_parent_groups(self):
        r = self.sh(
            "cut -d: -f3 /proc/self/cgroup /proc/1/cgroup | sort -u; "
            "grep -c ' - cgroup' /proc/self/mountinfo; "
            "[ -e /sys/fs/cgroup ] && echo has-cgroupfs; "
            "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/memory/cgroup.procs "
            "/sys/fs/cgroup/../cgroup.procs; do (echo $$ >$f) 2>/dev/null && echo moved; done; "
            "echo end")
        # the sandbox's cgroup is the root of its view, and no cgroupfs is there
        self.assertEqual(r.out.split(), ["/", "0", "end"], r)

    def _syscall(self, name, shown_as=None):
        r = self.probe("sys", name)
        self.assertEqual(r.out, "%s=EPERM\n" % name, r)
        self.assertIn(shown_as or name, r.denied, r)

    def test_keyctl(self):
        self._syscall("keyctl")

    def test_add_key(self):
        self._syscall("add_key")

    def test_bpf(self):
        self._syscall("bpf")

    def test_perf_event_open(self):
        self._syscall("perf_event_open")

    def test_userfaultfd(self):
        self._syscall("userfaultfd")

    def test_io_uring_setup(self):
        self._syscall("io_uring_setup")

    def test_i386_abi(self):
        r = self.probe("int80")
        # SIGSYS from the filter; this VM's kernel faults int 0x80 itself
        # (SIGSEGV) before any filter runs, outside a sandbox too
        self.assertIn(r.out, ("killed-by-31\n", "killed-by-11\n"), r)

    def test_x32_abi(self):
        r = self.probe("x32")
        self.assertEqual(r.out, "killed-by-31\n", r)


both_modes(globals(), Privilege)

if __name__ == "__main__":
    unittest.main()
