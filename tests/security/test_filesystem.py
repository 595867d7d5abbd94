"""Filesystem escapes: reading the host's secrets, writing outside the
workspace, /skills, hard and symbolic links, `..`, /proc's magic links,
open_by_handle_at, and a mount source swapped while agentbox starts."""

import ctypes
import os
import shutil
import threading
import unittest

from harness import (ROOT, SANDBOX_UID, ServeMode, Attacks, attempt, both_modes,
                     make_dir, one_mode)

# top-level names of the view (README "What the command sees"); /probe is
# the harness's own bind
VIEW_TOP = {"bin", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp",
            "usr", "workspace", "skills", "probe"}


def snapshot(top):
    """Every entry under top with its type, mode and content: what must not
    change."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            data = None
            if os.path.islink(p):
                data = os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    data = f.read()
            out[os.path.relpath(p, top)] = (st.st_mode, st.st_uid, data)
    return out


class Filesystem(Attacks):
    def test_read_etc_shadow(self):
        r = self.sh("cat /etc/shadow; echo status=$?; head -c 64 /etc/gshadow; echo status=$?")
        self.assertIn("status=1", r.out, r)
        self.assertNotIn("status=0", r.out, r)
        self.assertNotIn("root:", r.out, r)

    def test_read_a_host_secret_outside_the_workspace(self):
        home, secret, token = self.host_secret()
        r = self.sh('cat "$1"; ls -a "$2"; cat /tmp/*/id_rsa /home/*/id_rsa /home/*/*/id_rsa;'
                    'grep -rs "$3" /tmp /home /workspace /etc 2>/dev/null; true',
                    args=("sh", secret, home, token))
        self.assertNotIn(token, r.out + r.err, r)
        self.assertIn("No such file or directory", r.err, r)

    def test_read_root_home_and_other_homes(self):
        r = self.sh("ls -a /root; echo status=$?; ls /home; cat /root/.bashrc /root/.ssh/* "
                    "/root/.profile 2>/dev/null; echo end")
        self.assertIn("status=2", r.out, r)  # ls: /root does not exist
        homes = r.out.split("status=2\n", 1)[1].split("end\n")[0].split()
        self.assertEqual(homes, ["agent"], r)

    def test_write_outside_the_workspace(self):
        outside = make_dir()  # a host temp dir the sandbox user could write to
        self.addCleanup(shutil.rmtree, outside, True)
        os.chmod(outside, 0o777)
        name = "agentbox-sec-" + os.urandom(6).hex()
        targets = ["/", "/usr", "/usr/bin", "/etc", "/lib", "/home", "/proc", "/dev", outside]
        self.addCleanup(lambda: [os.unlink(os.path.join(t, name)) for t in targets
                                 if os.path.lexists(os.path.join(t, name))])
        r = self.guarded('n=$1; shift; for d; do mkdir -p "$d" 2>/dev/null; '
                         'echo pwned > "$d/$n" && echo "WROTE $d"; done; true',
                         args=("sh", name, *targets))
        for t in targets:
            self.assertFalse(os.path.lexists(os.path.join(t, name)), (t, r))
        # writes succeed only where the view has writable space of its own:
        # the host temp dir's path lies in the sandbox's own /tmp tmpfs
        self.assertEqual(r.out, "WROTE %s\n" % outside, r)
        self.assertEqual(os.listdir(outside), [])

    def test_write_proc_files(self):
        """/proc's files stay unwritable: by Landlock's rules, and under an
        overlay workspace (whose write rule is the view's root's, for its
        checkpoints) by /proc's read-only mount."""
        r = self.sh("echo 999 > /proc/self/oom_score_adj && echo WROTE oom_score_adj; "
                    "echo pwned > /proc/self/comm && echo WROTE comm; "
                    "echo 0 > /proc/self/loginuid && echo WROTE loginuid; "
                    "cat /proc/self/oom_score_adj; true")
        self.assertNotIn("WROTE", r.out, r)
        self.assertNotEqual(r.out.strip(), "999", r)

    def test_write_under_skills_even_after_chmod_and_remount(self):
        skills = make_dir()
        self.addCleanup(shutil.rmtree, skills, True)
        os.mkdir(os.path.join(skills, "pdf"))
        with open(os.path.join(skills, "pdf", "SKILL.md"), "w") as f:
            f.write("original skill\n")
        if ROOT:  # writable by the sandbox user but for the read-only mount
            for p in (os.path.join(skills, "pdf"), os.path.join(skills, "pdf", "SKILL.md")):
                os.chown(p, SANDBOX_UID, SANDBOX_UID)
        before = snapshot(skills)
        attack = ('try() { echo pwned >> /skills/pdf/SKILL.md && echo WROTE1; '
                  'echo pwned > /skills/new && echo WROTE2; rm -f /skills/pdf/SKILL.md && '
                  'echo REMOVED; mv /skills/pdf /skills/moved && echo MOVED; '
                  'mkdir /skills/pdf/x && echo MKDIR; }\n'
                  'cat /skills/pdf/SKILL.md; try\n'
                  'chmod -R 777 /skills; chown -R $(id -u) /skills; '
                  'mount -o remount,rw /skills; mount -o remount,rw,bind /skills; '
                  'mount --bind /tmp /skills; umount /skills; umount -l /skills\n'
                  'python3 -c "import ctypes; l=ctypes.CDLL(None, use_errno=True); '
                  'print(\'mount_setattr\', l.syscall(442, -100, b\'/skills\', 0, 0, 0))"\n'
                  'unshare -rm sh -c "mount -o remount,rw /skills; echo pwned > /skills/new '
                  '&& echo WROTE3"\n'
                  'try; true')
        r = self.guarded(attack, options=("--skills", skills))
        self.assertTrue(r.out.startswith("original skill\n"), r)  # /skills is the dir
        for mark in ("WROTE", "REMOVED", "MOVED", "MKDIR"):
            self.assertNotIn(mark, r.out, r)
        self.assertEqual(snapshot(skills), before)

    def test_hard_links_from_the_workspace_to_outside(self):
        home, secret, token = self.host_secret()
        r = self.sh('for f in /etc/shadow /etc/passwd /usr/bin/sh /probe "$1" /proc/self/environ;'
                    ' do ln "$f" "/workspace/link$(echo $f | tr / _)" && echo "LINKED $f"; '
                    'done; ln -P /proc/self/root/etc/passwd /workspace/viaproc && echo LINKED; '
                    'python3 -c "import os; os.link(\'/etc/passwd\', \'/workspace/py\')" '
                    '|| echo refused; true', args=("sh", secret))
        self.assertNotIn("LINKED", r.out, r)
        self.assertIn("refused", r.out, r)
        self.assertIn("Invalid cross-device link", r.err, r)
        self.assertEqual(os.listdir(self.ws), [])

    def test_symlinks_planted_in_the_workspace(self):
        home, secret, token = self.host_secret()
        os.symlink(secret, os.path.join(self.ws, "abs"))
        os.symlink(os.path.relpath(secret, self.ws), os.path.join(self.ws, "rel"))
        os.symlink(home, os.path.join(self.ws, "dir"))
        os.symlink("/proc/self/root" + secret, os.path.join(self.ws, "magic"))
        r = self.sh("ls -l abs rel dir magic; for f in abs rel dir/id_rsa magic; do cat $f; "
                    "done; echo pwned > dir/new; echo pwned > abs; cp abs got; true")
        self.assertIn("abs -> " + secret, r.out, r)  # the links are there
        self.assertNotIn(token, r.out + r.err, r)
        self.assertFalse(os.path.exists(os.path.join(home, "new")))
        with open(secret) as f:
            self.assertEqual(f.read(), token + "\n")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "got")))

    def test_dotdot_out_of_the_workspace(self):
        home, secret, token = self.host_secret()
        up = "/workspace" + "/.." * 12
        r = self.sh('cat "$1$2"; cd /workspace/../../../../..; pwd; ls -a; '
                    'ls -a "$1"; cd "$1$3" && ls', args=("sh", up, secret, home))
        self.assertNotIn(token, r.out, r)
        self.assertEqual(r.out.split("\n")[0], "/", r)
        names = set(r.out.split())
        self.assertIn("workspace", names, r)
        host_only = set(os.listdir("/")) - VIEW_TOP
        self.assertTrue(host_only)  # the host has names the view has not
        self.assertFalse(host_only & names, r)

    def test_proc_root_and_cwd_magic_links(self):
        home, secret, token = self.host_secret()
        r = self.sh('s=$1; for p in /proc/self /proc/1 /proc/[0-9]*; do '
                    'cat $p/root$s $p/cwd/../../..$s $p/root/proc/1/root$s; done 2>/dev/null; '
                    'ls /proc/1/root/ && echo LISTED-ROOT; ls /proc/1/cwd/ && echo LISTED-CWD; '
                    'cd /proc/1/root && echo ENTERED; '
                    'readlink /proc/1/root /proc/1/cwd && echo READ-LINK; true',
                    args=("sh", secret))
        self.assertNotIn(token, r.out, r)
        for mark in ("LISTED-ROOT", "LISTED-CWD", "ENTERED", "READ-LINK"):
            self.assertNotIn(mark, r.out, r)  # the init is not dumpable
        self.assertIn("Permission denied", r.err, r)

    def test_open_by_handle_at(self):
        # "shocker": a file handle made up for the root inode of the file
        # system under /workspace, opened with open_by_handle_at
        script = (
            "import ctypes, errno, os, struct\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "h = ctypes.create_string_buffer(struct.pack('IiII', 8, 1, 2, 0))\n"
            "fd = os.open('/workspace', os.O_RDONLY)\n"
            "r = libc.open_by_handle_at(fd, h, os.O_RDONLY)\n"
            "e = ctypes.get_errno()\n"
            "print('open_by_handle_at', r, errno.errorcode.get(e, e))\n"
            "if r >= 0: print('OPENED', os.listdir('/proc/self/fd/%d' % r))\n")
        r = self.sh('python3 -c "$1"', args=("sh", script))
        self.assertEqual(r.out, "open_by_handle_at -1 EPERM\n", r)
        self.assertIn("open_by_handle_at", r.denied, r)


both_modes(globals(), Filesystem)


class PlantedSymlinkFileOps(Attacks):
    """Serve only: the session's file operations (read, write, edit, ls)
    are done by agentbox itself rather than by a command, so a symlink
    planted in the workspace must not point them at the host. `run` has no
    file operations."""

    def test_file_operations_through_planted_symlinks(self):
        home, secret, token = self.host_secret()
        os.chmod(home, 0o777)
        os.chmod(secret, 0o666)
        os.symlink(secret, os.path.join(self.ws, "abs"))
        os.symlink(home, os.path.join(self.ws, "dir"))
        box = self.box()
        replies = [
            box.call({"op": "read", "path": "abs"}),
            box.call({"op": "read", "path": "/workspace/dir/id_rsa"}),
            box.call({"op": "ls", "path": "dir"}),
            box.call({"op": "grep", "pattern": "SECRET", "path": "/workspace"}),
            box.call({"op": "write", "path": "dir/new", "content": "pwned"}),
            box.call({"op": "write", "path": "abs", "content": "pwned", "overwrite": True}),
            box.call({"op": "edit", "path": "abs", "old_string": "SECRET",
                      "new_string": "pwned"}),
        ]
        for m in replies:
            self.assertNotIn(token, str(m), m)
        self.assertEqual(replies[0]["type"], "error", replies[0])
        self.assertEqual(replies[0]["code"], "file_not_found", replies[0])
        self.assertEqual(os.listdir(home), ["id_rsa"])
        with open(secret) as f:
            self.assertEqual(f.read(), token + "\n")


one_mode(globals(), PlantedSymlinkFileOps, ServeMode)


RENAME_EXCHANGE = 2


def exchange(a, b):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, a.encode(), -100, b.encode(), RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


class MountSourceSwap(Attacks):
    """A host thread swaps a mount source between the real directory and a
    symlink to a secret directory (renameat2 RENAME_EXCHANGE, atomic) while
    agentbox starts again and again: each start must bind the real directory
    or refuse with status 125 and one clear line; the secret is never seen
    nor written."""

    ATTEMPTS = 40

    def race(self, option, script):
        parent = make_dir()
        self.addCleanup(shutil.rmtree, parent, True)
        src = os.path.join(parent, "src")
        os.mkdir(src)
        with open(os.path.join(src, "marker"), "w") as f:
            f.write("REAL\n")
        if ROOT:
            os.chown(src, SANDBOX_UID, SANDBOX_UID)
        home, secret, token = self.host_secret("marker")
        os.chmod(home, 0o777)
        os.chmod(secret, 0o666)
        os.symlink(home, os.path.join(parent, "other"))
        stop = threading.Event()
        errors = []

        def flip():
            try:
                while not stop.is_set():
                    exchange(src, os.path.join(parent, "other"))
            except OSError as e:
                errors.append(e)

        t = threading.Thread(target=flip, daemon=True)
        t.start()
        outcomes = []
        try:
            for _ in range(self.ATTEMPTS):
                if option == "--workspace":
                    opts = ()
                    ws = src
                else:
                    opts = (option, src + ":/data" if option == "--bind" else src)
                    ws = self.ws
                outcomes.append(attempt(self.mode, ws, opts, script))
        finally:
            stop.set()
            t.join()
        self.assertEqual(errors, [])
        # put the real directory back in place before checking the host
        if os.path.islink(src):
            exchange(src, os.path.join(parent, "other"))
        with open(secret) as f:
            self.assertEqual(f.read(), token + "\n", "the secret was written through the swap")
        self.assertEqual(sorted(os.listdir(home)), ["marker"])
        for status, out, err in outcomes:
            self.assertNotIn(token, out, (status, out, err))
            if status == 125:
                lines = err.strip().split("\n")
                self.assertEqual(len(lines), 1, err)
                self.assertTrue(lines[0].startswith("agentbox: "), err)
            else:
                self.assertEqual((status, out), (0, "REAL\n"), err)
        # how many starts the flips hit depends on the machine's load; with
        # the real directory left in place, a start must bind it, so the
        # refusals above were not all there is
        status, out, err = attempt(self.mode, src if option == "--workspace" else self.ws,
                                   () if option == "--workspace" else opts, script)
        self.assertEqual((status, out), (0, "REAL\n"), err)

    def test_skills_source_swapped_with_a_symlink(self):
        self.race("--skills", "cat /skills/marker")

    def test_bind_source_swapped_with_a_symlink(self):
        self.race("--bind", "cat /data/marker; echo pwned > /data/new 2>/dev/null; true")

    def test_workspace_swapped_with_a_symlink(self):
        self.race("--workspace", "cat /workspace/marker; echo pwned > /workspace/new "
                  "2>/dev/null; true")


both_modes(globals(), MountSourceSwap)

if __name__ == "__main__":
    unittest.main()
