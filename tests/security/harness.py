"""The escape battery's harness: every attack runs as one shell script inside
a sandbox, once through `agentbox run` and once through a session of
`agentbox serve`, and asserts what it could not do.

An attack class subclasses `Attacks` (a mixin) and is turned into one
TestCase per mode with `both_modes(globals(), TheClass)`. Inside a test:

    r = self.sh("cat /etc/shadow")          # Result: code, out, err, denied
    r = self.sh(script, options=("--net", "none"))   # extra agentbox options
    r = self.guarded("kill -9 -1")          # harmful if isolation broke: runs
                                            # only after proving it is inside

`guarded()` must be used for every attack that would harm the host if the
sandbox were broken (signals to every process, /proc/sys writes, hostname,
filling memory or disk): the script first checks that its pid, mount, user
and network namespaces and its root are not the host's, and the test fails
(it is never skipped) when they are.

Environment: AGENTBOX_BIN (the binary), AGENTBOX_PROBE (tests/helpers/probe,
bound read-only at /probe), AGENTBOX_MUST_WORK=1 turns "cannot sandbox here"
skips into failures. Runs as root (with no --host-uid: the sandbox user is
agentbox's own unprivileged host uid, and the root-owned workspace and binds
are idmapped to it) and as an unprivileged user."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import unittest

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")
PROBE = os.environ.get("AGENTBOX_PROBE")
ROOT = os.getuid() == 0
# whose files are the sandbox user's: the test's own user (as root, through
# the idmapping of the workspace and binds)
SANDBOX_UID = os.getuid()
MUST_WORK = os.environ.get("AGENTBOX_MUST_WORK") == "1"
TIMEOUT = 60  # seconds any one attack may take before the test fails

NOT_SANDBOXED = "NOT-SANDBOXED"


def _host_ids():
    ids = {ns: os.stat("/proc/self/ns/" + ns).st_ino for ns in ("pid", "mnt", "user", "net")}
    st = os.stat("/")
    ids["root"] = "%d:%d" % (st.st_dev, st.st_ino)
    return ids


HOST = _host_ids()

# Shell prefix for harmful attacks: stop with NOT-SANDBOXED unless every
# namespace and the root are the sandbox's own.
GUARD = (
    'for ns in pid:{pid} mnt:{mnt} user:{user} net:{net}; do '
    '[ "$(stat -L -c %i /proc/self/ns/${{ns%%:*}})" != "${{ns#*:}}" ] || '
    '{{ echo {flag}; exit 99; }}; done; '
    '[ "$(stat -c %d:%i /)" != "{root}" ] || {{ echo {flag}; exit 99; }}; '
    '[ -d /workspace ] || {{ echo {flag}; exit 99; }}\n'
).format(flag=NOT_SANDBOXED, **HOST)


class Result:
    def __init__(self, code, out, err, denied, raw=None):
        self.code = code  # the command's exit status (124 timeout, 128+N signal)
        self.out = out
        self.err = err
        self.denied = denied  # {"ptrace": 2, ...}: syscalls seccomp refused
        self.raw = raw  # the report (run) or result message (serve)

    def __repr__(self):
        return "Result(code=%r, out=%r, err=%r, denied=%r)" % (self.code, self.out[-2000:],
                                                               self.err[-2000:], self.denied)


def make_dir(parent=None, prefix="agentbox-sec-"):
    """A directory the sandbox user owns (the workspace must be)."""
    d = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.chmod(d, 0o755)
    return d


# options every box of the battery gets, e.g. "--workspace-mode overlay"
# (tests/CMakeLists.txt runs the battery once more with it)
EXTRA_OPTIONS = os.environ.get("AGENTBOX_SECURITY_OPTIONS", "").split()
# the box's writes land in a layer: the host workspace stays as it was
OVERLAY = "overlay" in EXTRA_OPTIONS


def base_options(ws):
    opts = ["--workspace", ws, *EXTRA_OPTIONS]
    if PROBE:
        opts += ["--ro-bind", PROBE + ":/probe"]
    return opts


def _denied(lst):
    return {d["syscall"]: d["count"] for d in (lst or [])}


class RunMode:
    """Each sh() is one `agentbox run --capture --report fd:3 -- /bin/sh -c`."""
    name = "run"

    def __init__(self, ws, options=(), env=None, pass_fds=(), cwd=None):
        self.argv = [BIN, "run", *base_options(ws), *options]
        # what every agentbox process of this box gets (see Attacks.sandbox)
        self.env, self.pass_fds, self.cwd = env, tuple(pass_fds), cwd

    def sh(self, script, timeout=TIMEOUT, stdin=None, env=None, pass_fds=(), args=()):
        """args: more arguments after the script (the shell's $0, $1...)."""
        return self.exec(["/bin/sh", "-c", script, *args], timeout, stdin, env, pass_fds)

    def exec(self, command, timeout=TIMEOUT, stdin=None, env=None, pass_fds=()):
        """Run an argv (after `--`) as the command."""
        r, w = os.pipe()
        argv = self.argv + ["--capture", "--report", "fd:%d" % w, "--", *command]
        try:
            p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else
                                 subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE,
                                 pass_fds=(w, *self.pass_fds, *pass_fds),
                                 env=env if env is not None else self.env, cwd=self.cwd)
        finally:
            os.close(w)
        try:
            out, err = p.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            os.close(r)
            raise AssertionError("agentbox run did not end within %ds" % timeout)
        with os.fdopen(r, "rb") as f:
            report = f.read()
        err = err.decode(errors="replace")
        if not report:
            raise AssertionError("agentbox run wrote no report (status %d): %s" %
                                 (p.returncode, err))
        rep = json.loads(report)
        if rep.get("error"):
            raise AssertionError("agentbox failed (status %d): %s" % (p.returncode, rep["error"]))
        return Result(rep["exit_code"], rep.get("stdout", ""), rep.get("stderr", "") + err,
                      _denied(rep.get("denied_syscalls")), rep)

    def close(self):
        pass


class ServeMode:
    """One `agentbox serve` per test; each sh() is one exec request."""
    name = "serve"

    def __init__(self, ws, options=(), env=None, pass_fds=(), cwd=None):
        # env, pass_fds, cwd: of the server process (see Attacks.sandbox)
        self.p = subprocess.Popen([BIN, "serve", *base_options(ws), *options],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, pass_fds=pass_fds, cwd=cwd)
        self.n = 0
        self.hello = self._recv()
        if self.hello is None or self.hello.get("type") != "hello":
            err = self.p.stderr.read().decode(errors="replace")
            self.close()
            raise AssertionError("agentbox serve did not start: %s %s" % (self.hello, err))

    def _recv(self):
        line = self.p.stdout.readline()
        return json.loads(line) if line else None

    def call(self, req, timeout=TIMEOUT):
        """One request; its result or error (output chunks are skipped)."""
        self.n += 1
        req.setdefault("id", self.n)
        self.p.stdin.write((json.dumps(req) + "\n").encode())
        self.p.stdin.flush()
        # a watchdog, so that a hung server fails the test instead of hanging it
        timer = _Watchdog(timeout, self.p)
        try:
            while True:
                m = self._recv()
                if m is None:
                    raise AssertionError("agentbox serve ended: " +
                                         self.p.stderr.read().decode(errors="replace"))
                if m.get("id") == req["id"] and m["type"] != "output":
                    return m
        finally:
            timer.cancel()

    def sh(self, script, timeout=TIMEOUT, stdin=None, env=None, pass_fds=(), args=()):
        """args: more arguments after the script (the shell's $0, $1...)."""
        if args:
            return self.exec(["/bin/sh", "-c", script, *args], timeout, stdin, env, pass_fds)
        return self._exec({"command": script}, timeout, stdin, env, pass_fds)

    def exec(self, command, timeout=TIMEOUT, stdin=None, env=None, pass_fds=()):
        """Run an argv (an exec request's `argv`) as the command."""
        return self._exec({"argv": list(command)}, timeout, stdin, env, pass_fds)

    def _exec(self, what, timeout, stdin, env, pass_fds):
        assert env is None and not pass_fds, \
            "serve mode takes env and pass_fds per server (Attacks.sandbox), not per command"
        # the protocol's timeout is in seconds: the command's ends a little
        # before the test's own watchdog would
        req = {"op": "exec", **what, "timeout": max(1, timeout - 5)}
        if stdin is not None:
            req["stdin"] = stdin.decode() if isinstance(stdin, bytes) else stdin
        m = self.call(req, timeout)
        if m["type"] != "result":
            raise AssertionError("exec failed: %s" % m)
        return Result(m["exit_code"], m.get("stdout", ""), m.get("stderr", ""),
                      _denied(m.get("denied_syscalls")), m)

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write(b'{"op":"shutdown","id":"end"}\n')
                self.p.stdin.close()
            except (OSError, ValueError):  # a test closed it already
                pass
            try:
                self.p.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()
        self.p.stderr.close()


class _Watchdog:
    def __init__(self, seconds, proc):
        import threading
        self.t = threading.Timer(seconds, lambda: proc.poll() is None and
                                 proc.send_signal(signal.SIGKILL))
        self.t.daemon = True
        self.t.start()

    def cancel(self):
        self.t.cancel()


class Attacks:
    """Base of every attack class (a mixin: both_modes() adds the TestCase
    and the mode, so the base itself is never collected)."""
    mode = None
    options = ()  # agentbox options of every sandbox of the class

    def setUp(self):
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self._boxes = {}

    def box(self, options=()):
        """The sandbox for these extra options (one per option set per test)."""
        key = tuple(self.options) + tuple(options)
        if key not in self._boxes:
            try:
                b = self.mode(self.ws, key)
            except AssertionError as e:
                if MUST_WORK:
                    raise
                self.skipTest("agentbox cannot run here: %s" % e)
            self._boxes[key] = b
            self.addCleanup(b.close)
        return self._boxes[key]

    def sandbox(self, options=(), env=None, pass_fds=(), cwd=None):
        """A new sandbox (not shared with box()) whose agentbox process (each
        `agentbox run`, or the one `agentbox serve`) runs with this
        environment, these extra open fds and this working directory."""
        key = tuple(self.options) + tuple(options)
        try:
            b = self.mode(self.ws, key, env=env, pass_fds=pass_fds, cwd=cwd)
        except AssertionError as e:
            if MUST_WORK:
                raise
            self.skipTest("agentbox cannot run here: %s" % e)
        self.addCleanup(b.close)
        return b

    def host_secret(self, name="id_rsa"):
        """A secret on the host outside the workspace, readable by anyone
        who can see it (so only the view keeps it from the sandbox):
        (directory, file path, token). Removed after the test."""
        home = tempfile.mkdtemp(prefix="agentbox-sec-home-")
        self.addCleanup(shutil.rmtree, home, True)
        os.chmod(home, 0o755)
        token = "SECRET-" + os.urandom(12).hex()
        path = os.path.join(home, name)
        with open(path, "w") as f:
            f.write(token + "\n")
        os.chmod(path, 0o644)
        return home, path, token

    def sh(self, script, options=(), **kw):
        return self.box(options).sh(script, **kw)

    def exec(self, argv, options=(), **kw):
        """Run an argv directly, no shell."""
        return self.box(options).exec(argv, **kw)

    def guarded(self, script, options=(), **kw):
        """Run a script that would harm the host outside a sandbox, only
        after it proved it is inside one; fails the test otherwise."""
        r = self.sh(GUARD + script, options, **kw)
        self.assertNotIn(NOT_SANDBOXED, r.out, "the attack did not run in a sandbox: %r" % r)
        self.assertNotEqual(r.code, 99, r)
        return r

    def probe(self, *args, options=(), **kw):
        """tests/helpers/probe inside the sandbox, as /probe ARGS."""
        if not PROBE:
            self.fail("AGENTBOX_PROBE is not set")
        return self.sh(" ".join(["/probe", *map(_quote, args)]), options, **kw)


def _quote(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


def both_modes(namespace, cls):
    """Define <cls>Run and <cls>Serve in namespace (a module's globals())."""
    for mode in (RunMode, ServeMode):
        one_mode(namespace, cls, mode)


def one_mode(namespace, cls, mode):
    """Define only <cls>Run or <cls>Serve, for an attack that exists in one
    mode only (say why in the class's docstring)."""
    name = cls.__name__ + mode.name.capitalize()
    namespace[name] = type(name, (cls, unittest.TestCase),
                           {"mode": mode, "__module__": namespace["__name__"]})


def attempt(mode, ws, options, script, timeout=TIMEOUT):
    """Start one sandbox and run script in it, without asserting that agentbox
    worked: (status, stdout, stderr), status being the command's exit status,
    or agentbox's own (125) when it refused to start the sandbox. For attacks
    on the startup itself, where a refusal is one acceptable outcome."""
    opts = [*base_options(ws), *options]
    if mode is RunMode:
        try:
            p = subprocess.run([BIN, "run", *opts, "--", "/bin/sh", "-c", script],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("agentbox run did not end within %ds" % timeout)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    p = subprocess.Popen([BIN, "serve", *opts], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    timer = _Watchdog(timeout, p)
    try:
        hello = p.stdout.readline()
        if not hello:
            p.stdin.close()
            err = p.stderr.read().decode(errors="replace")
            return p.wait(), "", err
        p.stdin.write((json.dumps({"op": "exec", "id": 1, "command": script}) + "\n").encode())
        p.stdin.flush()
        m = None
        for line in p.stdout:
            m = json.loads(line)
            if m.get("id") == 1 and m["type"] != "output":
                break
        p.stdin.close()  # end the session
        err = p.stderr.read().decode(errors="replace")
        p.wait()
        if not m or m["type"] != "result":
            raise AssertionError("exec failed: %s %s" % (m, err))
        return m["exit_code"], m.get("stdout", ""), m.get("stderr", "") + err
    finally:
        timer.cancel()
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
