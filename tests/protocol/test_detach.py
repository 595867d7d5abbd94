"""Detached sandboxes (docs/detached.md): agentbox create, exec, connect,
ls, rm; nothing lost across a client's end (even SIGKILL); one client at a
time; another user refused at the socket; the idle timeout and the ttl; a
launcher killed with SIGKILL reported dead and cleaned up by rm; pause and
resume by the cgroup freezer (the kernel's word that every process is
frozen; a paused sandbox removed leaves no group in any hierarchy), or a
clear refusal where there is no freezer. Runs as root and as an
unprivileged user, with AGENTBOX_TEST_DELEGATED_PARENT (tests/setup-delegation)
as its --cgroup-parent; each test has its own sandboxes' directory
(AGENTBOX_RUNTIME_DIR). AGENTBOX_BIN names the binary."""

import json
import os
import pwd
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fileops import BIN, any_user_bin, make_dir  # noqa: E402

ROOT = os.getuid() == 0
# a parent the caller may divide (tests/setup-delegation USER): sandboxes
# are made under it, and pausing them must work (.ci/run)
DELEGATED = os.environ.get("AGENTBOX_TEST_DELEGATED_PARENT")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


class Client:
    """A protocol client on a sandbox's socket, every read bounded."""

    def __init__(self, path, timeout=20):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def recv(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("the launcher hung up")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, **req):
        self.s.sendall(json.dumps(req).encode() + b"\n")

    def close(self):
        self.s.close()


class DetachedBase(unittest.TestCase):
    """A test's own sandboxes' directory and workspace, and its helpers
    (test_port.py and test_checkpoint.py build on it)."""

    def setUp(self):
        self.rt = tempfile.mkdtemp(prefix="ab-rt-")
        os.chmod(self.rt, 0o700)
        self.addCleanup(shutil.rmtree, self.rt, True)
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.env = dict(os.environ, AGENTBOX_RUNTIME_DIR=self.rt)
        self.made = []
        self.addCleanup(self.remove_all)

    def remove_all(self):
        os.chmod(self.rt, 0o700)  # a test may have opened it
        for sid in self.made:
            if os.path.isdir(os.path.join(self.rt, sid)):
                r = subprocess.run([BIN, "rm", "-f", sid], env=self.env, timeout=30,
                                   capture_output=True)
                if r.returncode != 0:  # never leave a launcher behind
                    try:
                        os.kill(self.state(sid)["pid"], signal.SIGKILL)
                    except (OSError, ValueError, KeyError):
                        pass

    def ab(self, *args, **kw):
        kw.setdefault("timeout", 60)
        return subprocess.run([BIN, *args], env=self.env, capture_output=True, text=True, **kw)

    def create(self, *args, **kw):
        if DELEGATED:
            args = ("--cgroup-parent", DELEGATED, *args)
        r = self.ab("create", "--workspace", self.ws, *args, **kw)
        if r.returncode != 0:
            if os.environ.get("AGENTBOX_MUST_WORK") != "1" and "cannot" in r.stderr:
                self.skipTest("agentbox cannot run here: " + r.stderr)
            self.fail(r.stderr)
        sid = r.stdout.strip()
        self.made.append(sid)
        return sid

    def state(self, sid):
        with open(os.path.join(self.rt, sid, "state.json")) as f:
            return json.load(f)

    def ls(self):
        r = self.ab("ls", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return {e["id"]: e for e in json.loads(r.stdout)}

    def sock(self, sid):
        return os.path.join(self.rt, sid, "sock")

    def sandbox_pids(self, sid):
        """The launcher and every process below it."""
        top = self.state(sid)["pid"]
        pids, todo = [top], [top]
        while todo:
            p = todo.pop()
            try:
                with open("/proc/%d/task/%d/children" % (p, p)) as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                kids = []
            pids += kids
            todo += kids
        return pids

    def cgroups(self, pid):
        """The cgroup directories of pid other than the launcher's own."""
        out = []
        with open("/proc/%d/cgroup" % pid) as f:
            for line in f:
                _, ctrl, path = line.rstrip("\n").split(":", 2)
                ctrl = ctrl.split(",")[0] or "unified"
                if "agentbox-" in path:
                    out.append("/sys/fs/cgroup/%s%s" % (ctrl.replace("name=", ""), path))
        return out


class Detached(DetachedBase):
    # ---- the CLI ----

    def test_create_exec_ls_rm(self):
        sid = self.create("--name", "box1")
        self.assertEqual(sid, "box1")
        self.assertEqual(os.stat(self.rt).st_mode & 0o777, 0o700)
        self.assertEqual(os.stat(os.path.join(self.rt, sid)).st_mode & 0o777, 0o700)
        r = self.ab("exec", sid, "--", "sh", "-c", "echo out; echo err >&2; echo x > f; exit 3")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (3, "out\n", "err\n"))
        r = self.ab("exec", sid, "-c", "cat f; pwd")
        self.assertEqual((r.returncode, r.stdout), (0, "x\n/workspace\n"), r.stderr)
        r = self.ab("exec", "-i", sid, "--", "tr", "a-z", "A-Z", input="hello\n")
        self.assertEqual(r.stdout, "HELLO\n", r.stderr)
        r = self.ab("exec", "--timeout", "300ms", sid, "--", "sleep", "5")
        self.assertEqual(r.returncode, 124, r.stderr)
        e = self.ls()[sid]
        self.assertEqual((e["state"], e["name"], e["running"], e["attached"]),
                         ("running", "box1", 0, False))
        pids = self.sandbox_pids(sid)
        self.assertGreaterEqual(len(pids), 2)  # the launcher and the init at least
        cgs = self.cgroups(pids[1]) if ROOT else []
        r = self.ab("rm", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.rt, sid)))
        self.assertEqual(os.listdir(self.rt), [])
        self.assertTrue(wait_until(lambda: not any(alive(p) for p in pids), 5), pids)
        for cg in cgs:
            self.assertFalse(os.path.exists(cg), cg)
        self.assertEqual(self.ls(), {})

    def test_commands_get_the_callers_umask(self):
        # the launcher's own files are 0600 whatever the caller's umask;
        # what a command makes follows the umask of create's caller, as
        # with run (not the launcher's 077)
        sid = self.create(umask=0o027)
        self.assertEqual(os.stat(os.path.join(self.rt, sid, "log")).st_mode & 0o777, 0o600)
        r = self.ab("exec", sid, "-c", "umask; touch f; mkdir d; stat -c %a f d")
        self.assertEqual((r.returncode, r.stdout), (0, "0027\n640\n750\n"), r.stderr)
        self.assertEqual(os.stat(os.path.join(self.ws, "f")).st_mode & 0o777, 0o640)

    def test_idle_release(self):
        # idle, a sandbox is its launcher and its init: the idle supervisor
        # and its warm shell go, the next command makes them again; a
        # background process's supervisor is busy with it and stays
        sid = self.create("--name", "lean", "--idle-release", "300ms")
        self.assertTrue(wait_until(lambda: len(self.sandbox_pids(sid)) == 2, 10),
                        self.sandbox_pids(sid))
        init = self.sandbox_pids(sid)[1]
        for _ in range(3):
            r = self.ab("exec", sid, "-c", "echo hi")
            self.assertEqual((r.returncode, r.stdout), (0, "hi\n"), r.stderr)
        self.assertTrue(wait_until(lambda: len(self.sandbox_pids(sid)) == 2, 10),
                        self.sandbox_pids(sid))
        r = self.ab("exec", sid, "-c", "sleep 60 & echo $! > bg")
        self.assertEqual(r.returncode, 0, r.stderr)
        time.sleep(1)  # idle for longer than 300ms
        r = self.ab("exec", sid, "-c", "cat /proc/$(cat bg)/comm")
        self.assertEqual((r.returncode, r.stdout), (0, "sleep\n"), r.stderr)
        self.assertEqual(self.sandbox_pids(sid)[1], init)
        # released again: ls reads its idle file instead of asking; a
        # launcher killed then is dead all the same
        self.assertTrue(wait_until(lambda: os.path.exists(os.path.join(self.rt, sid, "idle"))))
        e = self.ls()[sid]
        self.assertEqual((e["state"], e["running"], e["attached"]), ("running", 0, False))
        self.assertGreater(e["idle_ms"], 0)
        c = Client(self.sock(sid))  # a client: not idle, the file goes
        c.recv()
        self.assertTrue(wait_until(
            lambda: not os.path.exists(os.path.join(self.rt, sid, "idle"))))
        self.assertEqual(self.ls()[sid]["attached"], True)
        c.close()
        self.assertTrue(wait_until(lambda: os.path.exists(os.path.join(self.rt, sid, "idle"))))
        os.kill(self.state(sid)["pid"], signal.SIGKILL)
        self.assertTrue(wait_until(lambda: self.ls()[sid]["state"] == "dead", 10))
        r = self.ab("rm", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.rt, sid)))
        # never: kept; a bad value is refused
        sid = self.create("--name", "kept", "--idle-release", "never")
        self.assertTrue(wait_until(lambda: len(self.sandbox_pids(sid)) >= 3, 10))  # a shim (and its warm shell)
        time.sleep(0.5)
        self.assertGreaterEqual(len(self.sandbox_pids(sid)), 3)
        r = self.ab("create", "--idle-release", "soon")
        self.assertEqual(r.returncode, 125)
        self.assertIn("--idle-release", r.stderr)

    def test_ls_of_many(self):
        # asked at once (with a bound), each is listed, in order
        sids = [self.create("--name", "m%02d" % i, "--idle-release", "never")
                for i in range(12)]
        os.kill(self.state(sids[3])["pid"], signal.SIGKILL)
        self.assertTrue(wait_until(lambda: self.ls()[sids[3]]["state"] == "dead", 10))
        r = self.ab("ls")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = r.stdout.splitlines()[1:]
        self.assertEqual([row.split()[0] for row in rows], sids)
        states = {row.split()[0]: row.split()[2] for row in rows}
        self.assertEqual(states[sids[3]], "dead")
        self.assertEqual({states[s] for s in sids if s != sids[3]}, {"running"})

    def test_pty_command_on_the_exec_socket(self):
        # what agentbox exec -t speaks (tests/tty has the terminal side)
        sid = self.create("--name", "pty")
        c = Client(os.path.join(self.rt, sid, "exec"))
        self.assertEqual(c.recv()["type"], "hello")
        c.send(op="exec", id="exec", pty={"rows": 20, "cols": 70}, stream=True,
               argv=["sh", "-c", "stty size; read x; echo got-$x; "
                     "trap 'stty size; exit 4' WINCH; echo ready; "
                     "while :; do sleep 0.05; done"])
        out, oks, m = "", set(), None

        def until(text):
            nonlocal out, m
            while text not in out:
                m = c.recv()
                if m["type"] == "output":
                    self.assertEqual((m["id"], m["stream"]), ("exec", "stdout"))
                    out += m["data"]
                elif m["type"] == "ok":
                    oks.add(m["id"])
                else:
                    return m
        until("20 70")
        c.send(op="stdin", id="in", target="exec", data="aGkK", encoding="base64")  # hi\n
        until("ready")
        c.send(op="resize", id="size", target="exec", rows=33, cols=99)
        m = until("never")
        self.assertEqual((m["type"], m["id"], m["exit_code"]), ("result", "exec", 4), m)
        self.assertIn("got-hi", out)
        self.assertIn("33 99", out)
        self.assertEqual(oks, {"in", "size"})
        c.close()

    def test_bad_input_is_refused_clearly(self):
        sid = self.create("--name", "dup")
        r = self.ab("create", "--workspace", self.ws, "--name", "dup")
        self.assertEqual(r.returncode, 125)
        self.assertIn("exists already", r.stderr)
        r = self.ab("create", "--name", "../x")
        self.assertEqual(r.returncode, 125)
        self.assertIn("--name", r.stderr)
        r = self.ab("create", "--idle-timeout", "soon")
        self.assertEqual(r.returncode, 125)
        r = self.ab("create", "--idle-pause")
        self.assertEqual(r.returncode, 125)
        self.assertIn("--idle-timeout", r.stderr)
        r = self.ab("pause", "nosuch")
        self.assertEqual(r.returncode, 125)
        self.assertIn("no sandbox nosuch", r.stderr)
        r = self.ab("exec", "nosuch", "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn("no sandbox nosuch", r.stderr)
        r = self.ab("exec", sid)
        self.assertEqual(r.returncode, 125)
        self.assertIn("no command", r.stderr)
        r = self.ab("rm", "nosuch")
        self.assertEqual(r.returncode, 125)
        self.assertEqual(sorted(os.listdir(self.rt)), ["dup"])

    def test_generated_id_and_hello(self):
        sid = self.create()
        self.assertRegex(sid, r"^ab-[0-9a-f]{10}$")
        c = Client(self.sock(sid))
        h = c.recv()
        self.assertEqual((h["type"], h["sandbox_id"]), ("hello", sid))
        c.send(op="ping", id=1)
        self.assertEqual(c.recv(), {"type": "pong", "id": 1})
        c.close()

    # ---- nothing lost across a disconnect ----

    def test_client_killed_mid_command_gets_the_result_on_reconnect(self):
        sid = self.create("--name", "k")
        p = subprocess.Popen([BIN, "connect", sid], env=self.env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        self.assertEqual(json.loads(p.stdout.readline())["type"], "hello")
        # it ends when the test says so (a file in the workspace), not on a
        # clock a loaded machine may outrun
        req = {"op": "exec", "id": "slow", "stream": True,
               "command": "echo started; until [ -e go ]; do sleep 0.05; done; "
                          "echo done; echo warn >&2"}
        p.stdin.write(json.dumps(req).encode() + b"\n")
        p.stdin.flush()
        self.assertEqual(json.loads(p.stdout.readline())["type"], "output")
        p.kill()
        p.wait()
        p.stdin.close()
        p.stdout.close()
        self.assertTrue(wait_until(lambda: self.ls()[sid]["attached"] is False, 5))
        self.assertEqual(self.ls()[sid]["running"], 1)  # not killed with its client
        # the command ends while no client is attached; an exec in between
        # does not take its result
        open(os.path.join(self.ws, "go"), "w").close()
        self.assertTrue(wait_until(lambda: self.ls()[sid]["running"] == 0, 10))
        r = self.ab("exec", sid, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        t = time.monotonic()
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        # the output it streamed, all kept (each chunk with its offset), then the result
        got = {"stdout": b"", "stderr": b""}
        m = c.recv()
        while m["type"] == "output":
            self.assertEqual(m["offset"], len(got[m["stream"]]), m)
            got[m["stream"]] += m["data"].encode()
            m = c.recv()
        took = time.monotonic() - t
        self.assertEqual(got, {"stdout": b"started\ndone\n", "stderr": b"warn\n"})
        self.assertEqual((m["type"], m["id"], m["exit_code"]), ("result", "slow", 0), m)
        self.assertEqual((m["stdout"], m["stderr"]), ("started\ndone\n", "warn\n"))
        self.assertLess(took, 2.0)
        # replayed once: the next client gets only its hello
        c.close()
        self.assertTrue(wait_until(lambda: self.ls()[sid]["attached"] is False, 5))
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        c.send(op="ping", id="p")
        self.assertEqual(c.recv(), {"type": "pong", "id": "p"})
        c.close()

    def test_background_process_lives_between_clients(self):
        sid = self.create("--name", "bg")
        c = Client(self.sock(sid))
        c.recv()
        c.send(op="exec", id=1, keep_background=True,
               command="(sleep 0.5; echo late > bg.txt) >/dev/null 2>&1 &")
        self.assertEqual(c.recv()["type"], "result")
        c.close()
        time.sleep(0.8)
        r = self.ab("exec", sid, "--", "cat", "bg.txt")
        self.assertEqual((r.returncode, r.stdout), (0, "late\n"), r.stderr)

    def test_exec_keeps_background_processes_and_takes_options_after_the_id(self):
        sid = self.create("--name", "dev")
        # docs/detached.md's "start the dev server, then run the tests"
        r = self.ab("exec", sid, "-c", "nohup sh -c 'sleep 0.5; echo served > srv.txt; "
                    "sleep 30' >/dev/null 2>&1 & echo $! > srv.pid")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_until(lambda: os.path.exists(os.path.join(self.ws, "srv.txt")), 10),
                        "the background process of an exec was ended with it")
        with open(os.path.join(self.ws, "srv.pid")) as f:
            pid = f.read().strip()
        r = self.ab("exec", sid, "--", "test", "-d", "/proc/" + pid)
        self.assertEqual(r.returncode, 0, "not alive after the exec ended")
        # options after the id, up to "--"; run's lines on stderr
        r = self.ab("exec", sid, "--timeout", "300ms", "--", "sleep", "5")
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertIn("agentbox: timed out after 300ms (--timeout)", r.stderr)
        r = self.ab("exec", sid, "--", "unshare", "-U", "true")
        self.assertIn("agentbox: seccomp denied: unshare (1)", r.stderr)
        r = self.ab("exec", sid, "--quiet", "--", "unshare", "-U", "true")
        self.assertNotIn("agentbox:", r.stderr)
        r = self.ab("exec", sid, "--no-keep-background", "-c", "sleep 30 & echo $! > bg2.pid")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.ws, "bg2.pid")) as f:
            pid2 = f.read().strip()
        r = self.ab("exec", sid, "--", "test", "-d", "/proc/" + pid2)
        self.assertEqual(r.returncode, 1, "--no-keep-background left it running")
        r = self.ab("exec", sid, "--timeout")
        self.assertEqual(r.returncode, 125)
        self.assertIn("--timeout needs a duration", r.stderr)

    def test_logs_say_what_the_launcher_said(self):
        sid = self.create("--name", "lg")
        self.ab("exec", sid, "--timeout", "200ms", "--", "sleep", "5")
        r = self.ab("logs", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"request \"exec-[0-9-]+\": timed out after 200ms")
        # --follow: a later line, and the end with the sandbox
        f = subprocess.Popen([BIN, "logs", "--follow", sid], stdout=subprocess.PIPE, text=True,
                             env=self.env)
        self.addCleanup(f.kill)
        self.ab("exec", sid, "--", "unshare", "-U", "true")
        self.assertEqual(self.ab("rm", sid).returncode, 0)
        out, _ = f.communicate(timeout=20)
        self.assertIn("seccomp denied: unshare (1)", out)
        self.assertEqual(f.returncode, 0)
        r = self.ab("logs", "nosuch")
        self.assertEqual(r.returncode, 125)
        self.assertIn("no sandbox nosuch", r.stderr)

    def test_changes_commit_discard_of_a_detached_overlay_sandbox(self):
        with open(os.path.join(self.ws, "a"), "w") as f:
            f.write("a\n")
        sid = self.create("--name", "ov", "--workspace-mode", "overlay")
        r = self.ab("exec", sid, "-c", "echo b > b; echo A > a")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.ab("changes", sid)
        self.assertEqual((r.returncode, r.stdout), (0, " M a\n A b\n"), r.stderr)
        r = self.ab("changes", "--json", sid)
        self.assertEqual(sorted(c["path"] for c in json.loads(r.stdout)["changes"]), ["a", "b"])
        self.assertFalse(os.path.exists(os.path.join(self.ws, "b")))  # not before a commit
        r = self.ab("commit", sid, "b")
        self.assertEqual((r.returncode, r.stdout), (0, "b\n"), r.stderr)
        with open(os.path.join(self.ws, "b")) as f:
            self.assertEqual(f.read(), "b\n")
        with open(os.path.join(self.ws, "a")) as f:
            self.assertEqual(f.read(), "a\n")
        r = self.ab("discard", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_until(lambda: sid not in self.ls(), 5), "the sandbox ends with it")
        # a direct sandbox has no layer: said, 125
        sid = self.create("--name", "direct")
        r = self.ab("changes", sid)
        self.assertEqual(r.returncode, 125)
        self.assertIn("overlay", r.stderr)

    def test_end_of_input_keeps_the_connection_until_the_answers(self):
        sid = self.create("--name", "eof")
        req = {"op": "exec", "id": "e", "command": "sleep 0.3; echo ok"}
        r = self.ab("connect", sid, input=json.dumps(req) + "\n")
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        self.assertEqual([m["type"] for m in lines], ["hello", "result"], r.stdout)
        self.assertEqual(lines[1]["stdout"], "ok\n")
        self.assertEqual(self.ls()[sid]["state"], "running")  # the sandbox goes on

    def test_one_client_at_a_time(self):
        sid = self.create("--name", "one")
        a = Client(self.sock(sid))
        self.assertEqual(a.recv()["type"], "hello")
        b = Client(self.sock(sid))
        m = b.recv()
        b.close()
        self.assertEqual((m["type"], m["code"]), ("error", "busy"), m)
        r = self.ab("exec", sid, "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn("another client is attached", r.stderr)
        a.send(op="ping", id=2)
        self.assertEqual(a.recv()["type"], "pong")
        r = self.ab("rm", sid)
        self.assertEqual(r.returncode, 125)
        self.assertIn("rm -f", r.stderr)
        a.close()

    def test_shutdown_request_ends_it(self):
        sid = self.create("--name", "sd")
        pid = self.state(sid)["pid"]
        c = Client(self.sock(sid))
        c.recv()
        c.send(op="shutdown", id="s")
        self.assertEqual(c.recv()["type"], "ok")
        c.close()
        self.assertTrue(wait_until(lambda: not alive(pid), 10))
        self.assertFalse(os.path.exists(os.path.join(self.rt, sid)))

    # ---- owners ----

    @unittest.skipUnless(ROOT, "needs root to be another user")
    def test_another_user_is_refused(self):
        try:
            pwd.getpwnam("tester")
        except KeyError:
            self.skipTest("no user 'tester'")
        sid = self.create("--name", "mine")
        env = dict(self.env)
        # the directory stops them first
        r = subprocess.run(["runuser", "-u", "tester", "--", any_user_bin(), "exec", sid, "--",
                            "true"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 125)
        self.assertIn("%s is not yours: user root (uid 0) made it" % self.rt, r.stderr)
        # and with the directories opened, the launcher's peer check
        os.chmod(self.rt, 0o711)
        os.chmod(os.path.join(self.rt, sid), 0o711)
        os.chmod(self.sock(sid), 0o777)
        os.chmod(os.path.join(self.rt, sid, "exec"), 0o777)
        code = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(10); "
                "s.connect(sys.argv[1]); sys.stdout.write(s.makefile().readline())")
        r = subprocess.run(["runuser", "-u", "tester", "--", "/usr/bin/python3", "-c", code,
                            self.sock(sid)], capture_output=True, text=True, timeout=30)
        m = json.loads(r.stdout)
        self.assertEqual((m["type"], m["code"]), ("error", "permission_denied"), r)
        os.chmod(self.rt, 0o700)
        r = self.ab("exec", sid, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_squatted_runtime_dir_names_its_owner_and_the_way_out(self):
        # another user makes /tmp/agentbox-UID first (anyone may, in /tmp)
        if not ROOT:
            self.skipTest("making a directory of another user's needs root")
        try:
            victim, squatter = pwd.getpwnam("tester"), pwd.getpwnam("tester2")
        except KeyError:
            self.skipTest("no users 'tester' and 'tester2'")
        sq = "/tmp/agentbox-%d" % victim.pw_uid
        if os.path.lexists(sq):
            self.skipTest(sq + " exists already (someone's own): left alone")
        os.mkdir(sq, 0o700)
        self.addCleanup(os.rmdir, sq)
        os.chown(sq, squatter.pw_uid, squatter.pw_gid)
        mine = make_dir()  # the victim's own directories
        self.addCleanup(shutil.rmtree, mine, True)
        xdg_open, xdg, rt = (os.path.join(mine, n) for n in ("xdg-open", "xdg", "rt"))
        for d, mode in ((xdg_open, 0o755), (xdg, 0o700), (rt, 0o700)):
            os.mkdir(d, mode)
            os.chown(d, victim.pw_uid, victim.pw_gid)

        def as_victim(*args, **env):
            e = {k: v for k, v in os.environ.items()
                 if k not in ("AGENTBOX_RUNTIME_DIR", "XDG_RUNTIME_DIR")}
            e.update(env)
            return subprocess.run(["runuser", "-u", "tester", "--", any_user_bin(), *args],
                                  env=e, capture_output=True, text=True, timeout=60)

        for env in ({}, {"XDG_RUNTIME_DIR": xdg_open}):  # not 0700: not used
            for args in (("create", "--workspace", self.ws), ("ls",)):
                r = as_victim(*args, **env)
                self.assertEqual(r.returncode, 125, (args, env, r))
                self.assertIn("the sandboxes' directory %s is not yours: user tester2 (uid %d)"
                              % (sq, squatter.pw_uid), r.stderr)
                self.assertIn("AGENTBOX_RUNTIME_DIR", r.stderr)
        # the ways out: a private XDG_RUNTIME_DIR, or AGENTBOX_RUNTIME_DIR
        for env, where in (({"XDG_RUNTIME_DIR": xdg}, os.path.join(xdg, "agentbox")),
                           ({"AGENTBOX_RUNTIME_DIR": rt}, rt)):
            r = as_victim("create", "--workspace", self.ws, **env)
            self.assertEqual(r.returncode, 0, r.stderr)
            sid = r.stdout.strip()
            self.assertTrue(os.path.isdir(os.path.join(where, sid)), where)
            r = as_victim("rm", "-f", sid, **env)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(sq), [])

    # ---- pause and resume ----

    def counter(self, sid):
        """A background process of the sandbox writing a growing count."""
        c = Client(self.sock(sid))
        c.recv()
        c.send(op="exec", id="bg", keep_background=True,
               command="(i=0; while :; do i=$((i+1)); echo $i > ctr.new; mv ctr.new ctr; "
                       "sleep 0.02; done) >/dev/null 2>&1 &")
        self.assertEqual(c.recv()["type"], "result")
        c.close()
        path = os.path.join(self.ws, "ctr")
        self.assertTrue(wait_until(lambda: os.path.exists(path), 5))

        def count():
            with open(path) as f:
                return int(f.read() or 0)
        return count

    def pause_or_skip(self, sid):
        r = self.ab("pause", sid)
        if r.returncode != 0 and not ROOT and not DELEGATED:
            # no freezer for a plain user without delegation
            # (test_pause_refused_without_a_freezer)
            self.skipTest("no cgroup to freeze: " + r.stderr.strip())
        self.assertEqual(r.returncode, 0, r.stderr)

    def init_pid(self, sid):
        pids = self.sandbox_pids(sid)
        self.assertGreaterEqual(len(pids), 2, "no init below the launcher")
        return pids[1]

    def assert_frozen(self, cgs, frozen):
        """The kernel's word: the v1 freezer's state and each process's
        state in /proc (D: in the refrigerator), else cgroup v2's events."""
        v1 = [c for c in cgs if "/freezer/" in c]
        if v1:
            with open(os.path.join(v1[0], "freezer.state")) as f:
                self.assertEqual(f.read().strip(), "FROZEN" if frozen else "THAWED")
            with open(os.path.join(v1[0], "cgroup.procs")) as f:
                procs = [int(p) for p in f.read().split()]
            self.assertGreaterEqual(len(procs), 2, v1)  # the init and the counter
            def state(p):
                try:
                    with open("/proc/%d/stat" % p) as f:
                        return f.read().rsplit(")", 1)[1].split()[0]
                except FileNotFoundError:
                    return None  # ended since the listing (the counter's sleeps do)

            for p in procs:
                if frozen:
                    # only a thawed process can end
                    self.assertEqual(state(p), "D", "pid %d" % p)
                else:
                    # a thawed task leaves the refrigerator when it next
                    # runs: on a loaded machine, a moment after the thaw
                    self.assertTrue(wait_until(lambda: state(p) != "D", 5), "pid %d" % p)
            return
        v2 = [c for c in cgs if "/unified/" in c or "/sys/fs/cgroup/agentbox" in c]
        self.assertTrue(v2, "the sandbox has no freezer group: %s" % cgs)
        with open(os.path.join(v2[0], "cgroup.events")) as f:
            self.assertIn("frozen %d" % frozen, f.read())

    def test_pause_and_resume(self):
        sid = self.create("--name", "pz")
        count = self.counter(sid)
        cgs = self.cgroups(self.init_pid(sid))
        self.pause_or_skip(sid)
        self.assertEqual(self.ls()[sid]["state"], "paused")
        self.assert_frozen(cgs, True)
        a = count()
        time.sleep(0.4)
        self.assertEqual(count(), a)  # frozen: not one step
        r = self.ab("resume", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ls()[sid]["state"], "running")
        self.assert_frozen(cgs, False)
        self.assertTrue(wait_until(lambda: count() > a + 3, 5))
        # a client resumes it too
        self.pause_or_skip(sid)
        r = self.ab("exec", sid, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ls()[sid]["state"], "running")
        r = self.ab("rm", sid)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_rm_of_a_paused_sandbox_leaves_nothing(self):
        sid = self.create("--name", "pzrm")
        self.counter(sid)
        pids = self.sandbox_pids(sid)
        cgs = self.cgroups(pids[1])
        self.pause_or_skip(sid)
        self.assertTrue(cgs)
        r = self.ab("rm", "-f", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_until(lambda: not any(alive(p) for p in pids), 5), pids)
        for cg in cgs:  # in every hierarchy, the freezer's too
            self.assertTrue(wait_until(lambda: not os.path.exists(cg), 5), cg)
        self.assertEqual(os.listdir(self.rt), [])

    def test_paused_sandbox_whose_launcher_was_killed_is_cleaned_by_rm(self):
        # frozen processes die of SIGKILL only once thawed (the v1
        # freezer): rm's reaping of the dead launcher's cgroups thaws them
        sid = self.create("--name", "pzdead")
        self.counter(sid)
        pids = self.sandbox_pids(sid)
        cgs = self.cgroups(pids[1])
        self.pause_or_skip(sid)
        os.kill(pids[0], signal.SIGKILL)
        self.assertTrue(wait_until(lambda: not alive(pids[0]), 5))
        self.assertEqual(self.ls()[sid]["state"], "dead")
        r = self.ab("rm", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_until(lambda: not any(alive(p) for p in pids), 5), pids)
        for cg in cgs:
            self.assertTrue(wait_until(lambda: not os.path.exists(cg), 5), cg)

    def test_pause_holds_a_shell_that_forks_without_pause(self):
        # a shell's vfork parent the v1 freezer reaches while it forks
        # sleeps on a child already frozen and is never frozen itself
        # unless the freezer makes a new pass (cgroup_freeze.c): pause
        # then failed about one time in three
        sid = self.create("--name", "pzfork")
        c = Client(self.sock(sid))
        c.recv()
        c.send(op="exec", id="bg", keep_background=True,
               command="(while :; do /bin/true; done) >/dev/null 2>&1 &")
        self.assertEqual(c.recv()["type"], "result")
        c.close()
        for _ in range(10):
            self.pause_or_skip(sid)
            self.assertEqual(self.ls()[sid]["state"], "paused")
            r = self.ab("resume", sid)
            self.assertEqual(r.returncode, 0, r.stderr)
        r = self.ab("rm", "-f", sid)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_pause_refused_without_a_freezer(self):
        if ROOT or DELEGATED:
            self.skipTest("root and a delegated parent have a freezer")
        sid = self.create("--name", "pzno")
        count = self.counter(sid)
        r = self.ab("pause", sid)
        if r.returncode == 0:
            self.skipTest("this user has a freezer cgroup (a delegated v2 subtree)")
        # refused, never a pause that does not hold
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("cannot be paused", r.stderr)
        self.assertIn("--cgroup-parent", r.stderr)
        self.assertEqual(self.ls()[sid]["state"], "running")
        a = count()
        self.assertTrue(wait_until(lambda: count() > a + 3, 5))

    def test_idle_pause(self):
        sid = self.create("--name", "ip", "--idle-timeout", "500ms", "--idle-pause")
        r = self.ab("pause", sid)  # can this sandbox be paused at all?
        if r.returncode != 0:
            self.pause_or_skip(sid)
        self.ab("resume", sid)
        count = self.counter(sid)
        self.assertTrue(wait_until(lambda: self.ls()[sid]["state"] == "paused", 10))
        a = count()
        time.sleep(0.3)
        self.assertEqual(count(), a)
        self.assertTrue(alive(self.state(sid)["pid"]))  # paused, not ended
        r = self.ab("exec", sid, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_until(lambda: count() > a, 5))

    def test_exec_after_a_killed_exec_is_not_refused(self):
        # each agentbox exec names its command with an id of its own: the
        # next one does not meet the killed one's, kept for replay
        sid = self.create("--name", "kx")
        p = subprocess.Popen([BIN, "exec", sid, "--", "sh", "-c",
                              "until [ -e go ]; do sleep 0.05; done"], env=self.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertTrue(wait_until(lambda: self.ls()[sid]["running"] == 1, 10))
        p.kill()
        p.wait()
        self.assertTrue(wait_until(lambda: self.ls()[sid]["attached"] is False, 5))
        r = self.ab("exec", sid, "--", "echo", "next")
        self.assertEqual((r.returncode, r.stdout), (0, "next\n"), r.stderr)
        self.assertEqual(self.ls()[sid]["running"], 1)  # the killed one's goes on
        open(os.path.join(self.ws, "go"), "w").close()
        self.assertTrue(wait_until(lambda: self.ls()[sid]["running"] == 0, 10))

    # ---- ends ----

    def test_idle_timeout(self):
        # long enough for the exec below to start on a loaded machine
        sid = self.create("--name", "idle", "--idle-timeout", "2s")
        pid = self.state(sid)["pid"]
        # a client attached or a command running is not idle
        r = self.ab("exec", sid, "--", "sleep", "2.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(alive(pid))
        self.assertTrue(wait_until(lambda: not alive(pid), 10))
        self.assertFalse(os.path.exists(os.path.join(self.rt, sid)))

    def test_ttl(self):
        sid = self.create("--name", "ttl", "--ttl", "2s")  # time to connect, under load
        pid = self.state(sid)["pid"]
        c = Client(self.sock(sid))
        c.recv()
        c.send(op="exec", id="long", command="sleep 30")
        m = c.recv()
        self.assertEqual((m["type"], m["code"]), ("error", "shutdown"), m)
        self.assertTrue(wait_until(lambda: not alive(pid), 10))
        c.close()
        self.assertFalse(os.path.exists(os.path.join(self.rt, sid)))

    def test_killed_launcher_is_dead_and_rm_cleans_up(self):
        sid = self.create("--name", "dead")
        pids = self.sandbox_pids(sid)
        cgs = self.cgroups(pids[1]) if ROOT else []
        os.kill(pids[0], signal.SIGKILL)
        self.assertTrue(wait_until(lambda: not any(alive(p) for p in pids), 10), pids)
        self.assertEqual(self.ls()[sid]["state"], "dead")
        r = self.ab("exec", sid, "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn("dead", r.stderr)
        r = self.ab("rm", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(self.rt), [])
        for cg in cgs:
            self.assertFalse(os.path.exists(cg), cg)


    # ---- agentbox watch ID [PATH] (docs/detached.md) ----

    def watch(self, *args):
        """agentbox watch ARGS, its stdout's lines read by a thread (a hung
        watch fails the test, never hangs it)."""
        p = subprocess.Popen([BIN, "watch", *args], env=self.env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(p.stdout.close)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        p.lines = queue.Queue()

        def read():
            for ln in p.stdout:
                p.lines.put(ln)
            p.lines.put("")
        threading.Thread(target=read, daemon=True).start()
        return p

    def line(self, p, timeout=30):
        try:
            return p.lines.get(timeout=timeout)
        except queue.Empty:
            self.fail("no line from agentbox watch in %s s" % timeout)

    def test_watch_events_then_the_sandbox_ends(self):
        sid = self.create("--net", "none")
        r = self.ab("watch", sid, "../outside")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("'..'", r.stderr)
        r = self.ab("watch", sid, "/no/such/dir")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("/no/such/dir", r.stderr)
        # a command whose background process writes once the watch is ready
        r = self.ab("exec", sid, "-c",
                    "(while [ ! -e go ]; do sleep 0.02; done; mkdir d && echo x > d/f) "
                    ">/dev/null 2>&1 &")
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.watch("-r", "--json", sid)
        self.assertEqual(json.loads(self.line(p)), {"event": "ready", "path": "/workspace",
                                                     "dir": True})
        open(os.path.join(self.ws, "go"), "w").close()
        seen = []
        while ("written", "/workspace/d/f") not in seen:
            ev = json.loads(self.line(p))
            seen.append((ev["event"], ev.get("path")))
        self.assertIn(("created", "/workspace/d"), seen)
        started = time.monotonic()
        r = self.ab("rm", "-f", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertIn("ended", p.stderr.read())
        self.assertLess(time.monotonic() - started, 30)
        p.stderr.close()

    def test_watch_plain_lines_and_a_signal_cancels(self):
        sid = self.create("--net", "none")
        r = self.ab("exec", sid, "-c",
                    "(while [ ! -e go ]; do sleep 0.02; done; echo a > a && mv a b) "
                    ">/dev/null 2>&1 &")
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.watch(sid, ".")
        self.assertEqual(self.line(p), "ready /workspace\n")
        open(os.path.join(self.ws, "go"), "w").close()
        lines = []
        while not lines or not lines[-1].startswith("renamed"):
            lines.append(self.line(p))
        self.assertIn("created /workspace/a\n", lines)
        self.assertEqual(lines[-1], "renamed /workspace/b <- /workspace/a\n")
        p.send_signal(2)
        self.assertEqual(p.wait(timeout=30), 0)
        p.stderr.close()
        # the sandbox goes on, its one client free again
        self.assertEqual(self.ab("exec", sid, "--", "true").returncode, 0)


if __name__ == "__main__":
    unittest.main()
