"""agentbox runtime against agent-sandbox's legacy runtime contract (its
examples/python-runtime-sandbox/main.py at 2fd412d): every route, status
and error shape, path escapes, connections that never finish, SIGTERM, and
health once the sandbox is gone. Over urllib and raw sockets; as root and
as an unprivileged user."""

import json
import os
import signal
import socket
import sys
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtlib import Runtime, descendants, multipart, wait_for  # noqa: E402


def q(path):
    """The SDK's quoting: quote(path, safe='')."""
    return urllib.parse.quote(path, safe="")


class Routes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = Runtime("--http-timeout", "2", env=dict(os.environ,
                                                         SANDBOX_EXEC_TIMEOUT_SECONDS="0.5"))

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()

    def execute(self, command):
        st, h, body = self.rt.request("POST", "/execute", json.dumps({"command": command}).encode(),
                                      {"Content-Type": "application/json"})
        self.assertEqual(st, 200, body)
        self.assertEqual(h["Content-Type"], "application/json")
        return json.loads(body)

    def upload(self, name, data):
        body, ctype = multipart(name, data)
        return self.rt.request("POST", "/upload", body, {"Content-Type": ctype})

    def test_health(self):
        st, h, body = self.rt.request("GET", "/")
        self.assertEqual((st, body), (200, b'{"status":"ok","message":"Sandbox Runtime is active."}'))

    def test_execute_splits_as_shlex_without_a_shell(self):
        st, _, body = self.rt.request("POST", "/execute",
                                      b'{"command":"echo \'hello world\' \\"$HOME\\" a\\\\ b"}')
        self.assertEqual(body, b'{"stdout":"hello world $HOME a b\\n","stderr":"","exit_code":0}')
        r = self.execute("sh -c 'echo out; echo err >&2; exit 3'")
        self.assertEqual(r, {"stdout": "out\n", "stderr": "err\n", "exit_code": 3})

    def test_execute_runs_in_the_workspace(self):
        self.assertEqual(self.execute("pwd")["stdout"], "/workspace\n")

    def test_execute_failures_are_200_with_exit_code_1(self):
        cases = {
            "no-such-program-x a": "[Errno 2] No such file or directory: 'no-such-program-x'",
            "echo 'unterminated": "No closing quotation",
            "echo \\": "No escaped character",
            "": "list index out of range",
            "sleep 5": "Command '['sleep', '5']' timed out after 0.5 seconds",
        }
        for command, why in cases.items():
            with self.subTest(command=command):
                self.assertEqual(self.execute(command), {
                    "stdout": "", "stderr": "Failed to execute command: " + why, "exit_code": 1})

    def test_execute_killed_by_a_signal_is_negative(self):
        self.assertEqual(self.execute("sh -c 'kill -9 $$'")["exit_code"], -9)

    def test_execute_bad_bodies_are_fastapi_422(self):
        cases = [
            (b'{"comand":"ls"}', {"detail": [{"type": "missing", "loc": ["body", "command"],
                                              "msg": "Field required",
                                              "input": {"comand": "ls"}}]}),
            (b'{"command":5}', {"detail": [{"type": "string_type", "loc": ["body", "command"],
                                            "msg": "Input should be a valid string",
                                            "input": 5}]}),
            (b'[1]', {"detail": [{"type": "model_attributes_type", "loc": ["body"],
                                  "msg": "Input should be a valid dictionary or object to "
                                         "extract fields from", "input": [1]}]}),
            (b'', {"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required",
                               "input": None}]}),
        ]
        for body, want in cases:
            with self.subTest(body=body):
                st, _, got = self.rt.request("POST", "/execute", body)
                self.assertEqual(st, 422)
                self.assertEqual(json.loads(got), want)
        st, _, got = self.rt.request("POST", "/execute", b'{"command":')
        self.assertEqual(st, 422)
        d = json.loads(got)["detail"][0]
        self.assertEqual((d["type"], d["msg"], d["loc"][0]), ("json_invalid", "JSON decode error", "body"))

    def test_execute_body_bound_is_413(self):
        big = json.dumps({"command": "true " + "x" * (1 << 20)}).encode()
        st, _, body = self.rt.request("POST", "/execute", big)
        self.assertEqual(st, 413)
        self.assertIn("at most 1048576 bytes", json.loads(body)["message"])

    def test_unknown_routes_and_methods(self):
        self.assertEqual(self.rt.request("GET", "/nope")[::2], (404, b'{"detail":"Not Found"}'))
        st, h, body = self.rt.request("GET", "/execute")
        self.assertEqual((st, body, h["Allow"]), (405, b'{"detail":"Method Not Allowed"}', "POST"))
        self.assertEqual(self.rt.request("POST", "/list/x")[0], 405)

    def test_upload_download_list_exists(self):
        st, _, body = self.upload("data/in.csv", b"a,b\n1,2\n")
        self.assertEqual((st, body), (200, b'{"message":"File \'data/in.csv\' uploaded successfully."}'))
        with open(os.path.join(self.rt.ws, "data", "in.csv"), "rb") as f:
            self.assertEqual(f.read(), b"a,b\n1,2\n")
        st, h, body = self.rt.request("GET", "/download/" + q("data/in.csv"))
        self.assertEqual((st, body), (200, b"a,b\n1,2\n"))
        self.assertEqual(h["Content-Type"], "application/octet-stream")
        self.assertEqual(h["Content-Disposition"], 'attachment; filename="data/in.csv"')
        st, _, body = self.rt.request("GET", "/list/data")
        entries = json.loads(body)
        self.assertEqual(st, 200)
        self.assertEqual([(e["name"], e["size"], e["type"]) for e in entries], [("in.csv", 8, "file")])
        self.assertAlmostEqual(entries[0]["mod_time"],
                               os.stat(os.path.join(self.rt.ws, "data", "in.csv")).st_mtime, delta=0.01)
        names = {e["name"]: e["type"] for e in json.loads(self.rt.request("GET", "/list/")[2])}
        self.assertEqual(names.get("data"), "directory")
        self.assertEqual(json.loads(self.rt.request("GET", "/exists/" + q("data/in.csv"))[2]),
                         {"path": "data/in.csv", "exists": True})
        self.assertEqual(json.loads(self.rt.request("GET", "/exists/.")[2]), {"path": ".", "exists": True})
        self.assertEqual(json.loads(self.rt.request("GET", "/exists/" + q("no such"))[2]),
                         {"path": "no such", "exists": False})
        # a name that needs quoting, decoded twice as main.py decodes it
        self.assertEqual(self.upload("sp ace%.txt", b"x")[0], 200)
        self.assertEqual(self.rt.request("GET", "/download/" + q(q("sp ace%.txt")))[::2], (200, b"x"))

    def test_not_found_shapes(self):
        nf = b'{"message":"File not found"}'
        nd = b'{"message":"Path is not a directory"}'
        self.upload("f.txt", b"x")
        os.makedirs(os.path.join(self.rt.ws, "adir"), exist_ok=True)
        self.assertEqual(self.rt.request("GET", "/download/missing")[::2], (404, nf))
        self.assertEqual(self.rt.request("GET", "/download/adir")[::2], (404, nf))
        self.assertEqual(self.rt.request("GET", "/list/missing")[::2], (404, nd))
        self.assertEqual(self.rt.request("GET", "/list/f.txt")[::2], (404, nd))

    def test_upload_errors(self):
        body, ctype = multipart("x.txt", b"x", field="other")
        st, _, got = self.rt.request("POST", "/upload", body, {"Content-Type": ctype})
        self.assertEqual(st, 422)
        self.assertEqual(json.loads(got)["detail"][0]["loc"], ["body", "file"])
        os.makedirs(os.path.join(self.rt.ws, "isdir"), exist_ok=True)
        st, _, got = self.upload("isdir", b"x")
        self.assertEqual(st, 500)
        self.assertTrue(json.loads(got)["message"].startswith("File upload failed: "), got)
        st, _, got = self.upload("big.bin", b"\0" * ((32 << 20) + 1))
        self.assertEqual(st, 413)
        self.assertIn("at most 33554432 bytes", json.loads(got)["message"])
        self.assertFalse(os.path.exists(os.path.join(self.rt.ws, "big.bin")))

    def test_files_move_in_chunks_up_to_the_bound(self):
        data = os.urandom(9 << 20)  # three chunks of the session's file operations
        self.assertEqual(self.upload("nine.bin", data)[0], 200)
        with open(os.path.join(self.rt.ws, "nine.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        st, _, got = self.rt.request("GET", "/download/nine.bin")
        self.assertEqual((st, got == data), (200, True))
        self.assertEqual(self.upload("empty", b"")[0], 200)
        self.assertEqual(self.rt.request("GET", "/download/empty")[::2], (200, b""))
        with open(os.path.join(self.rt.ws, "huge.bin"), "wb") as f:
            f.truncate((32 << 20) + 1)
        st, _, got = self.rt.request("GET", "/download/huge.bin")
        self.assertEqual(st, 413)
        self.assertIn("at most 32 MiB", json.loads(got)["message"])

    def test_escapes_are_403(self):
        denied = (403, b'{"message":"Access denied"}')
        for path in ["..%2F..%2Fetc%2Fpasswd", q("../../etc/passwd"), "%2e%2e%2fetc",
                     q("%2e%2e/etc"), "%252e%252e%252fetc%252fpasswd", q("/../etc/passwd"),
                     q("a/../../etc"), "..", q(q("../etc"))]:
            for route in ("download", "list", "exists"):
                with self.subTest(route=route, path=path):
                    self.assertEqual(self.rt.request("GET", "/%s/%s" % (route, path))[::2], denied)
        for name in ["../../unsafe.txt", "/../x", "a/../../x"]:
            with self.subTest(upload=name):
                self.assertEqual(self.upload(name, b"x")[::2], denied)
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(self.rt.ws), "unsafe.txt")))

    def test_nul_bytes_and_overlong_paths_as_main_py(self):
        denied = (403, b'{"message":"Access denied"}')
        for path in ["a%00b", "a%2500b"]:  # realpath's ValueError: 403
            for route in ("download", "list", "exists"):
                with self.subTest(route=route, path=path):
                    self.assertEqual(self.rt.request("GET", "/%s/%s" % (route, path))[::2], denied)
        long = "a/" * 3000  # past PATH_MAX: realpath gives up, nothing is there
        self.assertEqual(self.rt.request("GET", "/download/" + q(long))[::2],
                         (404, b'{"message":"File not found"}'))
        self.assertEqual(self.rt.request("GET", "/list/" + q(long))[::2],
                         (404, b'{"message":"Path is not a directory"}'))
        self.assertEqual(json.loads(self.rt.request("GET", "/exists/" + q(long))[2]),
                         {"path": long, "exists": False})

    def test_absolute_paths_are_rerooted(self):
        # main.py strips leading slashes: /etc/passwd is WORKSPACE/etc/passwd
        self.assertEqual(json.loads(self.rt.request("GET", "/exists/" + q("/etc/passwd"))[2]),
                         {"path": "/etc/passwd", "exists": False})
        self.assertEqual(self.rt.request("GET", "/download/" + q("/etc/passwd"))[0], 404)

    def test_symlink_planted_by_a_command_is_403(self):
        self.assertEqual(self.execute("ln -sfn /etc esc")["exit_code"], 0)
        self.assertEqual(self.execute("ln -sfn /workspace/f2.txt inside")["exit_code"], 0)
        self.assertEqual(self.execute("ln -sfn ../../etc/passwd up")["exit_code"], 0)
        denied = (403, b'{"message":"Access denied"}')
        for path in ["esc/passwd", "esc", "up"]:
            for route in ("download", "list", "exists"):
                with self.subTest(route=route, path=path):
                    self.assertEqual(self.rt.request("GET", "/%s/%s" % (route, q(path)))[::2], denied)
        self.assertEqual(self.upload("esc/planted", b"x")[::2], denied)
        self.assertFalse(os.path.exists("/etc/planted"))
        # a symlink that stays inside is followed, as realpath follows it
        self.upload("f2.txt", b"two")
        self.assertEqual(self.rt.request("GET", "/download/inside")[::2], (200, b"two"))


class Connections(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime("--http-timeout", "1")
        self.addCleanup(self.rt.close)

    def assert_closed_within(self, sock, seconds):
        sock.settimeout(seconds)
        t = time.monotonic()
        try:
            data = sock.recv(4096)
        except ConnectionResetError:
            data = b""
        self.assertEqual(data, b"")
        self.assertLess(time.monotonic() - t, seconds)

    def test_half_requests_are_closed_and_others_served(self):
        half_head = socket.create_connection(("127.0.0.1", self.rt.port))
        half_head.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + self.rt.auth_header())
        half_body = socket.create_connection(("127.0.0.1", self.rt.port))
        half_body.sendall(b"POST /execute HTTP/1.1\r\nHost: 127.0.0.1\r\n" + self.rt.auth_header() +
                          b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"co")
        silent = socket.create_connection(("127.0.0.1", self.rt.port))
        t = time.monotonic()
        self.assertEqual(self.rt.request("GET", "/", timeout=5)[0], 200)
        self.assertLess(time.monotonic() - t, 1)
        for s in (half_head, half_body, silent):
            with s:
                self.assert_closed_within(s, 5)

    def test_bodies_past_the_bound_are_not_read(self):
        # announced: answered before the body (which never comes)
        s = socket.create_connection(("127.0.0.1", self.rt.port))
        with s:
            s.sendall(b"POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\n" + self.rt.auth_header() +
                      b"Content-Type: multipart/form-data; "
                      b"boundary=b\r\nContent-Length: 10000000000\r\n\r\n--b\r\n")
            s.settimeout(5)
            self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 413"))
        # chunked, no length: cut off at the bound, not read to its end
        s = socket.create_connection(("127.0.0.1", self.rt.port))
        with s:
            s.sendall(b"POST /execute HTTP/1.1\r\nHost: 127.0.0.1\r\n" + self.rt.auth_header() +
                      b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
            got = b""
            s.settimeout(5)
            try:
                for _ in range(64):  # 4 MiB offered, 1 MiB allowed
                    s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                got = s.recv(4096)
            except (ConnectionResetError, socket.timeout):
                pass
            self.assertTrue(got in (b"",) or got.startswith(b"HTTP/1.1 413"), got[:100])
        self.assertEqual(self.rt.request("GET", "/")[0], 200)

    def test_requests_past_max_concurrent_wait_their_turn(self):
        rt = Runtime("--max-concurrent", "2")
        self.addCleanup(rt.close)
        out = {}

        def one(i):
            out[i] = rt.request("POST", "/execute",
                                json.dumps({"command": "sh -c 'sleep 0.3; echo %d'" % i}).encode())

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        t = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        self.assertGreaterEqual(time.monotonic() - t, 0.85)  # three turns of two
        for i in range(6):
            self.assertEqual(out[i][0], 200)
            self.assertEqual(json.loads(out[i][2]), {"stdout": "%d\n" % i, "stderr": "", "exit_code": 0})

    def test_slow_client_is_bounded(self):
        s = socket.create_connection(("127.0.0.1", self.rt.port))
        with s:
            s.sendall(b"GET / HTTP/1.1\r\n")
            time.sleep(0.5)
            s.sendall(b"Host: 127.0.0.1\r\n")
            self.assert_closed_within(s, 5)

    def test_sigterm_drains_and_exits_0(self):
        out = {}

        def slow():
            out["r"] = self.rt.request("POST", "/execute", b'{"command":"sh -c \'sleep 1; echo done\'"}')

        th = threading.Thread(target=slow)
        th.start()
        def sleeping():
            for p in descendants(self.rt.p.pid):
                try:
                    with open("/proc/%d/cmdline" % p, "rb") as f:
                        if f.read().startswith(b"sleep"):
                            return True
                except OSError:
                    pass
            return False

        self.assertTrue(wait_for(sleeping))
        self.rt.p.send_signal(signal.SIGTERM)
        th.join(10)
        self.assertEqual(out["r"][0], 200)
        self.assertEqual(json.loads(out["r"][2])["stdout"], "done\n")
        self.assertEqual(self.rt.p.wait(10), 0)
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", self.rt.port), timeout=2)
        self.assertEqual(descendants(self.rt.p.pid), [])

    def test_health_is_503_once_the_sandbox_is_gone(self):
        for pid in descendants(self.rt.p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.assertTrue(wait_for(lambda: self.rt.request("GET", "/")[0] == 503), self.rt.err)
        st, _, body = self.rt.request("GET", "/")
        self.assertEqual(json.loads(body)["status"], "error")
        st, _, body = self.rt.request("POST", "/execute", b'{"command":"true"}')
        self.assertEqual(st, 200)
        self.assertTrue(json.loads(body)["stderr"].startswith("Failed to execute command: "))
        self.assertEqual(self.rt.request("GET", "/list/")[0], 503)
        self.assertEqual(self.rt.stop(), 0)


class Options(unittest.TestCase):
    def test_listens_on_loopback_by_default(self):
        rt = Runtime()
        self.addCleanup(rt.close)
        self.assertIn("listening on http://127.0.0.1:%d/" % rt.port, "".join(rt.err))

    def test_bad_options_are_125(self):
        import subprocess
        from rtlib import BIN
        for args in (["--http-port", "0"], ["--http-port", "x"], ["--listen", "nowhere"],
                     ["--http-timeout"], ["--audit-log", "/tmp/x"]):
            with self.subTest(args=args):
                p = subprocess.run([BIN, "runtime", *args], capture_output=True, timeout=30)
                self.assertEqual(p.returncode, 125, p.stderr)
                self.assertTrue(p.stderr.startswith(b"agentbox: "), p.stderr)
        p = subprocess.run([BIN, "runtime", "--help"], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertIn(b"--http-port", p.stdout)


if __name__ == "__main__":
    unittest.main()
