"""agentbox runtime's own extras under /agentbox/v1/ (docs/kubernetes.md):
the overlay workspace's changes, commit and discard (discard replaces the
sandbox, the runtime lives on), the network proxy's report and policy,
file events as NDJSON (watch), published ports (port), and their errors in sandboxd's {"code","message"} shape: 409 without
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


class Watch(unittest.TestCase):
    """GET /agentbox/v1/watch: the engine's watch as a stream of NDJSON."""

    @classmethod
    def setUpClass(cls):
        cls.rt = Runtime("--max-concurrent", "3")

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()

    def open(self, query="", status=200):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.rt.port, timeout=20)
        c.request("GET", A + "watch" + query, headers={"Authorization": "Bearer " + self.rt.token})
        r = c.getresponse()
        self.assertEqual(r.status, status)
        self.addCleanup(c.close)
        if status == 200:
            self.assertEqual(r.getheader("Content-Type"), "application/x-ndjson")
            first = json.loads(r.readline())
            self.assertEqual(first["event"], "ready", first)
        return c, r

    def test_events_as_they_happen(self):
        c, r = self.open("?recursive=true")
        t0 = time.monotonic()
        Client(self, self.rt).execute("sh -c 'mkdir -p w/d && echo hi > w/d/f && mv w/d/f w/d/g'")
        seen = []
        while not any(e.get("event") == "renamed" for e in seen):
            seen.append(json.loads(r.readline()))
        took = time.monotonic() - t0
        kinds = [(e["event"], e["path"], e["dir"]) for e in seen]
        self.assertIn(("created", "/workspace/w/d", True), kinds)
        self.assertIn(("created", "/workspace/w/d/f", False), kinds)
        self.assertIn(("written", "/workspace/w/d/f", False), kinds)
        self.assertEqual(seen[-1]["from"], "/workspace/w/d/f")
        self.assertEqual(seen[-1]["path"], "/workspace/w/d/g")
        self.assertLess(took, 10)
        c.close()

    def test_bad_paths_are_statuses_before_the_stream(self):
        for query, status, code in [("?path=nope", 404, "NOT_FOUND"),
                                    ("?path=%2Fetc%2Fpasswd", 400, "INVALID_ARGUMENT"),
                                    ("?path=..%2Fx", 400, "INVALID_ARGUMENT"),
                                    ("?recursive=maybe", 400, "INVALID_ARGUMENT")]:
            with self.subTest(query=query):
                st, h, body = self.rt.request("GET", A + "watch" + query)
                self.assertEqual(st, status, body)
                self.assertEqual(json.loads(body)["code"], code)
        self.assertEqual(self.rt.request("POST", A + "watch", b"{}")[0], 405)
        self.assertEqual(self.rt.request("GET", A + "watch", auth=False)[0], 401)

    def test_a_directory_removed_ends_the_stream_with_its_error(self):
        Client(self, self.rt).execute("mkdir -p gone")
        c, r = self.open("?path=gone")
        Client(self, self.rt).execute("rmdir gone")
        lines = [json.loads(line) for line in r.read().splitlines()]  # to the end
        self.assertEqual(lines[-1]["code"], "file_not_found", lines)

    def try_three(self):
        """Whether three watches can be held at once now."""
        import http.client
        conns, ok = [], True
        for _ in range(3):
            c = http.client.HTTPConnection("127.0.0.1", self.rt.port, timeout=20)
            c.request("GET", A + "watch", headers={"Authorization": "Bearer " + self.rt.token})
            conns.append(c)
            ok = ok and c.getresponse().status == 200
        for c in conns:
            c.close()
        return ok

    def test_watches_hold_slots_until_their_client_goes(self):
        # the other tests' watches, whose clients closed, end within a second
        self.assertTrue(wait_for(self.try_three, 10))
        time.sleep(1.5)  # and these three too
        held = [self.open() for _ in range(3)]  # --max-concurrent 3
        st, _, body = self.rt.request("GET", A + "watch")
        self.assertEqual((st, json.loads(body)["code"]), (429, "RESOURCE_EXHAUSTED"), body)
        for c, _ in held:
            c.close()
        self.assertTrue(wait_for(lambda: self.rt.request(
            "POST", "/execute", json.dumps({"command": "true"}).encode())[0] == 200
            and self.rt.request("GET", A + "watch?path=nope")[0] == 404, 10))
        for _ in range(6):  # opened and closed: each slot comes back, within a second
            self.assertTrue(wait_for(self.try_three, 10))
        Client(self, self.rt).execute("true")


class Port(unittest.TestCase):
    """GET and POST /agentbox/v1/port: the protocol's port op (docs/network.md)."""

    def test_publish_list_close(self):
        rt = Runtime()
        self.addCleanup(rt.close)
        c = Client(self, rt)
        o, _ = c.call("GET", "port")
        self.assertEqual(o, {"ports": []})
        o, _ = c.call("POST", "port", {"port": 3000, "host": "127.0.0.1:0", "public": True})
        self.assertRegex(o["url"], r"^http://127\.0\.0\.1:\d+$")
        self.assertEqual([(p["port"], p["public"], p["token"]) for p in o["ports"]],
                         [(3000, True, False)])
        # it listens (not refused), and a connection nothing inside accepts is
        # reset (maybe before connect returns)
        port = int(o["url"].rsplit(":", 1)[1])
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                self.assertEqual(s.recv(10), b"")
        except ConnectionResetError:
            pass
        # beyond loopback: refused without a token, made with one
        c.error("POST", "port", 403, "PERMISSION_DENIED", "token",
                {"port": 3001, "host": "0.0.0.0:0"})
        o, _ = c.call("POST", "port", {"port": 3001, "host": "0.0.0.0:0", "token": True})
        self.assertRegex(o["token"], r"^[0-9a-f]{64}$")
        self.assertRegex(o["url"], r"^tcp://0\.0\.0\.0:\d+$")
        o, _ = c.call("GET", "port")
        self.assertNotIn("token", o)
        self.assertEqual(sorted(p["port"] for p in o["ports"]), [3000, 3001])
        o, _ = c.call("POST", "port", {"port": 3000, "close": True})
        self.assertEqual([p["port"] for p in o["ports"]], [3001])
        c.error("POST", "port", 400, "INVALID_ARGUMENT", "port", {"host": "127.0.0.1:0"})
        c.error("POST", "port", 400, "INVALID_ARGUMENT", "unknown field", {"port": 1, "x": 1})
        c.error("POST", "port", 400, "INVALID_ARGUMENT", "1 to 65535", {"port": 70000})
        self.assertEqual(rt.request("GET", A + "port", auth=False)[0], 401)
