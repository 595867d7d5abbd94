"""agentbox runtime's locks (docs/kubernetes.md, Security): every route of
each kind (main.py's, sandboxd's /v1, agentbox's /agentbox/v1) answers 401
and does nothing without the token or with a wrong one; a foreign Host
(DNS rebinding) and an Origin are refused, as is a JSON route's body sent
as text/plain; the token file it makes is 0600, named on stderr and gone
at the end; --token-file, --no-auth and their refusals; and one client
(a local uid) cannot hold every connection. The gRPC side:
tests/runtime/grpc."""

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtlib import BIN, Runtime, free_port, multipart, wait_for  # noqa: E402

CLIENT_CONNS = 32  # rt_auth.h's RT_CLIENT_CONNS

# one request of each kind of route: (method, path, body, content type)
ROUTES = [
    ("GET", "/", None, None),
    ("POST", "/execute", b'{"command": "touch planted"}', "application/json"),
    ("POST", "/upload", None, "multipart"),
    ("GET", "/download/a.txt", None, None),
    ("GET", "/list/.", None, None),
    ("GET", "/exists/a.txt", None, None),
    ("GET", "/v1/health", None, None),
    ("GET", "/v1/metadata", None, None),
    ("GET", "/v1/files/a.txt", None, None),
    ("HEAD", "/v1/files/a.txt", None, None),
    ("PUT", "/v1/files/.git/hooks/post-checkout?mode=0755", b"#!/bin/sh\n",
     "application/octet-stream"),
    ("DELETE", "/v1/files/%2Fworkspace?recursive=true", None, None),
    ("GET", "/agentbox/v1/changes", None, None),
    ("POST", "/agentbox/v1/net", b'{"allow": ["*:*"]}', "application/json"),
    ("POST", "/agentbox/v1/commit", b"{}", "application/json"),
    ("POST", "/agentbox/v1/discard", b"{}", "application/json"),
    ("GET", "/nope", None, None),
]


class Locked(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = Runtime("--host", "runtime.example", "--allow-origin", "https://ok.example",
                         "--http-timeout", "5")
        with open(os.path.join(cls.rt.ws, "a.txt"), "w") as f:
            f.write("kept\n")

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()

    def send(self, method, path, body, ctype, headers):
        h = dict(headers)
        if ctype == "multipart":
            body, ctype = multipart("up.txt", b"uploaded\n")
        if ctype:
            h["Content-Type"] = ctype
        return self.rt.request(method, path, body, h, auth=False)

    def assert_untouched(self):
        ws = self.rt.ws
        self.assertEqual(sorted(os.listdir(ws)), ["a.txt"])
        with open(os.path.join(ws, "a.txt")) as f:
            self.assertEqual(f.read(), "kept\n")

    def test_no_token_or_a_wrong_one_is_401_on_every_route_and_does_nothing(self):
        for auth in ({}, {"Authorization": "Bearer " + "0" * 64},
                     {"Authorization": "Bearer " + self.rt.token + "x"},
                     {"Authorization": "Bearer " + self.rt.token[:-1]},
                     {"Authorization": "Basic " + self.rt.token},
                     {"Authorization": self.rt.token}):
            for method, path, body, ctype in ROUTES:
                with self.subTest(auth=auth, method=method, path=path):
                    st, h, got = self.send(method, path, body, ctype, auth)
                    self.assertEqual(st, 401, got)
                    self.assertEqual(h["WWW-Authenticate"], "Bearer")
                    if method != "HEAD":
                        msg = json.loads(got)
                        if path.startswith(("/v1/", "/agentbox/")):  # sandboxd's shape
                            self.assertEqual(msg["code"], "UNAUTHENTICATED")
                        self.assertIn("token", msg["message"])
        self.assert_untouched()

    def test_the_token_works_on_each_kind_of_route(self):
        tok = {"Authorization": "Bearer " + self.rt.token}
        self.assertEqual(self.send("GET", "/", None, None, tok)[0], 200)
        self.assertEqual(self.send("GET", "/v1/health", None, None, tok)[0], 200)
        self.assertEqual(self.send("GET", "/exists/a.txt", None, None, tok)[0], 200)
        st, _, got = self.send("POST", "/execute", b'{"command": "cat a.txt"}',
                               "application/json; charset=utf-8", tok)
        self.assertEqual((st, json.loads(got)["stdout"]), (200, "kept\n"))
        # agentbox's own route: there, answered (409: no --net allow= given)
        self.assertEqual(self.send("GET", "/agentbox/v1/net", None, None, tok)[0], 409)
        # the scheme is caseless (RFC 6750)
        self.assertEqual(self.send("GET", "/", None, None,
                                   {"Authorization": "bearer " + self.rt.token})[0], 200)

    def test_a_foreign_host_is_refused(self):
        tok = {"Authorization": "Bearer " + self.rt.token}
        for host in ("attacker.example", "attacker.example:%d" % self.rt.port,
                     "localhost.attacker.example", "127.0.0.1.attacker.example", "[::2]"):
            with self.subTest(host=host):
                st, _, got = self.send("POST", "/execute", b'{"command": "touch planted"}',
                                       "application/json", dict(tok, Host=host))
                self.assertEqual(st, 421, got)
                self.assertIn("--host", json.loads(got)["message"])
        for host in ("127.0.0.1:%d" % self.rt.port, "localhost:1234", "LOCALHOST.",
                     "runtime.example", "runtime.example:80", "[::1]:5"):
            with self.subTest(host=host):
                self.assertEqual(self.send("GET", "/", None, None, dict(tok, Host=host))[0], 200)
        self.assert_untouched()

    def test_an_origin_is_refused_unless_allowed(self):
        tok = {"Authorization": "Bearer " + self.rt.token}
        for origin in ("https://attacker.example", "null", "https://ok.example:444"):
            with self.subTest(origin=origin):
                st, _, got = self.send("POST", "/execute", b'{"command": "touch planted"}',
                                       "application/json", dict(tok, Origin=origin))
                self.assertEqual(st, 403, got)
                self.assertIn("origin", json.loads(got)["message"])
        self.assertEqual(self.send("GET", "/", None, None,
                                   dict(tok, Origin="https://ok.example"))[0], 200)
        self.assert_untouched()

    def test_a_json_route_refuses_another_content_type(self):
        tok = {"Authorization": "Bearer " + self.rt.token}
        for path, body in (("/execute", b'{"command": "touch planted"}'),
                           ("/agentbox/v1/net", b'{"allow": ["*:*"]}'),
                           ("/agentbox/v1/discard", b"{}")):
            for ctype in ("text/plain", "application/x-www-form-urlencoded",
                          "multipart/form-data; boundary=x", "application/jsonx"):
                with self.subTest(path=path, ctype=ctype):
                    st, _, got = self.send("POST", path, body, ctype, tok)
                    self.assertEqual(st, 415, got)
        self.assert_untouched()

    def test_one_client_cannot_hold_every_connection(self):
        held = []
        try:
            for _ in range(CLIENT_CONNS):
                held.append(socket.create_connection(("127.0.0.1", self.rt.port)))
            time.sleep(0.3)  # each counted
            extra = socket.create_connection(("127.0.0.1", self.rt.port))
            with extra:
                extra.settimeout(5)
                try:
                    self.assertEqual(extra.recv(1), b"")  # closed at once
                except ConnectionResetError:
                    pass
            if os.geteuid() == 0:  # another local user is still served
                code = ("import sys, urllib.request as u\n"
                        "r = u.Request(sys.argv[1], headers={'Authorization': 'Bearer ' + "
                        "sys.stdin.read()})\n"
                        "print(u.urlopen(r, timeout=10).status)\n")
                py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
                p = subprocess.run([py, "-c", code, self.rt.url + "/"], user=65534,
                                   group=65534, extra_groups=[], input=self.rt.token,
                                   capture_output=True, text=True, timeout=30, cwd="/")
                self.assertEqual(p.stdout.strip(), "200", p.stderr)
        finally:
            for s in held:
                s.close()
        # its connections back (once the server saw them close): served again
        def served():
            try:
                return self.rt.request("GET", "/", timeout=5)[0] == 200
            except OSError:
                return False

        self.assertTrue(wait_for(served))

    def test_a_head_that_never_ends_loses_its_connection(self):
        s = socket.create_connection(("127.0.0.1", self.rt.port))
        with s:
            t = time.monotonic()
            s.settimeout(30)
            for _ in range(12):  # a byte a second: never idle, never done
                try:
                    s.sendall(b"X")
                except OSError:
                    break
                time.sleep(1)
            try:
                while s.recv(4096):
                    pass
            except (ConnectionResetError, socket.timeout):
                pass
            self.assertLess(time.monotonic() - t, 12)  # --http-timeout 5: closed by ~5 s


class TokenFile(unittest.TestCase):
    def run_rt(self, *args, timeout=30):
        ws = tempfile.mkdtemp(prefix="agentbox-rt-")
        try:
            return subprocess.run([BIN, "runtime", "--workspace", ws, *args],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
        finally:
            os.rmdir(ws)

    def test_the_token_file_is_0600_named_on_stderr_and_removed_at_the_end(self):
        rt = Runtime()
        try:
            path = rt.token_file
            self.assertTrue(path, rt.err)
            st = os.lstat(path)
            self.assertTrue(stat.S_ISREG(st.st_mode))
            self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, os.geteuid()))
            self.assertRegex(rt.token, r"^[0-9a-f]{64}$")  # 256 bits
            d = os.stat(os.path.dirname(path))
            self.assertEqual((stat.S_IMODE(d.st_mode) & 0o077, d.st_uid), (0, os.geteuid()))
            self.assertEqual(rt.stop(), 0)
            self.assertFalse(os.path.exists(path))
        finally:
            rt.close()

    def test_two_runtimes_have_two_tokens(self):
        a, b = Runtime(), Runtime()
        try:
            self.assertNotEqual(a.token, b.token)
            self.assertEqual(a.request("GET", "/", headers={"Authorization": "Bearer " + b.token})[0],
                             401)
        finally:
            a.close()
            b.close()

    def test_token_file_as_a_secret_mounts_it(self):
        d = tempfile.mkdtemp(prefix="agentbox-secret-")
        self.addCleanup(shutil.rmtree, d)
        os.mkdir(os.path.join(d, "..data"))
        with open(os.path.join(d, "..data", "token"), "w") as f:
            f.write("s3cret-Token_value.1\n")  # kubectl create secret --from-file: a newline
        os.symlink("..data/token", os.path.join(d, "token"))  # as the kubelet lays it out
        rt = Runtime("--token-file", os.path.join(d, "token"))
        try:
            self.assertIsNone(rt.token_file)  # none made
            self.assertEqual(rt.token, "s3cret-Token_value.1")
            self.assertEqual(rt.request("GET", "/")[0], 200)
            self.assertEqual(rt.request("GET", "/", auth=False)[0], 401)
        finally:
            rt.close()

    def test_bad_token_files_and_options_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            empty, spaced = os.path.join(d, "empty"), os.path.join(d, "spaced")
            open(empty, "w").close()
            with open(spaced, "w") as f:
                f.write("two words\n")
            for args, says in ((["--token-file", os.path.join(d, "missing")], "--token-file"),
                               (["--token-file", empty], "1 to 4096 bytes"),
                               (["--token-file", spaced], "printable"),
                               (["--token-file", d], "not a regular file"),
                               (["--no-auth", "--listen", "0.0.0.0"], "--no-auth-on-network"),
                               (["--no-auth", "--token-file", empty], "contradict"),
                               (["--no-auth-on-network"], "needs --no-auth"),
                               (["--host", "a.example:80"], "without a port"),
                               (["--host"], "needs a value")):
                with self.subTest(args=args):
                    p = self.run_rt("--http-port", str(free_port()), *args)
                    self.assertEqual(p.returncode, 125, p.stderr)
                    self.assertIn(says, p.stderr)

    def test_no_auth_warns_and_asks_nothing(self):
        rt = Runtime("--no-auth")
        try:
            self.assertIsNone(rt.token)
            self.assertIn("WARNING: --no-auth", "".join(rt.err))
            self.assertEqual(rt.request("GET", "/")[0], 200)
            # the other locks hold
            self.assertEqual(rt.request("GET", "/", headers={"Host": "attacker.example"})[0], 421)
            self.assertEqual(rt.request("GET", "/", headers={"Origin": "http://a.example"})[0],
                             403)
        finally:
            rt.close()


if __name__ == "__main__":
    unittest.main()
