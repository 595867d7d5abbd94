"""Helpers of the escape battery's part B (processes, privilege, terminal,
resources) on top of harness.py: markers for processes left behind, host
processes to attack, agentbox started by the test itself (to SIGKILL it,
give it a terminal or watch its memory), and timeouts in both modes."""

import json
import os
import pty
import random
import signal
import subprocess
import termios
import time

import harness
from harness import BIN, ROOT, RunMode, ServeMode, base_options


def delegated():
    """--cgroup-parent where CI delegated a cgroup subtree to this user
    (tests/setup-delegation), as the integration tests do."""
    parent = os.environ.get("AGENTBOX_TEST_DELEGATED_PARENT")
    return ("--cgroup-parent", parent) if parent else ()


def marker():
    """A unique argument for `sleep 600 MARKER`: sleep adds its arguments,
    so the marker is a duration (0.<digits>) no other process has."""
    return "0.%09d" % random.randrange(10**9)


def linger(mark, seconds=600):
    """Shell words of a process that lives long and carries the marker."""
    return "sleep %d %s" % (seconds, mark)


def pids_with_arg(arg):
    """Host pids (every pid namespace shows in the host's /proc) of live
    processes with an argument exactly equal to arg."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if arg.encode() in args and state != "Z":
            found.append(int(d))
    return found


def wait_gone(arg, seconds=5.0):
    """Wait until no process carries arg; the pids still there after the
    deadline (empty when all are gone). Leftovers sleep 600 s: a deadline
    of seconds tells "killed" from "left behind", it measures no speed."""
    deadline = time.monotonic() + seconds
    while True:
        left = pids_with_arg(arg)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_leftovers(arg):
    """Cleanup: SIGKILL what a failed test left (only our marker's pids)."""
    for pid in pids_with_arg(arg):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def state(pid):
    """The state letter of a process (R, S, T, t, Z, ...), None if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def vm_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


class Extra:
    """Mixin for the attack classes of part B (before Attacks in the bases)."""

    def setUp(self):
        super().setUp()
        self.marks = []

    def mark(self):
        m = marker()
        self.marks.append(m)
        self.addCleanup(kill_leftovers, m)
        return m

    @property
    def serve(self):
        return self.mode is ServeMode

    def host_sleep(self):
        """A process of the host that the sandbox must not touch."""
        m = self.mark()
        p = subprocess.Popen(["sleep", "600", m])
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        return p

    def assert_alive(self, p, what):
        self.assertIsNone(p.poll(), "%s died" % what)
        self.assertIn(state(p.pid), ("S", "R"), "%s was stopped or traced" % what)

    def assert_no_leftover(self, mark, seconds=5.0):
        left = wait_gone(mark, seconds)
        self.assertEqual(left, [], "processes outlived the command: %s" % [
            _cmdline(p) for p in left])

    def timed(self, script, seconds, options=()):
        """script with a timeout of seconds (agentbox's own, in each mode)."""
        if self.serve:
            box = self.box(options)
            m = box.call({"op": "exec", "command": script, "timeout": seconds},
                         harness.TIMEOUT)
            if m["type"] != "result":
                raise AssertionError("exec failed: %s" % m)
            return harness.Result(m["exit_code"], m.get("stdout", ""), m.get("stderr", ""),
                                  harness._denied(m.get("denied_syscalls")), m)
        return self.sh(script, options=("--timeout", "%ds" % seconds, *options))

    def exec_raw(self, script, options=()):
        """Serve mode: the server's answer to one exec as it is (a result or
        an error); run mode: the report (or an AssertionError)."""
        if self.serve:
            return self.box(options).call({"op": "exec", "command": script})
        return self.sh(script, options=options).raw

    def assert_answers(self, options=()):
        """agentbox still works: in serve mode the same session answers."""
        r = self.sh("echo ok", options=options)
        self.assertEqual((r.code, r.out), (0, "ok\n"), r)

    def spawn(self, options=(), script=None, mode=None, **popen):
        """agentbox started by the test itself: `run ... -- /bin/sh -c
        script` (run mode) or `serve` (serve mode), its Popen returned."""
        mode = mode or self.mode.name
        ws = harness.make_dir()
        self.addCleanup(__import__("shutil").rmtree, ws, True)
        argv = [BIN, mode, *base_options(ws), *self.options, *options]
        if mode == "run":
            argv += ["--", "/bin/sh", "-c", script]
        p = subprocess.Popen(argv, **popen)
        p.ws = ws
        self.addCleanup(_reap, p)
        return p

    def limits(self, r=None, options=()):
        """The limits in force: of the session (serve) or of the run r."""
        return self.box(options).hello["limits"] if self.serve else r.raw["limits"]


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return None


def _reap(p):
    if p.poll() is None:
        p.kill()
    p.wait()
    for f in (p.stdin, p.stdout, p.stderr):
        if f:
            f.close()


def send(p, req):
    p.stdin.write((json.dumps(req) + "\n").encode())
    p.stdin.flush()


def recv_until(p, rid):
    """Messages of a serve process until the final one of request rid."""
    while True:
        line = p.stdout.readline()
        if not line:
            raise AssertionError("agentbox serve ended")
        m = json.loads(line)
        if m.get("id") == rid and m["type"] != "output":
            return m


def open_pty(test):
    """A pty pair as a terminal of the caller: (master, slave), raw mode
    with echo, so injected input would be readable at once."""
    master, slave = pty.openpty()
    test.addCleanup(os.close, master)
    test.addCleanup(os.close, slave)
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ICANON  # lflag: input readable without a newline
    attrs[3] |= termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    return master, slave


def read_all(fd):
    """What can be read from fd now, without waiting."""
    os.set_blocking(fd, False)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        out += chunk
    os.set_blocking(fd, True)
    return out


def as_controlling_terminal(slave):
    """preexec_fn: a new session with slave as its controlling terminal,
    as a shell gives a program started in a terminal."""
    def f():
        os.setsid()
        import fcntl
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    return f


__all__ = ["Extra", "ROOT", "RunMode", "ServeMode", "delegated", "linger", "marker",
           "pids_with_arg", "wait_gone", "state", "vm_hwm_kb", "send", "recv_until",
           "open_pty", "read_all", "as_controlling_terminal"]
