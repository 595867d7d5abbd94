"""Attacks on agentbox itself: its binary through /proc/<pid>/exe, the fds and
working directory its caller left it, and options smuggled in through the
command's own arguments."""

import hashlib
import os
import subprocess
import unittest

from harness import BIN, HOST, RunMode, Attacks, base_options, both_modes, one_mode


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# A command is in the host's network namespace exactly when this prints the
# host's inode; /host exists only if a --bind /:/host got through.
NET_AND_BIND = ('echo "net=$(stat -L -c %i /proc/self/ns/net)"; '
                '[ -e /host ] && echo BOUND-HOST; echo args: "$@"')


# the fds open in the command (python opens none of its own at startup)
FDS = ("import os\nfds = []\nfor n in range(4096):\n"
       "    try:\n        os.fstat(n)\n        fds.append(n)\n    except OSError:\n        pass\n"
       "print('fds:', fds)")


class Launcher(Attacks):
    def test_overwrite_agentbox_through_proc_pid_exe(self):
        binary = os.path.realpath(BIN)
        before = digest(binary)
        # every process's exe: readable ones are hashed (none may be
        # agentbox's binary), and each is opened for writing and truncated
        script = ('for p in /proc/[0-9]*; do '
                  'sha256sum $p/exe 2>/dev/null; '
                  '( : >> $p/exe ) 2>/dev/null && echo "OPENED-W $p"; '
                  '( : > $p/exe ) 2>/dev/null && echo "TRUNCATED $p"; done; '
                  'cp /proc/1/exe /tmp/init 2>/dev/null && echo COPIED-INIT; '
                  'readlink /proc/1/exe && echo READ-INIT-EXE; '
                  'python3 -c "import os; os.open(\'/proc/1/exe\', os.O_RDONLY)" 2>/dev/null '
                  '&& echo REOPENED-INIT; true')
        r = self.guarded(script)
        self.assertEqual(digest(binary), before)
        for mark in ("OPENED-W", "TRUNCATED", "COPIED-INIT", "READ-INIT-EXE", "REOPENED-INIT"):
            self.assertNotIn(mark, r.out, r)
        self.assertNotIn(before, r.out, r)
        self.assertIn("/proc/", r.out, r)  # some process's exe (the command's own) was read

    def test_inherited_fds_and_working_directory(self):
        home, secret, token = self.host_secret()
        fd = os.open(secret, os.O_RDONLY)  # inheritable: left open for agentbox
        self.addCleanup(os.close, fd)
        os.set_inheritable(fd, True)
        dfd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
        self.addCleanup(os.close, dfd)
        os.set_inheritable(dfd, True)
        box = self.sandbox(pass_fds=(fd, dfd), cwd=home)
        r = box.exec(["/usr/bin/python3", "-c", FDS])
        self.assertEqual(r.out, "fds: [0, 1, 2]\n", r)
        script = ('n=$1; d=$2; '
                  'cat /proc/self/fd/$n /proc/$$/fd/$n /dev/fd/$n; cat <&$n; '
                  'ls /proc/$$/fd/$d/ /proc/self/fd/$d/; '
                  # regular files and directories only: the pipes of the
                  # command's own processes would block a reader
                  'for f in /proc/[0-9]*/fd/*; do [ -f "$f" ] && head -c 100 "$f"; '
                  '[ -d "$f" ] && ls "$f/"; done 2>/dev/null; '
                  'ls /proc/1/fd/ && echo LISTED-INIT-FDS; '
                  'pwd; ls "$3" 2>&1; cat ~/id_rsa id_rsa "$OLDPWD/id_rsa" "$PWD/id_rsa"; true')
        r = box.sh(script, args=("sh", str(fd), str(dfd), home), timeout=60)
        self.assertNotIn(token, r.out, r)
        self.assertNotIn("LISTED-INIT-FDS", r.out, r)
        self.assertIn("/workspace\n", r.out, r)  # the caller's cwd is not the command's

    def test_options_injected_as_the_command(self):
        # `agentbox run -- --net host`: "--net" is the command, not an option
        r = self.exec(["--net", "host"])
        self.assertEqual(r.code, 127, r)
        r = self.exec(["--bind", "/:/host"])
        self.assertEqual(r.code, 127, r)

    def test_options_injected_as_the_command_arguments(self):
        args = ["--net", "host", "--bind", "/:/host", "--seccomp", "none", "--", "-c"]
        r = self.sh(NET_AND_BIND, args=("sh", *args))
        self.assertNotIn("net=%d\n" % HOST["net"], r.out, r)
        self.assertIn("net=", r.out, r)
        self.assertNotIn("BOUND-HOST", r.out, r)
        self.assertIn("args: " + " ".join(args[:-2]), r.out, r)
        r = self.exec(["/bin/sh", "-c", "python3 -c 'import ctypes; "
                       "print(ctypes.CDLL(None).syscall(250, 0, 0, 0, 0))'", "--seccomp", "none"])
        self.assertIn("keyctl", r.denied, r)  # the profile still applies

    def test_shell_string_starting_with_a_dash(self):
        # a shell string is the shell's command, never its options: run's
        # `-c STRING` and a session's `command` both reach /bin/sh -c
        script = "--net host --bind /:/host; -i; " + NET_AND_BIND
        if self.mode is RunMode:
            r = run_argv(self.ws, "-c", script)
            code, out, err = r.returncode, r.stdout, r.stderr
        else:
            r = self.sh(script)
            code, out, err = r.code, r.out, r.err
        self.assertEqual(code, 0, (code, out, err))
        self.assertIn("--net: not found", err)
        self.assertIn("-i: not found", err)
        self.assertIn("net=", out)
        self.assertNotIn("net=%d\n" % HOST["net"], out)
        self.assertNotIn("BOUND-HOST", out)


both_modes(globals(), Launcher)


def run_argv(ws, *argv):
    """`agentbox run` with the harness's options, then argv as given."""
    return subprocess.run([BIN, "run", *base_options(ws), *argv], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)


class LauncherCommandLine(Attacks):
    """Run only: the command line of `agentbox run` itself, where a command
    given without `--` is followed by what looks like agentbox's options
    (a session takes its commands as JSON, never as options)."""

    def test_options_after_the_command_without_double_dash(self):
        p = run_argv(self.ws, "/bin/sh", "-c", NET_AND_BIND, "sh", "--net", "host", "--bind",
                          "/:/host")
        self.assertEqual(p.returncode, 0, p)
        self.assertNotIn("net=%d\n" % HOST["net"], p.stdout, p)
        self.assertNotIn("BOUND-HOST", p.stdout, p)
        self.assertIn("args: --net host --bind /:/host", p.stdout, p)


one_mode(globals(), LauncherCommandLine, RunMode)

if __name__ == "__main__":
    unittest.main()
