"""--net secret=NAME@PATTERN and --net ca=FILE (docs/network.md): the
proxy terminates TLS for the listed hosts with a per-sandbox CA and puts
the real value where the sandbox's placeholder is. HTTPS servers on the
host's 127.0.0.1 with a test CA made here (openssl) record what reaches
them. Runs as root and as an unprivileged user; AGENTBOX_BIN names the
binary."""

import base64
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import unittest
import unittest.mock
import http.server

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "protocol"))
from test_fileops import BIN, make_dir  # noqa: E402

MUST_WORK = os.environ.get("AGENTBOX_MUST_WORK") == "1"
VALUE = "real-Secret-7f3a9c-value"
PLACEHOLDER = re.compile(r"agentbox-secret-[0-9a-f]{32}")
THROUGH = ["--env", "no_proxy=", "--env", "NO_PROXY="]
CURL = "curl -sS -m 20 "


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj",
            "/CN=agentbox test " + name, "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign", cwd=d)
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + "-srv.key", "-out", name + ".csr", "-subj", "/CN=127.0.0.1",
            cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", name + ".pem", "-CAkey",
            name + ".key", "-CAcreateserial", "-out", name + "-srv.pem", "-days", "2",
            "-extfile", "ext.cnf", cwd=d)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding") == "chunked":
            out = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if not n:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    return out
                out += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self):
        body = self._body()
        self.server.seen.append({"line": self.requestline, "auth": self.headers.get("Authorization"),
                                 "body": body.decode(errors="replace"),
                                 "peer": self.client_address[1]})
        out = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_POST = do_GET


class Server:
    def __init__(self, d=None, name=None):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.seen = []
        if name:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(d, name + "-srv.pem"),
                                os.path.join(d, name + "-srv.key"))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.t = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.t.start()

    @property
    def seen(self):
        return self.httpd.seen

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.t.join()


class WithCA(unittest.TestCase):
    """A test CA (and any other names in cas) made once for the class in
    a directory of its own, removed after; a fresh workspace per test."""
    cas = ("testca",)

    @classmethod
    def setUpClass(cls):
        cls.d = make_dir()
        for name in cls.cas:
            make_ca(cls.d, name)
        cls.ca = os.path.join(cls.d, "testca.pem")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.d, True)

    def setUp(self):
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)


class Secrets(WithCA):
    cas = ("testca", "rogue")

    def setUp(self):
        super().setUp()
        self.env = dict(os.environ, TOKEN=VALUE)

    def server(self, name="testca"):
        s = Server(self.d, name)
        self.addCleanup(s.close)
        return s

    def url(self, s, path, scheme="https"):
        return "%s://127.0.0.1:%d/%s" % (scheme, s.port, path)

    def run_box(self, *args, env=None):
        r = subprocess.run([BIN, "run", "--workspace", self.ws, *THROUGH, *args],
                           capture_output=True, text=True, timeout=120,
                           env=env or self.env)
        if r.returncode == 125 and not MUST_WORK and "cannot" in r.stderr and \
                "--net" not in r.stderr:
            self.skipTest("agentbox cannot run here: " + r.stderr)
        return r

    def report(self):
        with open(os.path.join(self.ws, "report.json")) as f:
            return json.load(f)["network"]

    def test_the_value_reaches_its_host_and_no_other(self):
        a, b, plain = self.server(), Server(), Server()
        self.addCleanup(plain.close)
        self.addCleanup(b.close)
        hdr = '-H "Authorization: Bearer $TOKEN" '
        script = "; ".join([
            "echo $TOKEN",
            # two requests on one kept-alive connection, then bodies
            CURL + hdr + self.url(a, "one?t=$TOKEN") + " " + self.url(a, "two"),
            CURL + hdr + "-d body=$TOKEN " + self.url(a, "post"),
            CURL + hdr + "-H 'Transfer-Encoding: chunked' -d chunked=$TOKEN "
            + self.url(a, "chunked"),
            # basic auth from the URL's user information: base64 of the placeholder
            CURL + "https://x-access-token:$TOKEN@127.0.0.1:%d/basic" % a.port,
            # the proxy sees a placeholder only where it reads the request:
            # plain HTTP, or a host it terminates TLS for
            CURL + hdr + self.url(b, "other", "http"),
            CURL + hdr + self.url(plain, "plain", "http"),
        ])
        r = self.run_box("--net", "secret=TOKEN@127.0.0.1:%d,127.0.0.1:%d" % (a.port, plain.port),
                         "--net", "allow=127.0.0.1:%d" % b.port, "--net", "ca=" + self.ca,
                         "--report", os.path.join(self.ws, "report.json"),
                         "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r)
        ph = r.stdout.splitlines()[0]
        self.assertRegex(ph, "^" + PLACEHOLDER.pattern + "$")
        self.assertEqual(r.stdout.count("ok\n"), 7, r)
        self.assertEqual([s["auth"] for s in a.seen[:4]], ["Bearer " + VALUE] * 4)
        basic = base64.b64encode(("x-access-token:" + VALUE).encode()).decode()
        self.assertEqual(a.seen[4]["auth"], "Basic " + basic)
        self.assertEqual(a.seen[0]["line"], "GET /one?t=%s HTTP/1.1" % VALUE)
        self.assertEqual(a.seen[0]["peer"], a.seen[1]["peer"], "one connection, two requests")
        # bodies go as they are
        self.assertEqual(a.seen[2]["body"], "body=" + ph)
        self.assertEqual(a.seen[3]["body"], "chunked=" + ph)
        self.assertEqual(plain.seen[0]["auth"], "Bearer " + VALUE)
        # another host gets the worthless placeholder, and it is reported
        self.assertEqual(b.seen[0]["auth"], "Bearer " + ph)
        net = self.report()
        self.assertIn({"host": "127.0.0.1", "port": b.port, "count": 1,
                       "reason": "the placeholder of secret TOKEN went out as it is: the "
                                 "host is not listed for it"}, net["denied"])

    def test_the_value_is_nowhere_inside(self):
        a = self.server()
        env = dict(self.env, ALIAS=VALUE, HINT="x" + VALUE + "y")
        script = ("env; cat /proc/*/environ /proc/*/cmdline; grep -rs . /tmp /workspace $HOME; "
                  "cat $SSL_CERT_FILE >/dev/null && echo bundle-ok; "
                  + CURL + "-H \"Authorization: Bearer $TOKEN\" " + self.url(a, "x"))
        r = self.run_box("--pass-env", "ALIAS", "--pass-env", "HINT", "--net",
                         "secret=TOKEN@127.0.0.1:%d" % a.port, "--net", "ca=" + self.ca,
                         "--", "sh", "-c", script, env=env)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("bundle-ok", r.stdout)
        self.assertIn("ok\n", r.stdout)
        self.assertNotIn(VALUE, r.stdout + r.stderr)
        self.assertNotIn("\nALIAS=", r.stdout)
        for v in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT",
                  "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"):
            self.assertIn("\n%s=/tmp/.agentbox-ca.pem\n" % v, r.stdout)
        self.assertEqual(a.seen[0]["auth"], "Bearer " + VALUE)

    def test_an_untrusted_upstream_gets_nothing(self):
        rogue = self.server("rogue")
        r = self.run_box("--net", "secret=TOKEN@127.0.0.1:%d" % rogue.port, "--net",
                         "ca=" + self.ca, "--report", os.path.join(self.ws, "report.json"),
                         "--", "sh", "-c",
                         CURL + "-w '%{http_code}\\n' -H \"Authorization: Bearer $TOKEN\" "
                         + self.url(rogue, "x"))
        self.assertTrue(r.stdout.endswith("502\n"), r)
        self.assertIn("certificate is not trusted", r.stdout)
        self.assertIn("nothing was sent", r.stdout)
        self.assertNotIn(VALUE, r.stdout + r.stderr)
        self.assertEqual(rogue.seen, [])
        reasons = [d["reason"] for d in self.report()["denied"]]
        self.assertTrue(any("certificate is not trusted" in x for x in reasons), reasons)

    def test_a_request_for_another_site_gets_nothing(self):
        # a shared front end routes by Host (or an absolute URL): the proxy
        # sends a request only for the host it connected to and verified
        a = self.server()
        hdr = "-w '%{http_code}\\n' -H \"Authorization: Bearer $TOKEN\" "
        r = self.run_box("--net", "secret=TOKEN@127.0.0.1:%d" % a.port, "--net", "ca=" + self.ca,
                         "--report", os.path.join(self.ws, "report.json"), "--", "sh", "-c",
                         CURL + hdr + "-H 'Host: evil.example' " + self.url(a, "x") + "; "
                         + CURL + hdr + "--request-target http://evil.example/ "
                         + self.url(a, "y") + "; " + CURL + hdr + self.url(a, "z"))
        self.assertEqual(r.stdout.count("400\n"), 2, r)
        self.assertIn("the Host header names another host", r.stdout)
        self.assertIn("the request's target is not a path", r.stdout)
        self.assertEqual([s["line"] for s in a.seen], ["GET /z HTTP/1.1"])
        reasons = [d["reason"] for d in self.report()["denied"]]
        self.assertTrue(any("the Host header names another host" in x for x in reasons),
                        reasons)

    def test_a_client_that_pins_its_ca_fails_closed(self):
        a = self.server()
        r = self.run_box("--net", "secret=TOKEN@127.0.0.1:%d" % a.port, "--net", "ca=" + self.ca,
                         "--ro-bind", self.ca + ":/tmp/pinned.pem", "--",
                         "sh", "-c", CURL + "--cacert /tmp/pinned.pem " + self.url(a, "x"))
        self.assertNotEqual(r.returncode, 0, r)
        self.assertEqual(a.seen, [])
        self.assertIn("did not accept the sandbox's CA", r.stderr)

    def test_a_profile_sets_secrets(self):
        a = self.server()
        prof = os.path.join(self.ws, "p.json")
        with open(prof, "w") as f:
            json.dump({"net": ["secret=TOKEN@127.0.0.1:%d" % a.port, "ca=" + self.ca]}, f)
        r = self.run_box("--profile", prof, "--", "sh", "-c",
                         CURL + "-H \"Authorization: Bearer $TOKEN\" " + self.url(a, "x"))
        self.assertEqual(r.stdout, "ok\n", r)
        self.assertEqual(a.seen[0]["auth"], "Bearer " + VALUE)
        with open(prof, "w") as f:
            json.dump({"net": ["secret=TOKEN", 3]}, f)
        r = self.run_box("--profile", prof, "--", "true")
        self.assertEqual(r.returncode, 125, r)
        self.assertIn("expected NAME@PATTERN", r.stderr)

    def test_a_session_through_the_python_client(self):
        try:
            from agentbox import Sandbox
        except ImportError:
            self.skipTest("the Python client is not on PYTHONPATH")
        a = self.server()
        curl = CURL + "-H \"Authorization: Bearer $TOKEN\" " + self.url(a, "x")
        with unittest.mock.patch.dict(os.environ, {"TOKEN": VALUE}):
            try:
                sb = Sandbox(self.ws, binary=BIN, writable_dirs=(), net_ca=self.ca,
                             secrets={"TOKEN": ["127.0.0.1:%d" % a.port]})
            except Exception as e:  # noqa: BLE001
                if MUST_WORK:
                    raise
                self.skipTest("agentbox cannot run here: %s" % e)
        with sb:
            env = {"no_proxy": "", "NO_PROXY": ""}
            self.assertEqual(sb.run(curl, env=env).stdout, "ok\n")
            # {"op":"net"} replacing the allow patterns keeps the secret's hosts
            self.assertEqual(sb.request("net", allow=[])["type"], "net")
            self.assertEqual(sb.run(curl, env=env).stdout, "ok\n")
        self.assertEqual([s["auth"] for s in a.seen], ["Bearer " + VALUE] * 2)

    def test_bad_options_are_refused(self):
        env = {k: v for k, v in self.env.items() if k != "TOKEN"}
        r = self.run_box("--net", "secret=TOKEN@example.org", "--", "true", env=env)
        self.assertEqual(r.returncode, 125, r)
        self.assertIn("TOKEN is not set in agentbox's environment", r.stderr)
        for arg, what in (("secret=1BAD@x.org", "expected NAME@PATTERN"),
                          ("secret=TOKEN", "expected NAME@PATTERN"),
                          ("secret=TOKEN@", "no host pattern after '@'"),
                          ("secret=TOKEN@bad..name", "'bad..name' is not a host name"),
                          ("ca=", "give the file")):
            r = self.run_box("--net", arg, "--", "true")
            self.assertEqual(r.returncode, 125, arg)
            self.assertIn(what, r.stderr, arg)
        r = self.run_box("--net", "secret=TOKEN@x.org", "--net", "rate=1M", "--", "true")
        self.assertEqual(r.returncode, 125, r)
        self.assertIn("--net rate= does not bound", r.stderr)
        r = self.run_box("--net", "secret=TOKEN@x.org", "--net", "ca=/nonexistent.pem", "--",
                         "true")
        self.assertEqual(r.returncode, 125, r)
        self.assertIn("--net ca=/nonexistent.pem: cannot load", r.stderr)


if __name__ == "__main__":
    unittest.main()
