"""agentbox runtime's own extras under /agentbox/v1/ (docs/kubernetes.md):
the overlay workspace's changes, commit and discard (discard replaces the
sandbox, the runtime lives on), the network proxy's report and policy,
and their errors in sandboxd's {"code","message"} shape: 409 without
--workspace-mode overlay or --net allow=, 400 for a bad body or query,
405 with Allow, 404. Every server is one this test starts on 127.0.0.1."""

import functools
import http.server
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtlib import Runtime, wait_for  # noqa: E402

A = "/agentbox/v1/"


class Client:
    def __init__(self, tc, rt):
        self.tc, self.rt = tc, rt

    def call(self, method, route, body=None, want=200):
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        st, headers, raw = self.rt.request(method, A + route, data,
                                           {"Content-Type": "application/json"})
        self.tc.assertEqual(st, want, raw)
        self.tc.assertEqual(headers.get("Content-Type"), "application/json", raw)
        return json.loads(raw), headers

    def execute(self, command):
        st, _, body = self.rt.request("POST", "/execute", json.dumps({"command": command}).encode())
        self.tc.assertEqual(st, 200, body)
        return json.loads(body)

    def error(self, method, route, want, code, fragment, body=None):
        o, headers = self.call(method, route, body, want)
        self.tc.assertEqual(sorted(o), ["code", "message"], o)
        self.tc.assertEqual(o["code"], code, o)
        self.tc.assertIn(fragment, o["message"])
        return headers


class Overlay(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime("--workspace-mode", "overlay")
        self.addCleanup(self.rt.close)
        with open(os.path.join(self.rt.ws, "host.txt"), "w") as f:
            f.write("host\n")
        self.c = Client(self, self.rt)

    def host(self, name):
        p = os.path.join(self.rt.ws, name)
        if not os.path.exists(p):
            return None
        with open(p) as f:
            return f.read()

    def paths(self, changes):
        return {c["path"]: c["status"] for c in changes["changes"]}

    def test_changes_discard_then_commit(self):
        self.assertEqual(self.c.call("GET", "changes")[0]["changes"], [])
        self.c.execute("sh -c 'echo one > new.txt; echo edited > host.txt'")
        ch = self.c.call("GET", "changes")[0]
        self.assertEqual(self.paths(ch), {"new.txt": "added", "host.txt": "modified"})
        self.assertNotIn("diff", ch["changes"][0])
        ch = self.c.call("GET", "changes?diff=true")[0]
        diffs = {c["path"]: c["diff"] for c in ch["changes"]}
        self.assertIn("+edited\n", diffs["host.txt"])
        # nothing reached the host
        self.assertEqual((self.host("new.txt"), self.host("host.txt")), (None, "host\n"))

        o = self.c.call("POST", "discard")[0]
        self.assertEqual(o["discarded"], True)
        self.assertTrue(o["sandbox_id"].startswith("ab-"), o)
        self.assertTrue(wait_for(lambda: "discard: sandbox" in "".join(self.rt.err)), self.rt.err)
        self.assertEqual(self.c.call("GET", "changes")[0]["changes"], [])
        r = self.c.execute("sh -c 'cat host.txt; test -e new.txt || echo gone'")
        self.assertEqual(r["stdout"], "host\ngone\n", r)
        st, _, body = self.rt.request("GET", "/")  # the runtime lives on
        self.assertEqual(st, 200, body)

        self.c.execute("sh -c 'echo two > a.txt; echo three > b.txt'")
        self.assertEqual(self.host("a.txt"), None)
        o = self.c.call("POST", "commit", {"paths": ["a.txt"]})[0]
        self.assertEqual(o["committed"], ["a.txt"], o)
        self.assertEqual((self.host("a.txt"), self.host("b.txt")), ("two\n", None))
        self.assertEqual(self.paths(self.c.call("GET", "changes")[0]), {"b.txt": "added"})
        o = self.c.call("POST", "commit")[0]  # no body: every change
        self.assertEqual(o["committed"], ["b.txt"], o)
        self.assertEqual(self.host("b.txt"), "three\n")
        self.assertEqual(self.c.call("GET", "changes")[0]["changes"], [])

    def test_bad_requests(self):
        h = self.c.error("POST", "changes", 405, "UNIMPLEMENTED", "Allow")
        self.assertEqual(h.get("Allow"), "GET")
        h = self.c.error("GET", "commit", 405, "UNIMPLEMENTED", "Allow")
        self.assertEqual(h.get("Allow"), "POST")
        h = self.c.error("DELETE", "discard", 405, "UNIMPLEMENTED", "Allow")
        self.assertEqual(h.get("Allow"), "POST")
        self.c.error("GET", "nope", 404, "NOT_FOUND", "/agentbox/v1/changes")
        self.c.error("POST", "commit", 400, "INVALID_ARGUMENT", "one JSON object", b'{"paths":')
        self.c.error("POST", "commit", 400, "INVALID_ARGUMENT", "one JSON object", b"[]")
        self.c.error("POST", "commit", 400, "INVALID_ARGUMENT", "one JSON object", b"{} {}")
        self.c.error("POST", "commit", 400, "INVALID_ARGUMENT", '"pahts"', {"pahts": []})
        self.c.error("POST", "commit", 400, "INVALID_ARGUMENT", "array of strings",
                     {"paths": "a.txt"})
        self.c.error("POST", "commit", 400, "INVALID_ARGUMENT", "no change", {"paths": ["zz"]})
        self.c.error("POST", "discard", 400, "INVALID_ARGUMENT", '"x"', {"x": 1})
        self.c.error("GET", "changes?diff=maybe", 400, "INVALID_ARGUMENT", "true or false")
        self.c.error("GET", "changes?max_diff_bytes=-1", 400, "INVALID_ARGUMENT", "positive")
        self.c.error("GET", "net", 409, "CONFLICT", "--net allow=")
        # none of it changed anything
        self.assertEqual(self.c.call("GET", "changes")[0]["changes"], [])

    def test_discard_is_refused_while_a_command_runs(self):
        t = threading.Thread(target=self.c.execute, args=("sh -c 'echo x > slow.txt; sleep 3'",))
        t.start()
        try:
            deadline = time.monotonic() + 10
            while not self.paths(self.c.call("GET", "changes")[0]) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.c.error("POST", "discard", 409, "CONFLICT", "retry once they are done")
        finally:
            t.join(30)
        self.assertEqual(self.paths(self.c.call("GET", "changes")[0]), {"slow.txt": "added"})
        self.c.call("POST", "discard")
        self.assertEqual(self.c.call("GET", "changes")[0]["changes"], [])

    def test_reviews_at_once_each_answered(self):
        self.c.execute("sh -c 'mkdir d; for i in 1 2 3 4 5 6 7 8; do echo $i > d/$i; done'")
        out = []

        def review():
            out.append(self.paths(self.c.call("GET", "changes")[0]))

        ts = [threading.Thread(target=review) for _ in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        self.assertEqual(len(out), 6)
        for o in out:
            self.assertEqual(o, dict({"d": "added"}, **{"d/%d" % i: "added" for i in range(1, 9)}))


class Direct(unittest.TestCase):
    def test_overlay_and_net_routes_say_what_is_missing(self):
        rt = Runtime()
        self.addCleanup(rt.close)
        c = Client(self, rt)
        for method, route in (("GET", "changes"), ("POST", "commit"), ("POST", "discard")):
            c.error(method, route, 409, "CONFLICT", "--workspace-mode overlay")
        c.error("GET", "net", 409, "CONFLICT", "--net allow=")
        c.error("POST", "net", 409, "CONFLICT", "--net allow=", {"allow": ["example.org"]})
        # nothing ended: the runtime still runs commands
        self.assertEqual(c.execute("echo ok")["stdout"], "ok\n")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


@unittest.skipUnless(shutil.which("curl"), "no curl to run in the sandbox")
class Net(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="agentbox-rt-net-")
        self.addCleanup(shutil.rmtree, self.root, True)
        with open(os.path.join(self.root, "hi.txt"), "w") as f:
            f.write("hi\n")
        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(_Quiet, directory=self.root))
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.addCleanup(self.httpd.server_close)
        self.addCleanup(self.httpd.shutdown)
        with socket.socket() as s:  # a port nobody listens on: never connected to
            s.bind(("127.0.0.1", 0))
            self.other = s.getsockname()[1]
        self.port = self.httpd.server_address[1]
        self.rt = Runtime("--net", "allow=127.0.0.1:%d" % self.port)
        self.addCleanup(self.rt.close)
        self.c = Client(self, self.rt)

    def curl(self, port):
        # 127.0.0.1 is the sandbox's own loopback: through the proxy to the host's
        r = self.c.execute("env no_proxy= NO_PROXY= curl -sS -m 20 -o /dev/null -w %%{http_code} "
                           "http://127.0.0.1:%d/hi.txt" % port)
        return r["stdout"]

    def test_report_of_allowed_and_denied_and_a_new_policy(self):
        o = self.c.call("GET", "net")[0]
        self.assertEqual(o, {"allow": ["127.0.0.1:%d" % self.port], "deny": [],
                             "network": {"allowed": [], "denied": []}})
        self.assertEqual(self.curl(self.port), "200")
        self.assertEqual(self.curl(self.other), "403")
        net = self.c.call("GET", "net")[0]["network"]
        self.assertEqual(net["allowed"], [{"host": "127.0.0.1", "port": self.port, "count": 1}])
        self.assertEqual([(d["host"], d["port"], d["count"]) for d in net["denied"]],
                         [("127.0.0.1", self.other, 1)])
        self.assertIn("loopback", net["denied"][0]["reason"])

        o = self.c.call("POST", "net", {"deny": ["127.0.0.1"]})[0]
        self.assertEqual(o["deny"], ["127.0.0.1"])
        self.assertEqual(self.curl(self.port), "403")
        o = self.c.call("POST", "net", {"deny": []})[0]
        self.assertEqual((o["allow"], o["deny"]), (["127.0.0.1:%d" % self.port], []))
        self.assertEqual(self.curl(self.port), "200")
        self.assertEqual(o["network"]["allowed"][0]["count"], 1)  # before that curl
        self.assertEqual(self.c.call("GET", "net")[0]["network"]["allowed"][0]["count"], 2)

        self.c.error("POST", "net", 400, "INVALID_ARGUMENT", "'bad..x'", {"allow": ["bad..x"]})
        self.c.error("POST", "net", 400, "INVALID_ARGUMENT", "array", {"allow": "x"})
        self.c.error("POST", "net", 400, "INVALID_ARGUMENT", '"secret"', {"secret": []})
        self.c.error("POST", "net", 400, "INVALID_ARGUMENT", "one JSON object", b"nope")
        h = self.c.error("DELETE", "net", 405, "UNIMPLEMENTED", "Allow")
        self.assertEqual(h.get("Allow"), "GET, POST")
        # the bad ones changed nothing
        self.assertEqual(self.c.call("GET", "net")[0]["allow"], ["127.0.0.1:%d" % self.port])
        self.c.error("GET", "changes", 409, "CONFLICT", "--workspace-mode overlay")


if __name__ == "__main__":
    unittest.main()
