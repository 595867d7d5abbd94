"""agentbox runtime's sandboxd REST API (agent-sandbox's KEP-539.2,
packages/sandboxd/spec/filesystem/v1/filesystem.yaml at 2fd412d, and its
server/filesystem.go): /v1/files GET, HEAD, PUT, DELETE, /v1/health and
/v1/metadata, sandboxd v1.0.12's single-path stat (GET /v1/stat/, the form
docs/kubernetes.md says was assumed), their status codes and error bodies, path escapes, symlinks
planted by a command, temp files never left behind."""

import json
import os
import shlex
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtlib import Runtime, multipart  # noqa: E402


def f(path):
    """The SDK's endpoint: v1/files/ + quote(path, safe='')."""
    return "/v1/files/" + urllib.parse.quote(path, safe="")


def err(code, message):
    return (json.dumps({"code": code, "message": message}, separators=(",", ":")) + "\n").encode()


DENIED = err("PERMISSION_DENIED", "path traversal outside sandbox root is forbidden")
MISSING = err("NOT_FOUND", "path does not exist within the sandbox")


class Sandboxd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        env = dict(os.environ, SANDBOX_ZONE="eu-1", SANDBOX_ID="sb-7", OTHER_SECRET="no")
        cls.rt = Runtime(env=env)

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()

    def req(self, method, path, body=None, headers=None):
        return self.rt.request(method, path, body, headers)

    def put(self, path, data, query=""):
        return self.req("PUT", f(path) + query, data, {"Content-Type": "application/octet-stream"})

    def execute(self, command):
        st, _, body = self.req("POST", "/execute", json.dumps({"command": command}).encode())
        self.assertEqual(st, 200, body)
        return json.loads(body)

    def leftovers(self):
        found = []
        for d, _, files in os.walk(self.rt.ws):
            found += [os.path.join(d, n) for n in files if n.startswith(".agentbox-put-")]
        return found

    def test_put_get_head_list(self):
        self.assertEqual(self.put("w/sub/a.txt", b"hello\n")[::2], (204, b""))
        self.assertEqual(self.put("w/run.sh", b"#!/bin/sh\n", "?mode=0755")[0], 204)
        with open(os.path.join(self.rt.ws, "w/sub/a.txt"), "rb") as fh:
            self.assertEqual(fh.read(), b"hello\n")
        self.assertEqual(os.stat(os.path.join(self.rt.ws, "w/run.sh")).st_mode & 0o777, 0o755)
        self.assertEqual(os.stat(os.path.join(self.rt.ws, "w/sub/a.txt")).st_mode & 0o777, 0o644)
        st, h, body = self.req("GET", f("w/sub/a.txt"))
        self.assertEqual((st, h["Content-Type"], body), (200, "application/octet-stream", b"hello\n"))
        st, h, body = self.req("HEAD", f("w/sub/a.txt"))
        self.assertEqual((st, h["Content-Length"], body), (200, "6", b""))
        self.assertEqual(self.req("HEAD", f("w/nope"))[0], 404)
        st, h, body = self.req("GET", f("w"))
        self.assertEqual((st, h["Content-Type"]), (200, "application/json"))
        listing = json.loads(body)
        self.assertEqual(listing["path"], "/w")
        self.assertEqual([(e["name"], e["type"]) for e in listing["entries"]],
                         [("run.sh", "file"), ("sub", "directory")])
        self.assertEqual(listing["entries"][0]["size"], 10)
        self.assertRegex(listing["entries"][0]["modified_at"],
                         r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        # an absolute path under the root is that path; / is the root
        self.assertEqual(self.req("GET", f("/workspace/w/sub/a.txt"))[2], b"hello\n")
        self.assertEqual(json.loads(self.req("GET", "/v1/files/")[2])["path"], "/")
        self.assertEqual(self.leftovers(), [])

    def test_put_overwrites_atomically_and_in_chunks(self):
        big = os.urandom(5 << 20) + b"end"  # more than one chunk of the session
        self.assertEqual(self.put("big.bin", b"old")[0], 204)
        self.assertEqual(self.put("big.bin", big)[0], 204)
        self.assertEqual(self.req("GET", f("big.bin"))[2], big)
        self.assertEqual(self.req("HEAD", f("big.bin"))[1]["Content-Length"], str(len(big)))
        body, ctype = multipart("ignored-name", b"from a form")
        self.assertEqual(self.req("PUT", f("form.txt"), body, {"Content-Type": ctype})[0], 204)
        self.assertEqual(self.req("GET", f("form.txt"))[2], b"from a form")
        self.assertEqual(self.leftovers(), [])

    def test_put_errors(self):
        self.assertEqual(self.put("m.txt", b"x", "?mode=755")[::2],
                         (400, err("INVALID_ARGUMENT", 'mode "755" must match ^0[0-7]{3}$')))
        self.assertEqual(self.put("m.txt", b"x", "?mode=0800")[0], 400)
        os.makedirs(os.path.join(self.rt.ws, "adir"), exist_ok=True)
        self.assertEqual(self.put("adir", b"x")[::2],
                         (400, err("INVALID_ARGUMENT", "target path is a directory")))
        body = b"--b\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--b--\r\n"
        st, _, got = self.req("PUT", f("p.txt"), body,
                              {"Content-Type": "multipart/form-data; boundary=b"})
        self.assertEqual((st, json.loads(got)["code"]), (400, "INVALID_ARGUMENT"))
        # a file where a parent must be: the write fails, nothing is left
        self.assertEqual(self.put("plain", b"x")[0], 204)
        st, _, got = self.put("plain/child", b"y")
        self.assertEqual(json.loads(got)["code"], "INTERNAL", got)
        self.assertEqual(st, 500)
        self.assertEqual(self.leftovers(), [])
        self.assertFalse(os.path.exists(os.path.join(self.rt.ws, "m.txt")))

    def test_delete(self):
        self.put("d/x/y.txt", b"1")
        self.put("d/z.txt", b"2")
        self.assertEqual(self.req("DELETE", f("d/z.txt"))[::2], (204, b""))
        self.assertEqual(self.req("DELETE", f("d/z.txt"))[::2], (404, MISSING))
        self.assertEqual(self.req("DELETE", f("d"))[::2], (409, err(
            "CONFLICT", "directory is not empty; pass recursive=true to remove it")))
        self.assertEqual(self.req("DELETE", f("d") + "?recursive=maybe")[::2], (400, err(
            "INVALID_ARGUMENT", 'recursive "maybe" must be a boolean')))
        self.assertEqual(self.req("DELETE", f("d") + "?recursive=true")[0], 204)
        self.assertFalse(os.path.exists(os.path.join(self.rt.ws, "d")))

    def test_delete_of_the_root_clears_it_only_when_recursive(self):
        rt = Runtime()
        self.addCleanup(rt.close)
        for name in ("a/b", ".hidden", "..dots", "plain"):
            st, _, _ = rt.request("PUT", f(name), b"x")
            self.assertEqual(st, 204)
        self.assertEqual(rt.request("DELETE", "/v1/files/")[::2], (409, err(
            "CONFLICT",
            "cannot delete the sandbox root; pass recursive=true to clear its contents")))
        self.assertEqual(rt.request("DELETE", "/v1/files/?recursive=1")[0], 204)
        self.assertEqual(os.listdir(rt.ws), [])
        self.assertTrue(os.path.isdir(rt.ws))

    def test_stat_of_one_path(self):
        self.assertEqual(self.put("st/x.sh", b"#!/bin/sh\n", "?mode=0750")[0], 204)
        st, h, body = self.req("GET", "/v1/stat/" + urllib.parse.quote("st/x.sh", safe=""))
        self.assertEqual((st, h["Content-Type"]), (200, "application/json"), body)
        e = json.loads(body)
        self.assertEqual({k: e[k] for k in ("path", "name", "size", "type", "mode")},
                         {"path": "/st/x.sh", "name": "x.sh", "size": 10, "type": "file",
                          "mode": "0750"})
        self.assertRegex(e["modified_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        mtime = os.stat(os.path.join(self.rt.ws, "st/x.sh")).st_mtime
        import datetime
        when = datetime.datetime.strptime(e["modified_at"], "%Y-%m-%dT%H:%M:%SZ")
        self.assertLess(abs(when.replace(tzinfo=datetime.timezone.utc).timestamp() - mtime), 1.5)
        d = json.loads(self.req("GET", "/v1/stat/st")[2])
        self.assertEqual((d["type"], d["name"], d["path"]), ("directory", "st", "/st"))
        self.assertEqual(json.loads(self.req("GET", "/v1/stat/")[2])["type"], "directory")
        # through a symlink that stays inside: its target; one that leaves: 403
        self.assertEqual(self.execute("ln -sfn /workspace/st/x.sh st/ln")["exit_code"], 0)
        self.assertEqual(json.loads(self.req("GET", "/v1/stat/st%2Fln")[2])["size"], 10)
        self.assertEqual(self.execute("ln -sfn /etc st/out")["exit_code"], 0)
        self.assertEqual(self.req("GET", "/v1/stat/st%2Fout")[::2], (403, DENIED))
        self.assertEqual(self.req("GET", "/v1/stat/..%2F..%2Fetc")[::2], (403, DENIED))
        self.assertEqual(self.req("GET", "/v1/stat/st%2Fnope")[::2], (404, MISSING))
        self.assertEqual(self.req("PUT", "/v1/stat/st%2Fx.sh", b"x")[0], 405)
        # the token, as every route
        self.assertEqual(self.rt.request("GET", "/v1/stat/st", auth=False)[0], 401)

    def test_escapes_are_403(self):
        for path in ["../../etc/passwd", "a/../../etc", "..", "/..", "/workspace/../etc"]:
            for method in ("GET", "HEAD", "DELETE"):
                with self.subTest(method=method, path=path):
                    st, _, body = self.req(method, f(path))
                    self.assertEqual(st, 403)
                    if method != "HEAD":
                        self.assertEqual(body, DENIED)
            with self.subTest(put=path):
                self.assertEqual(self.put(path, b"x")[::2], (403, DENIED))
        # any other absolute path is taken below the root
        self.assertEqual(self.req("GET", f("/etc/passwd"))[::2], (404, MISSING))

    def test_symlinks_planted_by_a_command(self):
        self.assertEqual(self.execute("ln -sfn /etc esc")["exit_code"], 0)
        self.assertEqual(self.execute("ln -sfn ../../etc/passwd up")["exit_code"], 0)
        for path in ["esc/passwd", "esc", "up"]:
            with self.subTest(path=path):
                self.assertEqual(self.req("GET", f(path))[::2], (403, DENIED))
                self.assertEqual(self.req("DELETE", f(path))[::2], (403, DENIED))
        self.assertEqual(self.put("esc/planted", b"x")[::2], (403, DENIED))
        self.assertFalse(os.path.exists("/etc/planted"))
        # one that stays inside is resolved, as sandboxd resolves it
        self.put("target.txt", b"t")
        self.assertEqual(self.execute("ln -sfn /workspace/target.txt inside")["exit_code"], 0)
        self.assertEqual(self.req("GET", f("inside"))[::2], (200, b"t"))

    def test_hostile_files_planted_by_a_command(self):
        """What a command plants where the routes expect a file or a
        directory: a FIFO is answered (nothing blocks on it), a directory
        is no PUT target, a symlink at the target or in the root is never
        followed out (resolved, or removed as a link)."""
        rt = Runtime()
        self.addCleanup(rt.close)
        cmd = ("mkfifo pipe && mkdir -p dir /tmp/keep && echo k > /tmp/keep/f && "
               "ln -s /tmp/keep keep && ln -s /tmp/keep/f kf && echo t > t && ln -s t lt")
        st, _, body = rt.request("POST", "/execute", json.dumps(
            {"command": "sh -c " + shlex.quote(cmd)}).encode())
        self.assertEqual((st, json.loads(body)["exit_code"]), (200, 0), body)
        st, _, body = rt.request("GET", f("pipe"), timeout=20)
        self.assertNotEqual(st, 200, body)
        self.assertEqual(rt.request("PUT", f("dir"), b"x")[::2], (400, err(
            "INVALID_ARGUMENT", "target path is a directory")))
        self.assertEqual(rt.request("PUT", f("kf"), b"x")[::2], (403, DENIED))
        # a symlink inside: what it points at is written, the link stays one
        self.assertEqual(rt.request("PUT", f("lt"), b"new")[0], 204)
        self.assertTrue(os.path.islink(os.path.join(rt.ws, "lt")))
        with open(os.path.join(rt.ws, "t"), "rb") as fh:
            self.assertEqual(fh.read(), b"new")
        self.assertEqual(rt.request("DELETE", "/v1/files/?recursive=true")[0], 204)
        self.assertEqual(os.listdir(rt.ws), [])
        st, _, body = rt.request("POST", "/execute",
                                 json.dumps({"command": "cat /tmp/keep/f"}).encode())
        self.assertEqual(json.loads(body)["stdout"], "k\n", "the clear followed a link")

    def test_health_metadata_and_unknown_routes(self):
        st, h, body = self.req("GET", "/v1/health")
        got = json.loads(body)
        self.assertEqual((st, got["status"], h["Content-Type"]), (200, "ok", "application/json"))
        self.assertIsInstance(got["uptime_seconds"], int)
        self.assertTrue(body.endswith(b"}\n"))
        st, _, body = self.req("GET", "/v1/metadata")
        self.assertEqual((st, json.loads(body)),
                         (200, {"env": {"SANDBOX_ZONE": "eu-1", "SANDBOX_ID": "sb-7"}}))
        self.assertEqual(self.req("GET", "/v1/nope")[::2], (404, b"404 page not found\n"))
        st, h, _ = self.req("POST", "/v1/health", b"")
        self.assertEqual((st, h["Allow"]), (405, "GET, HEAD"))
        st, h, _ = self.req("POST", f("x"), b"")
        self.assertEqual((st, h["Allow"]), (405, "GET, HEAD, PUT, DELETE"))
        self.assertEqual(self.req("GET", "/v1/files/a%00b")[0], 400)
        # the legacy routes are still there beside them
        self.assertEqual(self.req("GET", "/")[0], 200)


if __name__ == "__main__":
    unittest.main()
