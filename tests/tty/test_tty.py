"""`agentbox run -t` and `agentbox exec -t` (a detached sandbox) in a real
terminal (tmux): the command sees a terminal sized like the caller's, a
resize reaches it, what is typed reaches it, Ctrl-C interrupts it (130),
TIOCSTI from inside cannot type into the caller's terminal, and the
caller's terminal modes are as they were after a SIGKILL of the command,
after a timeout and (exec) after a signal to agentbox itself. Without -t
(a pty of Python's own, no tmux), a command that changes the caller's
terminal it was given (stty -echo -icanon, a resize) leaves it as it was,
after its exit, a timeout, or a SIGTERM or SIGINT to agentbox. Every wait is
bounded; the tmux server is killed, the detached sandbox removed at the
end. Skips without tmux unless AGENTBOX_MUST_WORK=1. AGENTBOX_BIN names the
binary."""

import fcntl
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import time
import unittest
import uuid

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")
WAIT = 20


class Tmux:
    def __init__(self, tmp, cols, rows):
        self.sock = os.path.join(tmp, "tmux.sock")
        self.tmux(["-f", "/dev/null", "new-session", "-d", "-x", str(cols), "-y", str(rows),
                   "env", "PS1=$ ", "HOME=" + tmp, "sh"])
        self.wait_for("$ ")

    def tmux(self, args):
        return subprocess.run(["tmux", "-S", self.sock, *args], check=True, timeout=WAIT,
                              stdout=subprocess.PIPE, text=True).stdout

    def send(self, *keys):
        self.tmux(["send-keys", "-t", "0", *keys])

    def line(self, text):
        self.send("-l", text)
        self.send("Enter")

    def screen(self):
        return self.tmux(["capture-pane", "-p", "-J", "-S", "-200", "-t", "0"])

    def wait_for(self, text, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.screen()
            if text in s:
                return s
            time.sleep(0.05)
        raise AssertionError("%r never showed up; the screen:\n%s" % (text, self.screen()))

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], timeout=WAIT,
                       stderr=subprocess.DEVNULL)


def require_agentbox():
    r = subprocess.run([BIN, "run", "--", "true"], stdin=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    if r.returncode != 0:
        if os.environ.get("AGENTBOX_MUST_WORK") == "1":
            raise AssertionError("agentbox cannot run here: " + r.stderr)
        raise unittest.SkipTest("agentbox cannot run here: " + r.stderr)


class TtyCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("tmux"):
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                raise AssertionError("tmux is missing (packaging/install-build-deps)")
            raise unittest.SkipTest("tmux is not installed")
        require_agentbox()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="agentbox-tty-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.ws = os.path.join(self.tmp, "ws")
        os.mkdir(self.ws)
        self.t = Tmux(self.tmp, 91, 27)
        self.addCleanup(self.t.close)
        self.run_t = "%s run --workspace %s -t" % (BIN, self.ws)

    def mark(self):
        return "M" + uuid.uuid4().hex[:8]

    def run_shell(self, cmd, timeout=WAIT):
        """cmd in the tmux shell; its exit status and the screen."""
        m = self.mark()
        self.t.line('%s; echo %s"="$?' % (cmd, m))  # typed, it is not m=
        s = self.t.wait_for(m + "=", timeout)
        return int(s.split(m + "=")[1].split()[0]), s

    def modes_kept(self, cmd):
        """cmd between two `stty -g` of the caller's terminal: its status,
        and whether the modes are the same after."""
        before, after = (os.path.join(self.tmp, n) for n in ("before", "after"))
        st, _ = self.run_shell("stty -g > %s; %s" % (before, cmd))
        self.run_shell("stty -g > " + after)
        with open(before) as a, open(after) as b:
            return st, a.read() == b.read() and os.path.getsize(before) > 0


class RunTty(TtyCase):
    def test_size_and_resize(self):
        m = self.mark()
        self.t.line(self.run_t + " -- sh -c 'stty size; echo %s-re\"\"ady; "
                    "trap \"stty size; exit 3\" WINCH; while :; do sleep 0.05; done'; "
                    "echo %s\"=\"$?" % (m, m))
        s = self.t.wait_for(m + "-ready")
        self.assertIn("27 91", s)
        self.t.tmux(["resize-window", "-t", "0", "-x", "100", "-y", "30"])
        s = self.t.wait_for(m + "=")
        self.assertIn("30 100", s)
        self.assertIn(m + "=3", s)

    def test_readme_recipe_with_a_bound_file(self):
        """README's line for an agent CLI: its config directory and its
        ~/.claude.json bound in; the program saves the file by renaming a
        new one over it (as Claude Code does), which reaches the host."""
        claude, cfg = os.path.join(self.tmp, ".claude"), os.path.join(self.tmp, ".claude.json")
        os.mkdir(claude)
        with open(cfg, "w") as f:
            f.write("{}\n")
        script = os.path.join(self.tmp, "agent.py")
        with open(script, "w") as f:
            f.write("import os, sys\n"
                    "p = os.path.expanduser('~/.claude.json')\n"
                    "print('agent-re' + 'ady', flush=True)\n"
                    "open(p + '.tmp', 'w').write(open(p).read() + sys.stdin.readline())\n"
                    "os.replace(p + '.tmp', p)\n"
                    "open(os.path.expanduser('~/.claude/history'), 'w').write('h\\n')\n")
        st, s = self.run_shell_typed(
            "%s --net allow=api.anthropic.com --bind %s:/home/agent/.claude --bind "
            "%s:/home/agent/.claude.json --ro-bind %s:/agent.py -- python3 /agent.py"
            % (self.run_t, claude, cfg, script), "typed")
        self.assertEqual(st, 0, s)
        with open(cfg) as f:
            self.assertEqual(f.read(), "{}\ntyped\n")
        with open(os.path.join(claude, "history")) as f:
            self.assertEqual(f.read(), "h\n")

    def run_shell_typed(self, cmd, text):
        """cmd in the tmux shell, text typed to it once it says agent-ready."""
        m = self.mark()
        self.t.line('%s; echo %s"="$?' % (cmd, m))
        self.t.wait_for("agent-ready")
        self.t.line(text)
        s = self.t.wait_for(m + "=")
        return int(s.split(m + "=")[1].split()[0]), s

    def test_ctrl_c_interrupts(self):
        # and when agentbox's caller ignores SIGINT (as a background job
        # does): the command's new terminal still has its Ctrl-C
        for prefix in ("", "trap '' INT; "):
            m = self.mark()
            self.t.line("(%s%s -- sh -c 'echo %s-re\"\"ady; exec sleep 30'); echo %s\"=\"$?"
                        % (prefix, self.run_t, m, m))
            self.t.wait_for(m + "-ready")
            self.t.send("C-c")
            s = self.t.wait_for(m + "=", 10)
            self.assertIn(m + "=130", s, prefix)

    def test_tiocsti_cannot_type_into_the_callers_terminal(self):
        # with seccomp off too: the command's terminal is its own pty, so
        # what it pushes in is its own input, never the caller's shell's
        marker = os.path.join(self.tmp, "injected")
        inject = ("import fcntl, termios\n"
                  "for c in 'touch %s\\n':\n"
                  "    try: fcntl.ioctl(0, termios.TIOCSTI, c.encode())\n"
                  "    except OSError as e: print('denied', e.errno); break\n" % marker)
        with open(os.path.join(self.ws, "inject.py"), "w") as f:
            f.write(inject)
        for seccomp in ("default", "none"):
            st, s = self.run_shell(self.run_t + " --seccomp %s -- python3 inject.py" % seccomp)
            self.assertEqual(st, 0, s)
            if seccomp == "default":  # the shipped profile refuses TIOCSTI itself
                self.assertIn("denied", s)
            self.run_shell("true")  # anything typed in would have run by now
            self.assertFalse(os.path.exists(marker), "TIOCSTI reached the caller's shell")

    def test_modes_restored_after_sigkill_and_timeout(self):
        st, same = self.modes_kept(self.run_t + " -- sh -c 'kill -9 $$'")
        self.assertEqual((st, same), (137, True))
        st, same = self.modes_kept(self.run_t + " --timeout 1s --kill-after 100ms -- sleep 30")
        self.assertEqual((st, same), (124, True))

    def test_not_a_terminal_is_refused(self):
        r = subprocess.run([BIN, "run", "-t", "--", "true"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(r.returncode, 125)
        self.assertIn("stdin is not a terminal", r.stderr)


class ExecTty(TtyCase):
    """agentbox exec -t in a sandbox made by agentbox create."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ctmp = tempfile.mkdtemp(prefix="agentbox-tty-exec-")
        cls.rt = os.path.join(cls.ctmp, "rt")
        cls.cws = os.path.join(cls.ctmp, "ws")
        os.mkdir(cls.rt, 0o700)
        os.mkdir(cls.cws)
        cls.env = dict(os.environ, AGENTBOX_RUNTIME_DIR=cls.rt)
        r = subprocess.run([BIN, "create", "--workspace", cls.cws, "--name", "tty"],
                           env=cls.env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            shutil.rmtree(cls.ctmp, True)
            raise AssertionError("agentbox create failed: " + r.stderr)

    @classmethod
    def tearDownClass(cls):
        r = subprocess.run([BIN, "rm", "-f", "tty"], env=cls.env, capture_output=True,
                           text=True, timeout=60)
        shutil.rmtree(cls.ctmp, True)
        assert r.returncode == 0, r.stderr

    def setUp(self):
        super().setUp()
        self.exec_t = "env AGENTBOX_RUNTIME_DIR=%s %s exec -t tty" % (self.rt, BIN)

    def test_size_resize_and_typing(self):
        m = self.mark()
        self.t.line(self.exec_t + " -- sh -c 'stty size; read x; echo got-$x; "
                    "echo %s-re\"\"ady; trap \"stty size; exit 3\" WINCH; "
                    "while :; do sleep 0.05; done'; echo %s\"=\"$?" % (m, m))
        s = self.t.wait_for("27 91")
        self.t.line("hello")  # through stdin ops to the command's terminal
        self.t.wait_for("got-hello")
        self.t.wait_for(m + "-ready")
        self.t.tmux(["resize-window", "-t", "0", "-x", "100", "-y", "30"])
        s = self.t.wait_for(m + "=")
        self.assertIn("30 100", s)
        self.assertIn(m + "=3", s)

    def test_ctrl_c_interrupts(self):
        for prefix in ("", "trap '' INT; "):
            m = self.mark()
            self.t.line("(%s%s -- sh -c 'echo %s-re\"\"ady; exec sleep 30'); echo %s\"=\"$?"
                        % (prefix, self.exec_t, m, m))
            self.t.wait_for(m + "-ready")
            self.t.send("C-c")
            s = self.t.wait_for(m + "=", 10)
            self.assertIn(m + "=130", s, prefix)
        # the sandbox lives on: only the command was interrupted
        st, s = self.run_shell(self.exec_t + " -- sh -c 'exit 7'")
        self.assertEqual(st, 7, s)

    def test_modes_restored_after_sigkill_timeout_and_signal(self):
        st, same = self.modes_kept(self.exec_t + " -- sh -c 'kill -9 $$'")
        self.assertEqual((st, same), (137, True))
        st, same = self.modes_kept(self.exec_t.replace(" -t tty", " -t --timeout 1s tty")
                                   + " -- sleep 30")
        self.assertEqual((st, same), (124, True))
        # a SIGTERM to agentbox exec goes to the command, as run -t does
        m = self.mark()
        before, after, pidfile = (os.path.join(self.tmp, n) for n in ("b", "a", "pid"))
        self.t.line("stty -g > %s; sh -c 'echo $$ > %s; exec %s -- sh -c \"echo %s-re\"\"ady; "
                    "exec sleep 30\"'; echo %s\"=\"$?" % (before, pidfile, self.exec_t, m, m))
        self.t.wait_for(m + "-ready")
        with open(pidfile) as f:
            os.kill(int(f.read()), signal.SIGTERM)
        s = self.t.wait_for(m + "=", 10)
        self.assertIn(m + "=143", s)
        self.run_shell("stty -g > " + after)
        with open(before) as a, open(after) as b:
            self.assertEqual(a.read(), b.read())

    def test_not_a_terminal_is_refused(self):
        r = subprocess.run([BIN, "exec", "-t", "tty", "--", "true"], env=self.env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(r.returncode, 125)
        self.assertIn("stdin is not a terminal", r.stderr)
        r = subprocess.run([BIN, "exec", "-t", "-i", "tty", "--", "true"], env=self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 125)
        self.assertIn("-i and -t", r.stderr)


class RunWithoutTty(unittest.TestCase):
    """agentbox run without -t, its stdin, stdout and stderr a pty's slave:
    the command has the caller's terminal itself, and can change it."""

    CHANGE = "stty -echo -icanon; stty rows 5 cols 7"

    @classmethod
    def setUpClass(cls):
        require_agentbox()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="agentbox-notty-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.master, self.slave = os.openpty()
        self.addCleanup(os.close, self.master)
        self.addCleanup(os.close, self.slave)
        os.set_blocking(self.master, False)
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

    def state(self):
        size = struct.unpack("HHHH", fcntl.ioctl(self.slave, termios.TIOCGWINSZ, b"\0" * 8))
        return termios.tcgetattr(self.slave), size[:2]

    def drain(self):
        try:
            while os.read(self.master, 65536):
                pass
        except OSError:
            pass

    def start(self, *args):
        p = subprocess.Popen([BIN, "run", "--workspace", self.tmp, *args], stdin=self.slave,
                             stdout=self.slave, stderr=self.slave)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        return p

    def wait(self, p):
        deadline = time.monotonic() + WAIT
        while p.poll() is None and time.monotonic() < deadline:
            self.drain()
            time.sleep(0.02)
        self.assertIsNotNone(p.poll(), "agentbox did not end")
        return p.returncode

    def wait_changed(self, before):
        """Until the command's two stty have both run (modes, then size)."""
        def changed(now):
            return now[1] == (5, 7) and not now[0][3] & (termios.ECHO | termios.ICANON)
        deadline = time.monotonic() + WAIT
        while not changed(self.state()) and time.monotonic() < deadline:
            self.drain()
            time.sleep(0.02)
        now = self.state()
        self.assertEqual(now[1], (5, 7), "the command resized the terminal")
        self.assertFalse(now[0][3] & (termios.ECHO | termios.ICANON), "stty ran")

    def test_modes_and_size_restored_after_the_command(self):
        before = self.state()
        p = self.start("--", "sh", "-c", self.CHANGE)
        self.assertEqual(self.wait(p), 0)
        self.assertEqual(self.state(), before)

    def test_restored_after_a_timeout(self):
        before = self.state()
        p = self.start("--timeout", "2s", "--kill-after", "100ms", "--", "sh", "-c",
                       self.CHANGE + "; sleep 30")
        self.wait_changed(before)
        self.assertEqual(self.wait(p), 124)
        self.assertEqual(self.state(), before)

    def test_restored_after_a_signal_to_agentbox(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            before = self.state()
            p = self.start("--", "sh", "-c", self.CHANGE + "; exec sleep 30")
            self.wait_changed(before)
            p.send_signal(sig)
            self.assertEqual(self.wait(p), 128 + sig, sig)
            self.assertEqual(self.state(), before, sig)


if __name__ == "__main__":
    unittest.main()
