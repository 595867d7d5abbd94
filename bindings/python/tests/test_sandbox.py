"""agentbox.Sandbox against the real server (AGENTBOX_BIN): commands, the
view as the guard, the session's life. Runs as root (the sandbox user is
then host uid 65534) and as an unprivileged user. test_backend.py holds the
file operations' semantics."""

import os
import shutil
import signal
import tempfile
import threading
import time
import unittest

import agentbox
from agentbox import ProtocolError, Sandbox, SandboxClosed, SandboxError
from support import ROOT, UID, oci_image, root_tree, sandbox, workspace


class Base(unittest.TestCase):
    def setUp(self):
        self.ws = workspace()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.sb = sandbox(self.ws)
        self.addCleanup(self.sb.close)


class RootTree(unittest.TestCase):
    """rootfs=: the session's commands and file operations on a root tree
    of its own (docs/rootfs.md), not the host's system."""

    def test_commands_and_files_on_a_root_tree(self):
        ws, tree = workspace(), root_tree()
        self.addCleanup(shutil.rmtree, ws, True)
        self.addCleanup(shutil.rmtree, tree, True)
        sb = sandbox(ws, rootfs=tree)
        self.addCleanup(sb.close)
        self.assertTrue(os.path.exists("/usr/bin/env"))
        for _ in range(3):  # a fresh shell, then the warm ones
            r = sb.execute("cat /opt/marker; test -e /usr/bin/env && echo host-env; "
                           "(echo x > /opt/x) 2>/dev/null || echo ro")
            self.assertEqual((r.output, r.exit_code), ("from-tree\nro\n", 0))
        sb.write("/workspace/a.txt", "written\n")
        self.assertEqual(sb.execute("cat a.txt").output, "written\n")
        with open(os.path.join(ws, "a.txt")) as f:
            self.assertEqual(f.read(), "written\n")
        self.assertIn("agent:x:%d:" % UID, sb.execute("cat /etc/passwd").output)

    def test_a_tree_without_a_shell_is_refused(self):
        ws, tree = workspace(), root_tree()
        self.addCleanup(shutil.rmtree, ws, True)
        self.addCleanup(shutil.rmtree, tree, True)
        os.unlink(os.path.join(tree, "bin", "sh"))
        with self.assertRaises(SandboxError) as cm:
            sandbox(ws, rootfs=tree)
        self.assertIn("has no /bin/sh", str(cm.exception))


class Image(unittest.TestCase):
    """image=: the session on an OCI image layout's layers (docs/images.md)."""

    def test_commands_and_files_on_an_image(self):
        ws, tree = workspace(), root_tree()
        img, cache = oci_image(tree), tempfile.mkdtemp(prefix="agentbox-py-cache-")
        for d in (ws, tree, img, cache):
            self.addCleanup(shutil.rmtree, d, True)
        os.environ["AGENTBOX_IMAGE_CACHE"] = cache
        self.addCleanup(os.environ.pop, "AGENTBOX_IMAGE_CACHE", None)
        sb = sandbox(ws, image="oci:" + img)
        self.addCleanup(sb.close)
        r = sb.execute("cat /opt/layered; test -e /opt/marker || echo deleted; echo $IMGVAR; "
                       "test -e /usr/bin/env && echo host-env; true")
        self.assertEqual((r.output, r.exit_code), ("layered\ndeleted\nfromimage\n", 0))
        sb.write("/workspace/a.txt", "written\n")
        self.assertEqual(sb.execute("cat /workspace/a.txt").output, "written\n")
        self.assertEqual(len(os.listdir(os.path.join(cache, "layers"))), 8)  # 2 x dir, info, lock, seal


class Commands(Base):
    def test_execute_has_deepagents_shape(self):
        r = self.sb.execute("echo out; echo err >&2; exit 3")
        self.assertIsInstance(r, agentbox.ExecuteResponse)
        self.assertTrue(self.sb.id.startswith("ab-"), self.sb.id)
        self.assertEqual(self.sb.id, self.sb.hello["sandbox_id"])
        self.assertEqual((r.output, r.exit_code, r.truncated), ("out\nerr\n", 3, False))

    def test_isolation_is_full_by_default(self):
        self.assertEqual(self.sb.isolation, "full")

    def test_isolation_best_names_what_is_missing(self):
        # the test-only stand-in for a container that refuses sethostname
        # (tests/containers/graded-host.sh tests the real refusals)
        os.environ["AGENTBOX_TEST_ISOLATION_DENY"] = "uts"
        try:
            sb = sandbox(self.ws, isolation="best")
        finally:
            del os.environ["AGENTBOX_TEST_ISOLATION_DENY"]
        self.addCleanup(sb.close)
        self.assertEqual(sb.isolation, {"level": "partial", "missing": ["uts"]})
        r = sb.run("hostname")
        self.assertNotEqual(r.stdout.strip(), "agentbox")

    def test_limits_hold_or_the_start_refuses(self):
        # pids hold for everyone (a cgroup, or RLIMIT_NPROC in the sandbox's
        # user namespace); memory only with a cgroup: without one the start
        # refuses (limits "full", agentbox's default) unless limits="best"
        cgroups = ROOT  # support.sandbox passes no --cgroup-parent
        if not cgroups:
            with self.assertRaises(SandboxError) as cm:
                sandbox(self.ws, memory="64M", pids=64)
            self.assertIn("--memory 64M", str(cm.exception))
            self.assertIn("--limits best", str(cm.exception))
        sb = sandbox(self.ws, memory="64M", pids=64, limits="best")
        self.addCleanup(sb.close)
        lim = sb.hello["limits"]
        self.assertIn(lim["pids"]["how"], ("cgroup", "rlimit"), lim)
        self.assertEqual(lim["memory"]["how"], "cgroup" if cgroups else "rlimit", lim)

    def test_timeout_is_124_with_partial_output(self):
        t = time.monotonic()
        r = self.sb.execute("echo partial; sleep 30", timeout=0.5)
        self.assertEqual((r.exit_code, r.output), (124, "partial\n"))
        self.assertLess(time.monotonic() - t, 10)

    def test_run_gives_every_field(self):
        r = self.sb.run("cat; echo $GREETING; pwd; echo e >&2", env={"GREETING": "hi"},
                        cwd="/tmp", stdin="in\n")
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, "in\nhi\n/tmp\n", "e\n"))
        self.assertFalse(r.timed_out or r.cancelled or r.oom_killed or r.truncated)
        self.assertGreaterEqual(r.duration_ms, 0)
        self.assertEqual(r.raw["type"], "result")
        r = self.sb.run(["echo", "$HOME"])  # an argv: no shell
        self.assertEqual(r.stdout, "$HOME\n")

    def test_state_persists_between_calls(self):
        self.sb.execute("echo kept > note.txt")
        self.assertEqual(self.sb.execute("cat note.txt").output, "kept\n")
        with open(os.path.join(self.ws, "note.txt")) as f:
            self.assertEqual(f.read(), "kept\n")

    def test_truncation(self):
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        with sandbox(ws, max_output=2048) as sb:
            r = sb.execute("head -c 100000 /dev/zero | tr '\\0' x")
            self.assertTrue(r.truncated)
            self.assertLess(len(r.output), 4096)

    def test_protocol_errors_raise_with_the_code(self):
        with self.assertRaises(ProtocolError) as cm:
            self.sb.run("true", env={"GITHUB_TOKEN": "x"})
        self.assertEqual(cm.exception.code, "invalid_request")
        with self.assertRaises(ProtocolError) as cm:
            self.sb.request("exec", comand="true")
        self.assertEqual(cm.exception.code, "invalid_request")
        self.assertEqual(self.sb.execute("true").exit_code, 0)  # and it goes on

    def test_threads(self):
        results = {}

        def worker(n):
            for i in range(10):
                results[(n, i)] = self.sb.execute("echo %d-%d" % (n, i)).output

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(results, {(n, i): "%d-%d\n" % (n, i)
                                   for n in range(8) for i in range(10)})


class Containment(unittest.TestCase):
    """Symlink and path tricks through the client: the view is the guard,
    and nothing outside the workspace changes on the host."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="agentbox-py-contain-")
        os.chmod(self.tmp, 0o755)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.ws = os.path.join(self.tmp, "ws")
        self.skills = os.path.join(self.tmp, "skills")
        os.mkdir(self.ws)
        os.mkdir(self.skills)
        if ROOT:
            os.chown(self.ws, UID, UID)
        with open(os.path.join(self.skills, "SKILL.md"), "w") as f:
            f.write("skill\n")
        self.home_secret = os.path.join(self.tmp, "home-secret")  # stands for ~/.ssh/id_rsa
        with open(self.home_secret, "w") as f:
            f.write("PRIVATE KEY\n")
        os.chmod(self.home_secret, 0o644)
        for name, target in (("passwd", "/etc/passwd"), ("secret", self.home_secret),
                             ("skills-link", "/skills/SKILL.md"),
                             ("outside", os.path.join(self.tmp, "planted-by-sandbox"))):
            os.symlink(target, os.path.join(self.ws, name))
        self.sb = sandbox(self.ws, skills=self.skills)
        self.addCleanup(self.sb.close)

    def snapshot(self):
        out = {}
        for root, dirs, files in os.walk(self.tmp):
            if root.startswith(self.ws):
                continue
            for n in files:
                p = os.path.join(root, n)
                with open(p, "rb") as f:
                    out[p] = f.read()
        return out

    def test_tricks_are_contained(self):
        before = self.snapshot()
        sb = self.sb
        r = sb.read("passwd")  # the view's /etc/passwd: the host's, read-only
        self.assertIsNone(r.error)
        self.assertIsNotNone(sb.write("passwd", "x").error)
        r = sb.read("secret")  # a host path that is not in the view
        self.assertIsNotNone(r.error)
        self.assertIsNone(r.file_data)
        self.assertEqual(sb.download_files(["secret"])[0].error, "file_not_found")
        self.assertIsNotNone(sb.write("skills-link", "overwritten").error)
        self.assertIsNotNone(sb.edit("skills-link", "skill", "x").error)
        self.assertEqual(sb.upload_files([("/skills/new", b"x")])[0].error, "permission_denied")
        self.assertIsNotNone(sb.write("outside", "x").error)
        self.assertIsNotNone(sb.write("../escape.txt", "x").error)
        self.assertIsNotNone(sb.write("/workspace/../escape.txt", "x").error)
        # the host path names the sandbox's own /tmp (a tmpfs): the write lands
        # there, and the snapshot below shows the host's file untouched
        sb.write(self.home_secret, "x")
        self.assertIsNotNone(sb.write("/etc/agentbox-test", "x").error)
        self.assertIsNotNone(sb.delete("/etc/passwd").error)
        self.assertIsNone(sb.delete("passwd").error)  # the link itself, in the workspace
        self.assertEqual(self.snapshot(), before, "something outside the workspace changed")
        self.assertTrue(os.path.exists("/etc/passwd"))
        self.assertFalse(os.path.exists("/etc/agentbox-test"))


class Lifecycle(unittest.TestCase):
    def test_close_is_idempotent_and_ends_the_server(self):
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        with sandbox(ws) as sb:
            pid = sb._s.pid
            sb.execute("true")
        self.assertIsNotNone(sb._s._proc.returncode)
        sb.close()
        self.assertTrue(sb.closed)
        with self.assertRaises(SandboxClosed):
            sb.execute("true")
        with self.assertRaises(ProcessLookupError):
            os.kill(pid, 0)

    def test_a_killed_server_fails_the_next_call_and_a_new_one_works(self):
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        sb = sandbox(ws)
        self.addCleanup(sb.close)
        waiter = {}

        def wait_long():
            try:
                sb.execute("sleep 60")
            except SandboxError as e:
                waiter["error"] = e

        t = threading.Thread(target=wait_long)
        t.start()
        time.sleep(0.3)
        os.kill(sb._s.pid, signal.SIGKILL)
        t.join(10)
        self.assertFalse(t.is_alive(), "a caller waiting on a dead server must wake up")
        self.assertIsInstance(waiter.get("error"), SandboxClosed)
        start = time.monotonic()
        with self.assertRaises(SandboxClosed) as cm:
            sb.execute("true")
        self.assertLess(time.monotonic() - start, 5)
        self.assertIn("ended", str(cm.exception))
        with sandbox(ws) as again:
            self.assertEqual(again.execute("echo back").output, "back\n")

    def test_a_server_killed_while_no_call_waits_fails_the_next_call(self):
        # no thread reads the server's output between calls: the next call
        # finds it gone, and says how it ended
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        sb = sandbox(ws)
        self.addCleanup(sb.close)
        self.assertEqual(sb.execute("echo up").output, "up\n")
        os.kill(sb._s.pid, signal.SIGKILL)
        with self.assertRaises(SandboxClosed) as cm:
            sb.execute("true")
        self.assertIn("ended", str(cm.exception))
        self.assertTrue(sb.closed)

    def test_bad_start_says_why(self):
        with self.assertRaises(SandboxError) as cm:
            Sandbox("/nonexistent/agentbox-ws", extra_args=("--host-uid", "65534") if ROOT
                    else ())
        self.assertIn("/nonexistent/agentbox-ws", str(cm.exception))
        with self.assertRaises(SandboxError) as cm:
            Sandbox(tempfile.gettempdir(), binary="/nonexistent/agentbox")
        self.assertIn("cannot start", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
