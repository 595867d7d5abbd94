"""agent-sandbox's own clients against agentbox runtime: its tester.py
(examples/python-runtime-sandbox) and its Python SDK's direct connection
(clients/python/agentic-sandbox-client: test_client.py's command and file
checks, commands.run, files.write/read/exists/list; and its sandboxd
files API over its pod tunnel, with a stand-in kubectl that forwards the
ports as `kubectl port-forward` does), taken at test time from
a git snapshot of kubernetes-sigs/agent-sandbox pinned at PINNED, never
copied into this repository. Stand-ins only for the kubernetes and
prometheus_client modules the SDK imports, when they are not installed.

The runtime asks for its token (Authorization: Bearer), which these
clients at PINNED cannot be told to send on their own: the SDK's
connector keeps a requests.Session, whose default headers carry it (as an
application holding the Secret would set them); tester.py calls
requests.get/post with no session, so each Session it makes has the token
added (what a sidecar holding the Secret would do).

The snapshot: AGENTBOX_AGENT_SANDBOX_GIT (a git directory holding PINNED),
else MIRROR. Without it the test skips; it fails instead when
AGENTBOX_AGENT_SANDBOX_GIT was given and does not hold PINNED. (CI's fresh
clone has no snapshot: there it skips, saying so.)"""

import importlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtlib import Runtime  # noqa: E402

PINNED = "2fd412d55ecae90861a101a5424a75473de97c36"
MIRROR = "/work/.mirror/kubernetes-sigs+agent-sandbox/repo"
EXAMPLE = "examples/python-runtime-sandbox"
SDK = "clients/python/agentic-sandbox-client"

STANDINS = {
    "kubernetes/__init__.py": "from . import client, config, watch\n",
    "kubernetes/client.py": (
        "class _Any:\n"
        "    def __init__(self, *a, **k): pass\n"
        "    def __getattr__(self, name): return _Any()\n"
        "    def __call__(self, *a, **k): return _Any()\n"
        "def __getattr__(name): return _Any\n"),
    "kubernetes/config.py": (
        "class ConfigException(Exception): pass\n"
        "def load_incluster_config(): raise ConfigException('stand-in')\n"
        "def load_kube_config(*a, **k): raise ConfigException('stand-in')\n"),
    "kubernetes/watch.py": "class Watch:\n    def __init__(self, *a, **k): pass\n",
    "prometheus_client/__init__.py": (
        "class Histogram:\n"
        "    def __init__(self, *a, **k): pass\n"
        "    def labels(self, *a, **k): return self\n"
        "    def observe(self, *a, **k): pass\n"
        "    def time(self): import contextlib; return contextlib.nullcontext()\n"
        "Counter = Gauge = Summary = Histogram\n"
        "REGISTRY = None\n"
        "def generate_latest(registry=None): return b''\n"),
}


# `kubectl port-forward pod/P L1:8080 L2:9090 -n NS` for the SDK's sandboxd
# tunnel: L1 forwarded to the test's agentbox runtime; L2 (gRPC: the SDK's
# process client is generated for protobuf 7, which Debian 12 lacks, so
# tests/runtime/grpc checks that port with grpc-js instead) accepts and closes
KUBECTL = """#!/usr/bin/env python3
import os, socket, sys, threading
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(port, target):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    while True:
        c, _ = ls.accept()
        if target is None:
            c.close()
            continue
        u = socket.create_connection(("127.0.0.1", target))
        threading.Thread(target=pipe, args=(c, u), daemon=True).start()
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()
rest, grpc = (int(a.split(":")[0]) for a in sys.argv[3:5])
threading.Thread(target=serve, args=(grpc, None), daemon=True).start()
serve(rest, int(os.environ["AGENTBOX_TEST_REST_PORT"]))
"""


def snapshot():
    """The git directory holding PINNED, or raise SkipTest / fail."""
    given = os.environ.get("AGENTBOX_AGENT_SANDBOX_GIT")
    repo = given or MIRROR
    ok = os.path.isdir(repo) and subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", repo, "cat-file", "-e", PINNED + "^{commit}"],
        capture_output=True).returncode == 0
    if ok:
        return repo
    msg = "no snapshot of kubernetes-sigs/agent-sandbox at %s in %s" % (PINNED[:7], repo)
    if given:
        raise AssertionError(msg + " (AGENTBOX_AGENT_SANDBOX_GIT)")
    raise unittest.SkipTest(msg + ": set AGENTBOX_AGENT_SANDBOX_GIT to a clone holding it "
                            "(a fresh CI clone has none)")


def extract(repo, paths, into):
    archive = subprocess.run(["git", "-c", "safe.directory=*", "-C", repo, "archive", PINNED,
                              *paths], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)


class AgentSandboxClients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for mod in ("requests", "pydantic", "urllib3"):
            try:
                importlib.import_module(mod)
            except ImportError:
                raise unittest.SkipTest("the SDK and tester.py need %s (python3-%s)" % (mod, mod))
        repo = snapshot()
        cls.tmp = tempfile.mkdtemp(prefix="agentbox-agent-sandbox-")
        extract(repo, [EXAMPLE + "/tester.py", SDK + "/k8s_agent_sandbox", SDK + "/test_client.py"],
                cls.tmp)
        paths = [os.path.join(cls.tmp, EXAMPLE), os.path.join(cls.tmp, SDK)]
        standins = os.path.join(cls.tmp, "standins")
        for mod in ("kubernetes", "prometheus_client"):
            try:
                importlib.import_module(mod)
            except ImportError:
                for name, text in STANDINS.items():
                    if name.startswith(mod + "/"):
                        os.makedirs(os.path.join(standins, mod), exist_ok=True)
                        with open(os.path.join(standins, name), "w") as f:
                            f.write(text)
        paths.append(standins)
        sys.path[:0] = paths
        cls.rt = Runtime()

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_tester_py(self):
        """Its checks but test_ml_libraries, which needs pandas, scikit-learn
        and lightgbm in the sandbox (its image has them; the host's view here
        has not): a sys.exit(1) in any of them fails this test."""
        tester = importlib.import_module("tester")
        import requests
        plain = requests.Session.request
        token = self.rt.token

        def with_token(session, method, url, **kw):
            kw["headers"] = dict(kw.get("headers") or {}, Authorization="Bearer " + token)
            return plain(session, method, url, **kw)

        self.enterContext(mock.patch.object(requests.Session, "request", with_token))
        out = io.StringIO()
        for name in ("test_health_check", "test_execute", "test_list_files", "test_exists",
                     "test_path_traversal", "test_absolute_path_traversal", "test_upload",
                     "test_upload_path_traversal"):
            with self.subTest(check=name):
                try:
                    with redirect_stdout(out):
                        getattr(tester, name)(self.rt.url)
                except SystemExit as e:
                    self.fail("%s: exit %s\n%s" % (name, e.code, out.getvalue()))

    def sandbox(self):
        from k8s_agent_sandbox.models import SandboxDirectConnectionConfig
        from k8s_agent_sandbox.sandbox import Sandbox

        class K8sStandIn:  # the direct connection asks the cluster nothing
            def get_sandbox(self, *a, **k):
                return {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}

        sb = Sandbox(claim_name="agentbox", sandbox_id="agentbox",
                     connection_config=SandboxDirectConnectionConfig(api_url=self.rt.url),
                     k8s_helper=K8sStandIn())
        sb.connector.session.headers["Authorization"] = "Bearer " + self.rt.token
        return sb

    def test_sdk_direct_connection(self):
        sb = self.sandbox()
        try:
            r = sb.commands.run("echo 'hello from agentbox'")
            self.assertEqual((r.stdout, r.stderr, r.exit_code), ("hello from agentbox\n", "", 0))
            self.assertEqual(sb.commands.run("sh -c 'exit 7'").exit_code, 7)
            sb.files.write("dir/notes.txt", "some notes\n")
            self.assertEqual(sb.files.read("dir/notes.txt"), b"some notes\n")
            self.assertTrue(sb.files.exists("dir/notes.txt"))
            self.assertFalse(sb.files.exists("dir/missing.txt"))
            entries = sb.files.list("dir")
            self.assertEqual([(e.name, e.size, e.type) for e in entries],
                             [("notes.txt", 11, "file")])
            with open(os.path.join(self.rt.ws, "dir", "notes.txt")) as f:
                self.assertEqual(f.read(), "some notes\n")
        finally:
            sb.connector.close()

    def test_sdk_sandboxd_files(self):
        """The SDK's Filesystem in its sandboxd mode (PUT, GET, HEAD, GET of
        a directory, DELETE under /v1/files) through its own pod tunnel."""
        from k8s_agent_sandbox.models import SandboxdPodTunnelConnectionConfig
        from k8s_agent_sandbox.sandbox import Sandbox

        class K8sStandIn:
            def get_sandbox(self, *a, **k):
                return {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}

        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        with open(os.path.join(bindir, "kubectl"), "w") as fh:
            fh.write(KUBECTL)
        os.chmod(os.path.join(bindir, "kubectl"), 0o755)
        saved = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ["PATH"] = bindir + os.pathsep + os.environ["PATH"]
        os.environ["AGENTBOX_TEST_REST_PORT"] = str(self.rt.port)
        sb = Sandbox(claim_name="agentbox", sandbox_id="agentbox",
                     connection_config=SandboxdPodTunnelConnectionConfig(),
                     k8s_helper=K8sStandIn())
        sb.connector.session.headers["Authorization"] = "Bearer " + self.rt.token
        try:
            self.assertTrue(sb.connector.is_sandboxd())
            sb.files.write("v1/notes.txt", "sandboxd notes\n")
            self.assertEqual(sb.files.read("v1/notes.txt"), b"sandboxd notes\n")
            self.assertTrue(sb.files.exists("v1/notes.txt"))
            self.assertFalse(sb.files.exists("v1/missing.txt"))
            entries = sb.files.list("v1")
            self.assertEqual([(e.name, e.size, e.type) for e in entries],
                             [("notes.txt", 15, "file")])
            with open(os.path.join(self.rt.ws, "v1", "notes.txt")) as fh:
                self.assertEqual(fh.read(), "sandboxd notes\n")
            sb.files.delete("v1", recursive=True)
            self.assertFalse(os.path.exists(os.path.join(self.rt.ws, "v1")))
        finally:
            sb.connector.close()

    def test_sdk_test_client_checks(self):
        """test_client.py's own command and file checks, as written."""
        test_client = importlib.import_module("test_client")
        sb = self.sandbox()
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                test_client.test_command_execution(sb)
                test_client.test_file_operations(sb)
        finally:
            sb.connector.close()


if __name__ == "__main__":
    unittest.main()
