"""--net allow= rules by method and path (docs/network.md, "Rules by method
and path"): the proxy terminates TLS for a host with such a rule and checks
each request; a host-only rule stays a blind tunnel. HTTPS servers on the
host's 127.0.0.1 with a test CA (test_secrets.py's). Runs as root and as an
unprivileged user; AGENTBOX_BIN names the binary."""

import os
import shutil
import subprocess
import unittest

from test_secrets import BIN, MUST_WORK, THROUGH, VALUE, Server, WithCA

CURL = "curl -sS -m 20 -w ' %{http_code}\\n' "


class Rules(WithCA):
    def setUp(self):
        super().setUp()
        self.rep = os.path.join(self.ws, "report.json")

    def server(self, tls=True):
        s = Server(self.d, "testca") if tls else Server()
        self.addCleanup(s.close)
        return s

    def run_box(self, *args):
        r = subprocess.run([BIN, "run", "--workspace", self.ws, *THROUGH, *args],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 125 and not MUST_WORK and "cannot" in r.stderr and \
                "--net" not in r.stderr:
            self.skipTest("agentbox cannot run here: " + r.stderr)
        return r

    def box(self, rules, script, ca=True):
        args = []
        for rule in rules:
            args += ["--net", "allow=" + rule]
        if ca:
            args += ["--net", "ca=" + self.ca]
        return self.run_box(*args, "--report", self.rep, "--", "sh", "-c", script)

    def denied(self):
        import json
        with open(self.rep) as f:
            return json.load(f)["network"]["denied"]

    def test_method_and_path_allow_and_deny(self):
        a = self.server()
        u = "https://127.0.0.1:%d" % a.port
        r = self.box(["GET,HEAD:127.0.0.1:%d/repos/acme/*" % a.port], "; ".join([
            CURL + u + "/repos/acme/tool/issues?x=1",
            CURL + "-d x=1 " + u + "/repos/acme/tool",
            CURL + u + "/repos/other/tool",
            CURL + "--path-as-is " + u + "/repos/acme/../other/x",
            CURL + "--path-as-is " + u + "/repos/acme/%2e%2e/other/x",
            CURL + u + "/repos/acme%2Fx",
        ]))
        self.assertEqual(r.returncode, 0, r)
        codes = [line.rsplit(" ", 1)[-1] for line in r.stdout.splitlines() if line[-3:].isdigit()]
        self.assertEqual(codes, ["200", "403", "403", "403", "403", "403"], r.stdout)
        self.assertEqual([s["line"] for s in a.seen],
                         ["GET /repos/acme/tool/issues?x=1 HTTP/1.1"])
        self.assertIn("agentbox: no --net allow rule for the host allows the method and path "
                      "(POST /repos/acme/tool)", r.stdout)
        self.assertNotIn("ok", r.stdout.split("\n", 1)[1])
        # one entry per host and port, as for other denials: the first
        # request's reason and the count
        self.assertEqual(self.denied(), [{
            "host": "127.0.0.1", "port": a.port, "count": 5,
            "reason": "no --net allow rule for the host allows the method and path "
                      "(POST /repos/acme/tool)"}])
        for bad in ("GET /repos/other/tool", "GET /repos/acme/../other/x",
                    "GET /repos/acme/%2e%2e/other/x"):
            self.assertIn("allows the method and path (%s)\n 403" % bad, r.stdout)
        self.assertIn("encoded '/', '\\', '%', '?', '#' or NUL (GET /repos/acme%2Fx)\n 403", r.stdout)

    def test_keep_alive_is_checked_per_request(self):
        a = self.server()
        u = "https://127.0.0.1:%d" % a.port
        r = self.box(["GET:127.0.0.1:%d/ok" % a.port],
                     CURL + u + "/ok/1 " + u + "/no/2; " + CURL
                     + "-H 'Connection: Upgrade' -H 'Upgrade: websocket' " + u + "/ok/3")
        codes = [line.rsplit(" ", 1)[-1] for line in r.stdout.splitlines() if line[-3:].isdigit()]
        self.assertEqual(codes, ["200", "403", "403"], r)
        self.assertIn("what follows an Upgrade (WebSocket) request cannot be checked", r.stdout)
        self.assertIn("* Re-using existing connection",
                      self.box(["GET:127.0.0.1:%d/ok" % a.port],
                               CURL + "-v " + u + "/ok/1 " + u + "/ok/2 2>&1").stdout)
        self.assertEqual([s["line"] for s in a.seen],
                         ["GET /ok/1 HTTP/1.1", "GET /ok/1 HTTP/1.1", "GET /ok/2 HTTP/1.1"])

    def test_plain_http_is_checked(self):
        a = self.server(tls=False)
        u = "http://127.0.0.1:%d" % a.port
        r = self.box(["GET:127.0.0.1:%d/ok" % a.port],
                     CURL + u + "/ok; " + CURL + "-X DELETE " + u + "/ok", ca=False)
        codes = [line.rsplit(" ", 1)[-1] for line in r.stdout.splitlines() if line[-3:].isdigit()]
        self.assertEqual(codes, ["200", "403"], r)
        self.assertEqual([s["line"] for s in a.seen], ["GET /ok HTTP/1.1"])
        self.assertTrue(any(d["reason"].endswith("the method and path (DELETE /ok)")
                            for d in self.denied()), self.denied())

    def test_a_host_only_rule_allows_everything_and_stays_a_tunnel(self):
        a = self.server()
        u = "https://127.0.0.1:%d" % a.port
        # host-only and method/path rules combine: everything allowed; the
        # client trusts only the test CA: it sees the upstream's own
        # certificate, so there is no termination
        shutil.copy(self.ca, os.path.join(self.ws, "test.pem"))
        for rules in (["127.0.0.1:%d" % a.port],
                      ["GET:127.0.0.1:%d/ok" % a.port, "127.0.0.1:%d" % a.port]):
            r = self.box(rules, CURL + "--cacert /workspace/test.pem -d x " + u + "/other",
                         ca=False)
            self.assertEqual(r.stdout, "ok\n 200\n", (rules, r))
        # with a rule the proxy terminates: the test CA alone does not verify
        r = self.box(["GET:127.0.0.1:%d/" % a.port],
                     CURL + "--cacert /workspace/test.pem " + u + "/x")
        self.assertNotIn("200", r.stdout, r)
        self.assertTrue(any("did not accept the sandbox's CA" in d["reason"]
                            for d in self.denied()), self.denied())
        self.assertEqual([s["line"] for s in a.seen], ["POST /other HTTP/1.1"] * 2)

    def test_a_secret_host_with_rules(self):
        # the rules decide for a secret's host, and the value goes only
        # with the requests they allow
        a = self.server()
        u = "https://127.0.0.1:%d" % a.port
        hdr = "-H \"Authorization: Bearer $TOKEN\" "
        r = subprocess.run(
            [BIN, "run", "--workspace", self.ws, *THROUGH, "--net",
             "secret=TOKEN@127.0.0.1:%d" % a.port, "--net",
             "allow=POST:127.0.0.1:%d/v1/chat" % a.port, "--net", "ca=" + self.ca, "--",
             "sh", "-c", CURL + hdr + "-d x " + u + "/v1/chat; " + CURL + hdr + u + "/v1/chat"],
            capture_output=True, text=True, timeout=120, env=dict(os.environ, TOKEN=VALUE))
        if r.returncode == 125 and not MUST_WORK and "cannot" in r.stderr:
            self.skipTest("agentbox cannot run here: " + r.stderr)
        codes = [line.rsplit(" ", 1)[-1] for line in r.stdout.splitlines() if line[-3:].isdigit()]
        self.assertEqual(codes, ["200", "403"], r)
        self.assertEqual([(s["line"], s["auth"]) for s in a.seen],
                         [("POST /v1/chat HTTP/1.1", "Bearer " + VALUE)])

    def test_http2_clients_fall_back(self):
        if "HTTP2" not in subprocess.run(["curl", "-V"], capture_output=True,
                                         text=True).stdout:
            self.skipTest("curl has no HTTP/2")
        a = self.server()
        r = self.box(["GET:127.0.0.1:%d/ok" % a.port],
                     CURL + "--http2 https://127.0.0.1:%d/ok" % a.port)
        self.assertEqual(r.stdout, "ok\n 200\n", r)
        self.assertEqual([s["line"] for s in a.seen], ["GET /ok HTTP/1.1"])

    def test_a_session_through_the_python_client(self):
        try:
            from agentbox import Sandbox
        except ImportError:
            self.skipTest("the Python client is not on PYTHONPATH")
        a = self.server()
        u = "https://127.0.0.1:%d" % a.port
        try:
            sb = Sandbox(self.ws, binary=BIN, writable_dirs=(), net_ca=self.ca,
                         network="allow=GET,HEAD:127.0.0.1:%d/ok" % a.port)
        except Exception as e:  # noqa: BLE001
            if MUST_WORK:
                raise
            self.skipTest("agentbox cannot run here: %s" % e)
        with sb:
            env = {"no_proxy": "", "NO_PROXY": ""}
            self.assertEqual(sb.run(CURL + u + "/ok", env=env).stdout, "ok\n 200\n")
            out = sb.run(CURL + "-X PUT " + u + "/ok", env=env).stdout
            self.assertTrue(out.endswith(" 403\n"), out)
        self.assertEqual([s["line"] for s in a.seen], ["GET /ok HTTP/1.1"])

    def test_bad_rules_are_refused(self):
        for arg, what in (("allow=FETCH:x.org/a", "'FETCH:x.org/a': unknown method"),
                          ("allow=GET,:x.org", "empty method"),
                          ("allow=GET", "'GET': methods without a host"),
                          ("allow=GET:x.org/a/../b", "'.' or '..' segments"),
                          ("allow=x.org/a?b", "without a query"),
                          ("allow=https://registry.npmjs.org", "a URL: give a host"),
                          ("allow=GET:/a", "no host"),
                          ("allow=GET:*x.org/a", "is not a host name"),
                          ("deny=GET:x.org", "methods and paths are for allow= only"),
                          ("secret=T@x.org/a", "methods and paths are for allow= only")):
            r = self.run_box("--net", arg, "--", "true")
            self.assertEqual(r.returncode, 125, arg)
            self.assertIn(what, r.stderr, arg)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


if __name__ == "__main__":
    unittest.main()
