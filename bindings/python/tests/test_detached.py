"""Detached sandboxes from Python (docs/detached.md): Sandbox.create(
detach=True, name=...), Sandbox.connect(id), Sandbox.list(), replayed
results, destroy(); the same test as root and as a plain user."""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import unittest.mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import ROOT, UID, oci_image, root_tree, workspace  # noqa: E402

import agentbox  # noqa: E402

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")


class Detached(unittest.TestCase):
    def setUp(self):
        self.rt = tempfile.mkdtemp(prefix="ab-py-rt-")
        self.addCleanup(shutil.rmtree, self.rt, True)
        old = os.environ.get("AGENTBOX_RUNTIME_DIR")
        os.environ["AGENTBOX_RUNTIME_DIR"] = self.rt
        self.addCleanup(lambda: os.environ.pop("AGENTBOX_RUNTIME_DIR") if old is None
                        else os.environ.__setitem__("AGENTBOX_RUNTIME_DIR", old))
        self.ws = workspace()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.extra = ("--host-uid", str(UID)) if ROOT else ()

    def create(self, **kw):
        try:
            sb = agentbox.Sandbox.create(self.ws, detach=True, extra_args=self.extra, **kw)
        except agentbox.SandboxError as e:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1" or "user namespace" not in str(e):
                raise
            self.skipTest("agentbox cannot run here: %s" % e)
        self.addCleanup(subprocess.run, [BIN, "rm", "-f", sb.id], capture_output=True)
        return sb

    def test_create_connect_list_destroy(self):
        sb = self.create(name="py1")
        self.assertEqual(sb.id, "py1")
        self.assertEqual(sb.execute("echo hi > f; cat f").output, "hi\n")
        with self.assertRaises(agentbox.SandboxError) as cm:
            agentbox.Sandbox.connect("py1")
        self.assertIn("busy", str(cm.exception))
        sb.close()  # a disconnect: the sandbox stays
        (e,) = agentbox.Sandbox.list()
        self.assertEqual((e["id"], e["state"]), ("py1", "running"))
        sb2 = agentbox.Sandbox.connect("py1")
        self.assertEqual(sb2.execute("cat f").output, "hi\n")
        pid = e["pid"]
        sb2.destroy()
        self.assertEqual(agentbox.Sandbox.list(), [])
        self.assertEqual(os.listdir(self.rt), [])
        for _ in range(100):
            if not os.path.exists("/proc/%d" % pid):
                break
            time.sleep(0.05)
        self.assertFalse(os.path.exists("/proc/%d/cmdline" % pid) and
                         open("/proc/%d/cmdline" % pid).read())

    def test_fork(self):
        """fork(count=): new detached sandboxes from a checkpoint, each its
        own writes, the parent undisturbed (docs/checkpoints.md)."""
        sb = self.create(workspace_mode="overlay")
        self.addCleanup(sb.close)
        self.assertEqual(sb.execute("echo v2 > f.txt").exit_code, 0)
        c = sb.checkpoint()
        ids = sb.fork(count=2, checkpoint=c)
        for i in ids:
            self.addCleanup(subprocess.run, [BIN, "rm", "-f", i], capture_output=True)
        self.assertEqual(len(set(ids)), 2)
        for i in ids:
            f = agentbox.Sandbox.connect(i)
            self.assertEqual(f.execute("cat f.txt; echo %s > me" % i).output, "v2\n")
            f.destroy()
        self.assertEqual(sb.execute("test -e me || echo none").output, "none\n")
        with self.assertRaises(agentbox.ProtocolError):
            sb.fork(count=101)
        with self.assertRaises(agentbox.ProtocolError):
            sb.fork(checkpoint="nope")

    def test_port(self):
        """sandbox.port(n): a server inside (network "none") reached from the
        host through the URL it returns; listed, the same URL again, closed."""
        import urllib.request
        sb = self.create()
        self.addCleanup(sb.close)
        sb.request("exec", keep_background=True,
                   command="echo hello from inside > index.html; nohup python3 -m "
                   "http.server 8000 --bind 127.0.0.1 >/tmp/http.log 2>&1 &")
        url = sb.port(8000)
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+$")
        self.assertEqual(sb.port(8000), url)
        self.assertEqual([(p["port"], p["url"], p["public"]) for p in sb.ports()],
                         [(8000, url, False)])
        body, end = None, time.monotonic() + 20
        while body is None and time.monotonic() < end:
            try:
                body = urllib.request.urlopen(url + "/index.html", timeout=2).read()
            except OSError:
                time.sleep(0.05)
        self.assertEqual(body, b"hello from inside\n")
        with self.assertRaises(agentbox.ProtocolError):
            sb.port(8000, host="10.0.0.1:80")
        sb.close_port(8000)
        self.assertEqual(sb.ports(), [])
        # with a token: told once (a new one) or as given; each connection
        # sends it and a newline first (a non-loopback host needs one; the
        # test stays on loopback)
        tp = sb.port(8000, host="127.0.0.1:0", token=True)
        self.assertIsInstance(tp, agentbox.TokenPort)
        url, token = tp
        self.assertRegex(url, r"^tcp://127\.0\.0\.1:\d+$")
        self.assertRegex(token, r"^[!-~]{16,128}$")
        self.assertEqual([(p["port"], p["url"], p["token"]) for p in sb.ports()],
                         [(8000, url, True)])
        addr = url[len("tcp://"):].rsplit(":", 1)

        def fetch(line):
            with socket.create_connection((addr[0], int(addr[1])), timeout=10) as c:
                c.sendall(line + b"GET /index.html HTTP/1.0\r\n\r\n")
                got = b""
                try:
                    while True:
                        b = c.recv(65536)
                        if not b:
                            break
                        got += b
                except ConnectionResetError:
                    pass
                return got
        self.assertIn(b"hello from inside", fetch(token.encode() + b"\n"))
        self.assertNotIn(b"hello from inside", fetch(b"not-the-token-at-all\n"))
        sb.close_port(8000)
        given = "a-token-of-mine-0123456789"
        self.assertEqual(sb.port(8000, host="127.0.0.1:0", token=given).token, given)
        with self.assertRaises(TypeError):
            sb.port(8001, token=12345)  # type: ignore[call-overload]
        with self.assertRaises(agentbox.ProtocolError):
            sb.port(8001, token="short")
        sb.close_port(8000)

    def test_a_detached_sandbox_on_a_root_tree(self):
        tree = root_tree()
        self.addCleanup(shutil.rmtree, tree, True)
        sb = self.create(name="pyroot", rootfs=tree)
        r = sb.execute("cat /opt/marker; test -e /usr/bin/env || echo no-host-env")
        self.assertEqual(r.output, "from-tree\nno-host-env\n")
        sb.destroy()

    def test_a_detached_sandbox_on_an_image(self):
        tree = root_tree()
        img, cache = oci_image(tree), tempfile.mkdtemp(prefix="agentbox-py-cache-")
        for d in (tree, img, cache):
            self.addCleanup(shutil.rmtree, d, True)
        os.environ["AGENTBOX_IMAGE_CACHE"] = cache
        self.addCleanup(os.environ.pop, "AGENTBOX_IMAGE_CACHE", None)
        sb = self.create(name="pyimage", image="oci:" + img, workspace_mode="overlay")
        r = sb.execute("cat /opt/layered; test -e /opt/marker || echo deleted")
        self.assertEqual(r.output, "layered\ndeleted\n")
        # a fork stands on the same image (its layers locked by the fork's
        # maker again: the launcher's fds are closed there) and its Env
        sb.execute("echo w > w")
        (fid,) = sb.fork()
        self.addCleanup(subprocess.run, [BIN, "rm", "-f", fid], capture_output=True)
        f = agentbox.Sandbox.connect(fid)
        self.assertEqual(f.execute("cat /opt/layered w; echo $IMGVAR").output,
                         "layered\nw\nfromimage\n")
        f.destroy()
        sb.destroy()

    def test_pause_resume(self):
        sb = self.create(name="pz")
        try:
            sb.pause()
        except agentbox.SandboxError as e:
            if ROOT:
                raise
            self.assertIn("cannot be paused", str(e))  # refused, never pretended
            self.assertEqual(agentbox.Sandbox.list()[0]["state"], "running")
            self.skipTest("no cgroup to freeze: %s" % e)
        self.assertEqual(agentbox.Sandbox.list()[0]["state"], "paused")
        sb.resume()
        self.assertEqual(agentbox.Sandbox.list()[0]["state"], "running")
        self.assertEqual(sb.execute("echo on").output, "on\n")
        sb.destroy()

    def test_killed_client_result_is_replayed(self):
        sb = self.create(name="py2")
        sb.close()
        code = ("import sys, agentbox; sb = agentbox.Sandbox.connect('py2'); "
                "c = sb._s.send(dict(op='exec', command='until [ -e go ]; do sleep 0.05; done; "
                "echo late')); "
                "print(c and 'sent', flush=True); import time; time.sleep(30)")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env)
        self.assertEqual(p.stdout.readline().strip(), b"sent")
        def running():
            return [e for e in agentbox.Sandbox.list() if e["name"] == "py2"][0]["running"]
        deadline = time.monotonic() + 10
        while running() != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
        # the command ends while no client is attached
        open(os.path.join(self.ws, "go"), "w").close()
        deadline = time.monotonic() + 10
        while running() != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(running(), 0)
        for _ in range(50):
            try:
                sb = agentbox.Sandbox.connect("py2")
                break
            except agentbox.SandboxError as e:  # the bridge may still be ending
                self.assertIn("busy", str(e))
                time.sleep(0.1)
        sb.execute("true")  # the replayed lines are read with the first reply
        self.assertEqual(len(sb.replayed), 1, sb.replayed)
        r = sb.replayed[0]
        self.assertEqual((r["type"], r["stdout"], r["exit_code"]), ("result", "late\n", 0))
        sb.destroy()

    def test_an_interrupted_exec_iteration_resumes(self):
        # the bridge (agentbox connect) killed at random points of a 3,000,000-line seq:
        # the iteration goes on through a new one and loses no byte, doubles none
        sb = self.create()
        whole = b"".join(b"%d\n" % i for i in range(1, 3000001))
        rnd = random.Random(os.getpid())
        for _ in range(2):
            kill_at = rnd.randrange(len(whole) // 20, len(whole) * 9 // 10)
            p = sb.spawn("seq 3000000")
            got = bytearray()
            bridge = None
            for chunk in p:
                got += chunk
                if bridge is None and len(got) >= kill_at:
                    bridge = sb._s._proc
                    bridge.kill()
            self.assertIsNotNone(bridge)
            self.assertIsNot(sb._s._proc, bridge)  # a new bridge
            self.assertEqual(p.wait()["exit_code"], 0)
            self.assertEqual((len(got), p.dropped), (len(whole), []), "killed at %d" % kill_at)
            self.assertTrue(got == whole, "killed at %d: the bytes differ" % kill_at)
        self.assertEqual(sb.execute("echo still").output, "still\n")
        sb.destroy()


class Provider(unittest.TestCase):
    """deepagents-code's provider interface (agentbox.deepagents_code)."""

    setUp = Detached.setUp

    def test_get_or_create_reattach_delete(self):
        from agentbox.deepagents_code import AgentboxProvider, SandboxNotFoundError
        p = AgentboxProvider()
        m = p.metadata
        self.assertEqual((m.name, m.working_dir, m.supports_sandbox_id),
                         ("agentbox", "/workspace", True))
        cwd = os.getcwd()
        os.chdir(self.ws)  # the provider's default workspace
        self.addCleanup(os.chdir, cwd)
        try:
            sb = p.get_or_create(network="none", future_param=1)
        except agentbox.SandboxError as e:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1" or "user namespace" not in str(e):
                raise
            self.skipTest("agentbox cannot run here: %s" % e)
        sid = sb.id
        self.addCleanup(subprocess.run, [BIN, "rm", "-f", sid], capture_output=True)
        sb.write("/workspace/note.txt", "kept\n")
        sb.close()
        again = p.get_or_create(sandbox_id=sid)
        self.assertEqual(again.execute("cat note.txt").output, "kept\n")
        again.close()
        p.delete(sandbox_id=sid)
        self.assertEqual(agentbox.Sandbox.list(), [])
        with self.assertRaises(SandboxNotFoundError):
            p.get_or_create(sandbox_id=sid)
        with self.assertRaises(SandboxNotFoundError):
            p.delete(sandbox_id=sid)

    def test_secrets_stay_out_of_the_sandbox(self):
        # [sandboxes.providers.agentbox.params] secrets: the agent's
        # commands see a placeholder; the value stays with agentbox
        from agentbox.deepagents_code import AgentboxProvider
        value = "provider-secret-%d" % os.getpid()
        with unittest.mock.patch.dict(os.environ, {"AB_PROVIDER_TOKEN": value}):
            sb = AgentboxProvider().get_or_create(
                workspace=self.ws, secrets={"AB_PROVIDER_TOKEN": "127.0.0.1:9"})
        self.addCleanup(subprocess.run, [BIN, "rm", "-f", sb.id], capture_output=True)
        out = sb.execute("echo $AB_PROVIDER_TOKEN; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'").output
        self.assertRegex(out.splitlines()[0], r"^agentbox-secret-[0-9a-f]{32}$")
        self.assertNotIn(value, out)
        sb.close()


if __name__ == "__main__":
    unittest.main()
