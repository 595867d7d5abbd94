"""The file operations of agentbox/1 (docs/protocol.md, "File operations"),
against the built server: run as root, on a root-owned workspace under a
0700 directory with no --host-uid (agentbox idmaps it to its own sandbox
user, and files keep root's ids on the host), and as an unprivileged user.
AGENTBOX_BIN names the binary."""

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")
ROOT = os.getuid() == 0
# who owns, on the host, what the sandbox creates in the workspace: the
# workspace's owner, the test's own user (root too, through the idmapping)
HOST_OWNER = os.getuid()
RECV_TIMEOUT = 30
_ANY_USER_BIN = None


def any_user_bin():
    """BIN where any user may run it: the build may sit in a directory only
    root may enter (a clone under /root), so a copy in a 0755 directory
    (the shipped policy is built into the binary)."""
    global _ANY_USER_BIN
    if _ANY_USER_BIN is None:
        d = tempfile.mkdtemp(prefix="agentbox-bin-")
        os.chmod(d, 0o755)
        unittest.addModuleCleanup(shutil.rmtree, d, True)
        _ANY_USER_BIN = shutil.copy(shutil.which(BIN) or BIN, os.path.join(d, "agentbox"))
        os.chmod(_ANY_USER_BIN, 0o755)
    return _ANY_USER_BIN


class Server:
    """One `agentbox serve`, with a reader thread so that a hung server
    fails the test instead of hanging it."""

    def __init__(self, ws, *extra, env=None):
        args = [BIN, "serve", "--workspace", ws, *extra]
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        self.q = queue.Queue()
        self.n = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.hello = self.recv()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(json.loads(line))
        self.q.put(None)

    def recv(self):
        m = self.q.get(timeout=RECV_TIMEOUT)
        if m is None:
            err = self.p.stderr.read().decode(errors="replace")
            raise AssertionError("the server ended: " + err)
        return m

    def send(self, **req):
        self.n += 1
        req.setdefault("id", self.n)
        self.p.stdin.write((json.dumps(req) + "\n").encode())
        self.p.stdin.flush()
        return req["id"]

    def call(self, **req):
        rid = self.send(**req)
        while True:
            m = self.recv()
            if m.get("id") == rid and m["type"] != "output":
                return m

    def close(self):
        end_server(self.p)
        self.p.stderr.close()


def end_server(p):
    """Shut the server down (end of input alone lets what runs finish), and
    wait; kill it if it does not end in time."""
    try:
        p.stdin.write(b'{"op":"shutdown","id":"end-of-test"}\n')
        p.stdin.close()
    except (OSError, ValueError):  # a test closed it already
        pass
    try:
        p.wait(timeout=RECV_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    p.stdout.close()


def make_dir(parent=None):
    d = tempfile.mkdtemp(prefix="agentbox-test-", dir=parent)
    os.chmod(d, 0o755)
    return d


class FileOps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # 0700, as /root is: only the launcher opens what lies beneath
        cls.tmp = tempfile.mkdtemp(prefix="agentbox-fileops-")
        os.chmod(cls.tmp, 0o700)
        cls.skills = os.path.join(cls.tmp, "skills")
        os.mkdir(cls.skills)
        with open(os.path.join(cls.skills, "SKILL.md"), "w") as f:
            f.write("# a skill\n")
        # a file outside the view that a planted symlink points at
        cls.secret = os.path.join(cls.tmp, "host-secret")
        with open(cls.secret, "w") as f:
            f.write("host secret\n")
        os.chmod(cls.secret, 0o644)
        cls.ws = make_dir(cls.tmp)
        try:
            cls.sv = Server(cls.ws, "--skills", cls.skills)
        except AssertionError as e:
            shutil.rmtree(cls.tmp)
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                raise
            raise unittest.SkipTest(f"agentbox cannot run here: {e}")

    @classmethod
    def tearDownClass(cls):
        cls.sv.close()
        shutil.rmtree(cls.tmp)

    def call(self, **req):
        return self.sv.call(**req)

    def ok(self, **req):
        m = self.call(**req)
        self.assertEqual(m["type"], "result", m)
        self.assertEqual(m["op"], req["op"])
        return m

    def err(self, code, **req):
        m = self.call(**req)
        self.assertEqual((m["type"], m["code"]), ("error", code), m)
        return m

    def sh(self, command):
        m = self.call(op="exec", command=command)
        self.assertEqual(m["exit_code"], 0, m)
        return m["stdout"]

    def host(self, rel):
        return os.path.join(self.ws, rel)

    def host_write(self, rel, data=b"", size=None):
        """A file made from the host, owned like the workspace."""
        path = self.host(rel)
        d = os.path.dirname(path)
        os.makedirs(d, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
            if size is not None:
                f.truncate(size)

    # ---- identity ----

    def test_the_workspace_is_the_sandbox_users_and_files_keep_the_owners(self):
        # as root: agentbox's own unprivileged user, never root, owns the
        # idmapped workspace inside; on the host, what it makes is root's
        inside = 2000000000 if ROOT else os.getuid()
        out = self.sh("id -u; stat -c %u /workspace; echo x > by-exec; cat /proc/self/uid_map")
        self.assertEqual(out.split()[:5], [str(inside), str(inside), str(inside),
                                           str(inside), "1"])
        self.ok(op="write", path="by-op/f", content="y")
        for rel in ("by-exec", "by-op", "by-op/f"):
            st = os.stat(self.host(rel))
            self.assertEqual((st.st_uid, st.st_gid), (HOST_OWNER, os.getgid()), rel)

    # ---- write and read ----

    def test_write_creates_parents_and_refuses_to_overwrite(self):
        m = self.ok(op="write", path="w/a/b/new.txt", content="héllo\n")
        self.assertEqual((m["path"], m["bytes"], m["created"]),
                         ("/workspace/w/a/b/new.txt", 7, True))
        with open(self.host("w/a/b/new.txt"), "rb") as f:
            self.assertEqual(f.read(), "héllo\n".encode())
        st = os.stat(self.host("w/a/b/new.txt"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (HOST_OWNER, 0o644))
        self.err("exists", op="write", path="w/a/b/new.txt", content="x")
        m = self.ok(op="write", path="/workspace/w/a/b/new.txt", content="x", overwrite=True)
        self.assertFalse(m["created"])
        with open(self.host("w/a/b/new.txt")) as f:
            self.assertEqual(f.read(), "x")

    def test_write_base64_content(self):
        data = bytes(range(256))
        self.ok(op="write", path="w/bytes.bin", encoding="base64",
                content=base64.b64encode(data).decode())
        with open(self.host("w/bytes.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        self.err("invalid_request", op="write", path="w/bad.bin", encoding="base64",
                 content="not base64!")
        self.assertFalse(os.path.exists(self.host("w/bad.bin")))

    def test_read_pages_by_lines(self):
        self.ok(op="write", path="r/five.txt", content="one\ntwo\nthree\nfour\nfive")
        m = self.ok(op="read", path="r/five.txt", offset=1, limit=2)
        self.assertEqual((m["content"], m["total_lines"], m["start_line"], m["end_line"],
                          m["next_offset"], m["encoding"]),
                         ("two\nthree\n", 5, 2, 3, 3, "utf-8"))
        m = self.ok(op="read", path="r/five.txt", offset=m["next_offset"])
        self.assertEqual((m["content"], m["start_line"], m["end_line"], m["next_offset"]),
                         ("four\nfive", 4, 5, None))
        m = self.ok(op="read", path="r/five.txt", offset=9)
        self.assertEqual((m["content"], m["start_line"], m["end_line"], m["next_offset"]),
                         ("", 0, 0, None))
        self.ok(op="write", path="r/empty.txt", content="")
        m = self.ok(op="read", path="r/empty.txt")
        self.assertEqual((m["content"], m["total_lines"], m["size"]), ("", 0, 0))

    def test_read_default_limit_is_2000_lines(self):
        self.ok(op="write", path="r/long.txt", content="".join(f"{i}\n" for i in range(2500)))
        m = self.ok(op="read", path="r/long.txt")
        self.assertEqual((m["end_line"], m["next_offset"], m["total_lines"]), (2000, 2000, 2500))
        self.assertTrue(m["content"].endswith("1999\n"))

    def test_read_binary_and_invalid_utf8_come_as_base64(self):
        for name, data in (("r/nul.bin", b"ab\0cd\n"), ("r/latin1.txt", b"caf\xe9\n")):
            self.host_write(name, data)
            m = self.ok(op="read", path=name)
            self.assertEqual(m["encoding"], "base64")
            self.assertEqual(base64.b64decode(m["content"]), data)
            self.assertIsNone(m["total_lines"])

    def test_read_stops_before_6_mib_of_content(self):
        line = "x" * (1 << 20) + "\n"
        self.host_write("r/big.txt", (line * 8).encode())
        m = self.ok(op="read", path="r/big.txt")
        self.assertEqual((m["start_line"], m["end_line"], m["next_offset"], m["total_lines"]),
                         (1, 5, 5, 8))
        self.assertEqual(m["content"], line * 5)
        self.assertFalse(m["truncated"])

    def test_read_refuses_what_is_not_a_regular_file(self):
        self.sh("mkdir -p r && mkfifo r/fifo")
        self.err("invalid_path", op="read", path="r/fifo")  # and does not block
        self.err("is_directory", op="read", path="/workspace")
        self.err("file_not_found", op="read", path="r/none")
        self.err("not_directory", op="read", path="r/fifo/x")

    # ---- edit ----

    def test_edit(self):
        self.ok(op="write", path="e/app.py", content="a = 'hi'\nb = 'hi'\n")
        os.chmod(self.host("e/app.py"), 0o751)
        self.err("not_unique", op="edit", path="e/app.py", old_string="hi", new_string="yo")
        self.err("not_found", op="edit", path="e/app.py", old_string="zz", new_string="yo")
        m = self.ok(op="edit", path="e/app.py", old_string="a = 'hi'", new_string="a = 1")
        self.assertEqual(m["occurrences"], 1)
        m = self.ok(op="edit", path="e/app.py", old_string="hi", new_string="yo",
                    replace_all=True)
        self.assertEqual(m["occurrences"], 1)
        with open(self.host("e/app.py")) as f:
            self.assertEqual(f.read(), "a = 1\nb = 'yo'\n")
        self.assertEqual(os.stat(self.host("e/app.py")).st_mode & 0o777, 0o751)
        self.assertEqual([n for n in os.listdir(self.host("e")) if n != "app.py"], [])
        self.err("invalid_request", op="edit", path="e/app.py", old_string="",
                 new_string="x")

    def test_edit_keeps_hard_links_together(self):
        self.ok(op="write", path="e/linked.txt", content="old\n")
        self.sh("ln e/linked.txt e/other-link.txt")
        self.ok(op="edit", path="e/linked.txt", old_string="old", new_string="new")
        with open(self.host("e/other-link.txt")) as f:
            self.assertEqual(f.read(), "new\n")

    # ---- ls, glob, grep ----

    def test_ls(self):
        self.sh("mkdir -p l/sub && printf 12345 > l/b.txt && ln -s sub l/to-sub")
        m = self.ok(op="ls", path="l")
        self.assertEqual(m["path"], "/workspace/l")
        self.assertFalse(m["truncated"])
        got = {e["path"]: (e["is_dir"], e["size"]) for e in m["entries"]}
        self.assertEqual(list(got), ["/workspace/l/b.txt", "/workspace/l/sub",
                                     "/workspace/l/to-sub"])
        self.assertEqual(got["/workspace/l/b.txt"], (False, 5))
        self.assertTrue(got["/workspace/l/sub"][0] and got["/workspace/l/to-sub"][0])
        self.assertRegex(m["entries"][0]["modified_at"],
                         r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.err("not_directory", op="ls", path="l/b.txt")
        self.err("file_not_found", op="ls", path="l/none")

    def test_glob(self):
        self.sh("mkdir -p g/src/deep g/.hidden && touch -d '2020-01-01' g/old.py && "
                "touch g/src/new.py g/src/deep/deeper.py g/readme.md g/.hidden/x.py")
        m = self.ok(op="glob", pattern="*.py", path="g")
        self.assertEqual([e["path"] for e in m["matches"]], ["/workspace/g/old.py"])
        m = self.ok(op="glob", pattern="**/*.py", path="/workspace/g")
        paths = [e["path"] for e in m["matches"]]
        self.assertEqual(sorted(paths), ["/workspace/g/.hidden/x.py", "/workspace/g/old.py",
                                         "/workspace/g/src/deep/deeper.py",
                                         "/workspace/g/src/new.py"])
        self.assertEqual(paths[-1], "/workspace/g/old.py")  # the oldest last
        m = self.ok(op="glob", pattern="/workspace/g/src/*")
        self.assertEqual(sorted(e["path"] for e in m["matches"]),
                         ["/workspace/g/src/deep", "/workspace/g/src/new.py"])
        self.assertTrue(next(e for e in m["matches"] if e["path"].endswith("deep"))["is_dir"])
        self.err("file_not_found", op="glob", pattern="*", path="g/none")

    def test_grep(self):
        self.sh("mkdir -p gr/sub && printf 'abc\\na.c\\nA.C\\n' > gr/one.txt && "
                "printf 'x\\nmore a.c here\\n' > gr/sub/two.md && "
                "printf 'a.c\\0binary' > gr/bin.dat")
        m = self.ok(op="grep", pattern="a.c", path="gr")
        self.assertEqual([(x["path"], x["line"], x["text"]) for x in m["matches"]],
                         [("/workspace/gr/one.txt", 2, "a.c"),
                          ("/workspace/gr/sub/two.md", 2, "more a.c here")])
        m = self.ok(op="grep", pattern="a.c", path="gr", ignore_case=True, glob="*.txt")
        self.assertEqual([x["line"] for x in m["matches"]], [2, 3])
        m = self.ok(op="grep", pattern="^a.c$", regex=True, path="gr/one.txt")
        self.assertEqual([x["text"] for x in m["matches"]], ["abc", "a.c"])
        m = self.ok(op="grep", pattern="a", path="gr", max_count=2, ignore_case=True)
        self.assertEqual((len(m["matches"]), m["truncated"]), (2, True))
        self.err("invalid_request", op="grep", pattern="(", regex=True, path="gr")

    # ---- delete, upload, download ----

    def test_glob_files_only(self):
        self.assertIn("glob_files_only", self.sv.hello["features"])
        self.host_write("fo/a.py", b"x")
        self.host_write("fo/sub.py/b.py", b"x")
        os.symlink("a.py", self.host("fo/link.py"))
        m = self.ok(op="glob", pattern="**/*.py", path="fo")
        self.assertEqual(sorted(e["path"] for e in m["matches"]),
                         ["/workspace/fo/a.py", "/workspace/fo/link.py", "/workspace/fo/sub.py",
                          "/workspace/fo/sub.py/b.py"])
        m = self.ok(op="glob", pattern="**/*.py", path="fo", files_only=True)
        self.assertEqual(sorted(e["path"] for e in m["matches"]),
                         ["/workspace/fo/a.py", "/workspace/fo/link.py",
                          "/workspace/fo/sub.py/b.py"])
        self.assertFalse(any(e["is_dir"] for e in m["matches"]))

    def test_grep_pages_with_skip(self):
        self.assertIn("grep_skip", self.sv.hello["features"])
        self.host_write("gp/a.txt", b"hit\n" * 7)
        self.host_write("gp/b.txt", b"no\nhit\n" * 3)
        whole = self.ok(op="grep", pattern="hit", path="gp")["matches"]
        self.assertEqual(len(whole), 10)
        pages, skip = [], 0
        while True:
            m = self.ok(op="grep", pattern="hit", path="gp", max_count=3, skip=skip)
            pages += m["matches"]
            skip += len(m["matches"])
            if not m["truncated"]:
                break
        self.assertEqual(pages, whole)
        m = self.ok(op="grep", pattern="hit", path="gp", max_count=10)
        self.assertFalse(m["truncated"])  # exactly max_count, none left out
        m = self.ok(op="grep", pattern="hit", path="gp", skip=100)
        self.assertEqual((m["matches"], m["truncated"]), ([], False))
        self.err("invalid_request", op="grep", pattern="hit", path="gp", skip=-1)

    def test_delete(self):
        self.sh("mkdir -p d/tree/a/b d/empty d/keep && touch d/tree/a/b/f d/keep/precious "
                "d/file && ln -s ../keep d/tree/link")
        self.ok(op="delete", path="d/file")
        self.assertFalse(os.path.exists(self.host("d/file")))
        self.ok(op="delete", path="d/empty")
        self.err("is_directory", op="delete", path="d/tree")
        m = self.ok(op="delete", path="d/tree", recursive=True)
        self.assertEqual(m["deleted"], 5)  # f, b, a, link, tree
        self.assertFalse(os.path.exists(self.host("d/tree")))
        self.assertTrue(os.path.exists(self.host("d/keep/precious")))  # not followed
        self.err("invalid_path", op="delete", path="/workspace", recursive=True)
        self.err("invalid_path", op="delete", path=".", recursive=True)
        self.err("file_not_found", op="delete", path="d/none")

    def test_upload_and_download(self):
        data = os.urandom(300000)
        m = self.ok(op="upload", path="u/blob", data=base64.b64encode(data).decode())
        self.assertEqual((m["bytes"], m["created"]), (len(data), True))
        m = self.ok(op="upload", path="u/blob", data=base64.b64encode(b"2").decode())
        self.assertFalse(m["created"])  # upload overwrites by default
        self.err("exists", op="upload", path="u/blob", data="", overwrite=False)
        self.ok(op="upload", path="u/blob", data=base64.b64encode(data).decode())
        m = self.ok(op="download", path="u/blob")
        self.assertEqual((base64.b64decode(m["data"]), m["size"]), (data, len(data)))
        self.host_write("u/huge", size=(6 << 20) + 1)
        self.err("too_large", op="download", path="u/huge")
        self.host_write("u/limit", size=6 << 20)  # exactly the limit: carried
        m = self.ok(op="download", path="u/limit")
        self.assertEqual((len(base64.b64decode(m["data"])), m["size"]), (6 << 20, 6 << 20))

    def test_chunked_upload_and_download(self):
        chunk = self.sv.hello["max_chunk"]
        self.assertIn("file_chunks", self.sv.hello["features"])
        self.assertEqual(chunk, 4 << 20)
        data = os.urandom(2 * chunk + 12345)
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        self.host_write("c/old", b"x" * 100)
        for off in range(0, len(data), chunk):
            m = self.ok(op="upload", path="c/old", offset=off, data=b64(data[off:off + chunk]))
            n = min(chunk, len(data) - off)
            self.assertEqual((m["bytes"], m["size"]), (n, off + n))
            self.assertEqual(m["created"], False)  # offset 0 truncated the old file
        with open(self.host("c/old"), "rb") as f:
            self.assertEqual(f.read(), data)
        got, off = b"", 0
        while True:
            m = self.ok(op="download", path="c/old", offset=off)
            self.assertEqual((m["offset"], m["size"]), (off, len(data)))
            got += base64.b64decode(m["data"])
            off = len(got)
            if m["eof"]:
                break
        self.assertEqual(got, data)
        m = self.ok(op="download", path="c/old", offset=10, length=5)
        self.assertEqual((base64.b64decode(m["data"]), m["eof"]), (data[10:15], False))
        m = self.ok(op="download", path="c/old", offset=len(data))
        self.assertEqual((m["data"], m["eof"]), ("", True))
        m = self.ok(op="upload", path="c/new", offset=0, data=b64(b"abc"))
        self.assertEqual((m["bytes"], m["size"], m["created"]), (3, 3, True))
        self.err("exists", op="upload", path="c/new", offset=0, data="", overwrite=False)
        m = self.ok(op="upload", path="c/new", offset=0, data="")  # truncates
        self.assertEqual(m["size"], 0)
        self.assertEqual(os.path.getsize(self.host("c/new")), 0)

    def test_chunk_offsets_and_sizes_are_checked(self):
        self.host_write("k/f", b"12345")
        m = self.err("invalid_request", op="upload", path="k/f", offset=3, data="QQ==")
        self.assertIn("offset 3", m["message"])
        self.assertIn("5 bytes", m["message"])
        m = self.err("invalid_request", op="upload", path="k/f", offset=6, data="QQ==")
        self.assertIn("offset 6", m["message"])
        m = self.err("invalid_request", op="upload", path="k/none", offset=1, data="QQ==")
        self.assertIn("offset 1", m["message"])
        self.assertFalse(os.path.exists(self.host("k/none")))
        with open(self.host("k/f"), "rb") as f:
            self.assertEqual(f.read(), b"12345")  # nothing written by the errors
        m = self.ok(op="upload", path="k/f", offset=5, data="QQ==")
        self.assertEqual((m["bytes"], m["size"]), (1, 6))
        over = base64.b64encode(b"\0" * ((4 << 20) + 1)).decode()
        m = self.err("too_large", op="upload", path="k/g", offset=0, data=over)
        self.assertIn("max_chunk", m["message"])
        self.assertFalse(os.path.exists(self.host("k/g")))
        m = self.err("invalid_request", op="download", path="k/f", offset=7)
        self.assertIn("offset 7", m["message"])
        self.assertIn("6 bytes", m["message"])
        self.err("invalid_request", op="download", path="k/f", offset=0, length=(4 << 20) + 1)
        self.err("invalid_request", op="download", path="k/f", offset=0, length=0)
        self.err("invalid_request", op="download", path="k/f", length=2)  # needs offset
        self.err("invalid_request", op="download", path="k/f", offset=-1)
        self.err("invalid_request", op="upload", path="k/f", offset="0", data="")
        self.err("file_not_found", op="download", path="k/none", offset=0)
        self.err("is_directory", op="download", path="k", offset=0)

    # ---- the view is the guard ----

    def test_planted_symlinks_reach_the_view_not_the_host(self):
        os.symlink(self.secret, self.host("planted"))
        m = self.err("file_not_found", op="read", path="planted")
        self.assertNotIn("host secret", json.dumps(m))
        os.symlink(os.path.join(self.tmp, "created-by-sandbox"), self.host("planted-w"))
        self.call(op="write", path="planted-w", content="x")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "created-by-sandbox")))
        m = self.err("permission_denied", op="read", path="/etc/shadow")
        self.assertNotIn("root:", json.dumps(m))
        self.err("invalid_path", op="read", path="../etc/passwd")
        self.err("invalid_path", op="read", path="/workspace/../etc/passwd")

    def test_read_only_places(self):
        m = self.ok(op="read", path="/skills/SKILL.md")
        self.assertEqual(m["content"], "# a skill\n")
        self.err("read_only", op="write", path="/skills/new.md", content="x")
        self.err("read_only", op="edit", path="/skills/SKILL.md", old_string="skill",
                 new_string="x")
        self.err("read_only", op="delete", path="/skills/SKILL.md")
        self.err("read_only", op="write", path="/usr/bin/planted", content="x")
        with open(os.path.join(self.skills, "SKILL.md")) as f:
            self.assertEqual(f.read(), "# a skill\n")

    # ---- requests ----

    def test_bad_requests(self):
        self.err("invalid_request", op="read", path="x", bogus=1)
        self.err("invalid_request", op="read")
        self.err("invalid_request", op="read", path="x", offset=-1)
        self.err("invalid_request", op="read", path="x", limit=0)
        self.err("invalid_request", op="write", path="x", content=3)
        self.err("invalid_request", op="write", path="x", content="x", encoding="latin1")
        self.err("invalid_request", op="grep", pattern="")
        self.err("invalid_path", op="read", path="")
        self.err("invalid_path", op="read", path="a\u0000b")
        self.err("invalid_path", op="read", path=7)
        # and the session goes on
        self.assertEqual(self.call(op="ping")["type"], "pong")

    def test_timeout_and_cancel(self):
        # text at the start, then 64 GiB of (sparse) zeros to count lines in
        self.host_write("t-huge.txt", b"line\n" * 2000, size=64 << 30)
        m = self.err("timeout", op="read", path="t-huge.txt", timeout=0.3)
        # the request's own timeout, not the session's default
        self.assertIn("took longer than its timeout of 300 ms", m["message"])
        rid = self.sv.send(op="read", path="t-huge.txt")
        time.sleep(0.2)
        cid = self.sv.send(op="cancel", target=rid)
        got = {}
        while len(got) < 2:
            m = self.sv.recv()
            got[m["id"]] = m
        self.assertEqual(got[cid]["type"], "ok")
        self.assertEqual((got[rid]["type"], got[rid]["code"]), ("error", "cancelled"))
        os.unlink(self.host("t-huge.txt"))

    def test_a_file_operation_whose_shim_is_killed_fails_and_the_session_goes_on(self):
        # the read's shim is busy counting 64 GiB of lines when a command
        # kills every process it can: the read's answer says so at once.
        # Without Landlock's signal scope (as before Linux 6.12): with it,
        # the command's kill reaches only its own processes
        sv = Server(self.ws, "--skills", self.skills,
                    env=dict(os.environ, AGENTBOX_TEST_NO_SIGNAL_SCOPE="1"))
        self.addCleanup(sv.close)
        self.host_write("t-kill.txt", b"line\n" * 2000, size=64 << 30)
        t = time.monotonic()
        rid = sv.send(op="read", path="t-kill.txt")
        time.sleep(0.3)
        eid = sv.send(op="exec", command="kill -9 -1")
        got = {}
        while len(got) < 2:
            m = sv.recv()
            got[m["id"]] = m
        self.assertLess(time.monotonic() - t, 20)  # not the session's timeout
        self.assertEqual(got[rid]["type"], "error", got[rid])
        self.assertIn("supervisor in the sandbox was killed", got[rid]["message"])
        self.assertEqual(got[eid]["type"], "error", got[eid])
        os.unlink(self.host("t-kill.txt"))
        self.host_write("t-after.txt", b"after\n")
        m = sv.call(op="read", path="t-after.txt")
        self.assertEqual(m.get("content"), "after\n", m)

    def test_writes_either_side_of_a_shim_packet_arrive_whole(self):
        # a request up to 64 KiB goes to the shim in one packet, a bigger
        # one through a memfd: the sizes around the edge all arrive whole
        for n in range(65536 - 300, 65536 + 40, 13):
            text = ("%d:" % n + ("abcdefghi" * 11 + "\n") * (n // 100 + 1))[:n]
            self.ok(op="write", path="edge/f.txt", content=text)
            with open(self.host("edge/f.txt"), encoding="utf-8") as f:
                self.assertEqual(f.read(), text, n)
            m = self.ok(op="read", path="edge/f.txt")
            self.assertEqual(m["content"], text, n)
            os.unlink(self.host("edge/f.txt"))

    def test_file_ops_run_concurrently_with_commands(self):
        ids = [self.sv.send(op="exec", command="sleep 1")]
        t = time.monotonic()
        ids.append(self.sv.send(op="write", path="c/during.txt", content="x"))
        got = {}
        while len(got) < 2:
            m = self.sv.recv()
            got[m["id"]] = (m, time.monotonic() - t)
        self.assertEqual(got[ids[1]][0]["type"], "result")
        self.assertLess(got[ids[1]][1], got[ids[0]][1])  # did not wait for the sleep


class HostFds(unittest.TestCase):
    """Issue 33, item 4: no fd of a host path in the init or a shim of an
    unprivileged overlay session, where file operations run. A shim used to
    hold the layer's upper/ and work/ (and every process of the sandbox the
    launcher's stdin, stdout and stderr): a planted link to
    /proc/self/fd/N/../.. then reached the host's files from a plain `read`,
    without Landlock (which is off here, as on a host without it). As root,
    the session runs as nobody (65534) and the test also reads every fd of
    the sandbox's processes from the host."""

    SECRET = "host secret of the layer's parent\n"
    LOGGED = "what the caller's log held\n"

    def setUp(self):
        self.tmp = make_dir()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.ws = make_dir(self.tmp)
        state = make_dir(self.tmp)
        # upper is state/agentbox/layers/XXXXXX/upper: four levels below state
        self.secret = os.path.join(state, "secret")
        with open(self.secret, "w") as f:
            f.write(self.SECRET)
        self.log = os.path.join(self.tmp, "serve.log")
        with open(self.log, "w") as f:
            f.write(self.LOGGED)
        kw = {}
        binary = BIN
        if ROOT:  # an unprivileged session: nobody's, in directories nobody owns
            binary = any_user_bin()
            for d in (self.tmp, self.ws, state, self.secret, self.log):
                os.chown(d, 65534, 65534)
            kw = dict(user=65534, group=65534, extra_groups=[])
        env = dict(os.environ, HOME=self.tmp, XDG_STATE_HOME=state)
        log = open(self.log, "a")
        self.p = subprocess.Popen(
            [binary, "serve", "--workspace", self.ws, "--workspace-mode", "overlay",
             "--landlock", "off"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=log, env=env, **kw)
        log.close()
        self.addCleanup(self.p.stdout.close)
        self.addCleanup(end_server, self.p)
        self.n = 0
        hello = json.loads(self.p.stdout.readline() or "null")
        if not hello or hello.get("type") != "hello":
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                self.fail("no session: %s" % open(self.log).read())
            self.skipTest("agentbox cannot run here: %s" % open(self.log).read())

    def call(self, **req):
        self.n += 1
        req["id"] = self.n
        self.p.stdin.write((json.dumps(req) + "\n").encode())
        self.p.stdin.flush()
        while True:
            m = json.loads(self.p.stdout.readline())
            if m.get("id") == self.n and m["type"] != "output":
                return m

    def host_files_unchanged(self):
        with open(self.secret) as f:
            self.assertEqual(f.read(), self.SECRET)
        with open(self.log) as f:
            self.assertTrue(f.read().startswith(self.LOGGED))

    def test_a_shim_holds_no_fd_of_a_host_path(self):
        self.assertEqual(self.call(op="exec", command="true")["exit_code"], 0)
        m = self.call(op="ls", path="/proc/self/fd")  # the shim's own fds
        self.assertEqual(m["type"], "result", m)
        fds = [e["path"] for e in m["entries"]]
        self.assertGreaterEqual(len(fds), 3, m)
        self.assertEqual([e["path"] for e in m["entries"] if e["is_dir"]], [],
                         "the shim holds directories")
        for path in fds:  # a host file would be read (a FIFO, a device are not)
            r = self.call(op="read", path=path)
            self.assertEqual(r["type"], "error", "the shim read %s: %s" % (path, r))
        if ROOT:  # every fd of every process of the sandbox, from the host
            held = {}
            for pid in descendants(self.p.pid):
                for fd in os.listdir("/proc/%d/fd" % pid):
                    try:
                        held["%d/%s" % (pid, fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                    except OSError:
                        pass
            paths = {k: t for k, t in held.items()
                     if t.startswith("/") and t != "/dev/null" and not t.startswith("/memfd:")}
            self.assertEqual(paths, {}, "host paths open in the sandbox")
        self.host_files_unchanged()

    def test_planted_proc_fd_links_reach_no_host_file(self):
        script = ('for n in $(seq 0 40); do ln -s /proc/self/fd/$n/../../../../secret '
                  'leak$n; ln -s /proc/self/fd/$n fd$n; done')
        self.assertEqual(self.call(op="exec", command=script)["exit_code"], 0)
        for n in range(41):
            for name in ("leak%d" % n, "fd%d" % n):
                r = self.call(op="read", path=name)
                self.assertNotIn(self.SECRET.strip(), json.dumps(r), name)
                self.assertNotIn(self.LOGGED.strip(), json.dumps(r), name)
                for old in (self.SECRET.strip(), self.LOGGED.strip()):
                    self.call(op="edit", path=name, old_string=old, new_string="gone")
        self.host_files_unchanged()


class OtherOwners(unittest.TestCase):
    """Issue 33, item 7: an overlay cannot copy up a file whose group is not
    the sandbox user's (EOVERFLOW from the kernel); a file operation says
    why and what to do, and the host file stays as it was. Root only: only
    root gives a file a group its owner is not in."""

    def test_a_file_of_an_unmapped_group_is_refused_with_the_reason(self):
        if not ROOT:
            self.skipTest("needs root, to give the workspace's file a group its user is not in")
        tmp = make_dir()
        self.addCleanup(shutil.rmtree, tmp, True)
        ws = make_dir(tmp)
        path = os.path.join(ws, "built-by-sudo.txt")
        with open(path, "w") as f:
            f.write("abc")
        for d in (tmp, ws):
            os.chown(d, 65534, 65534)
        os.chown(path, 65534, 0)
        env = dict(os.environ, HOME=tmp, XDG_STATE_HOME=tmp)
        p = subprocess.Popen([any_user_bin(), "serve", "--workspace", ws, "--workspace-mode",
                              "overlay"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, user=65534, group=65534,
                             extra_groups=[])
        self.addCleanup(p.stdout.close)
        self.addCleanup(end_server, p)
        self.assertEqual(json.loads(p.stdout.readline())["type"], "hello")
        p.stdin.write((json.dumps({"op": "upload", "id": 1, "path": "built-by-sudo.txt",
                                   "offset": 3, "data": "ZGVm"}) + "\n").encode())
        p.stdin.flush()
        m = json.loads(p.stdout.readline())
        self.assertEqual(m["type"], "error", m)
        self.assertIn("not mapped into the sandbox", m["message"])
        self.assertIn("--workspace-mode direct", m["message"])
        with open(path) as f:
            self.assertEqual(f.read(), "abc")


class ProtectedReport(unittest.TestCase):
    """A protected path a file operation (or a command before it) changed
    is reported by the next command's result: a file operation's reply has
    no such field, and must not take the report away."""

    def test_a_change_before_a_file_operation_is_the_next_commands(self):
        tmp = make_dir()
        self.addCleanup(shutil.rmtree, tmp, True)
        try:
            sv = Server(make_dir(tmp))
        except AssertionError as e:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                raise
            self.skipTest(f"agentbox cannot run here: {e}")
        self.addCleanup(sv.close)
        m = sv.call(op="write", path=".profile", content="echo hi\n")
        self.assertEqual(m["type"], "result", m)
        m = sv.call(op="read", path=".profile")
        self.assertEqual(m["type"], "result", m)
        m = sv.call(op="exec", command="true")
        self.assertEqual(m["protected_paths_changed"], [".profile"], m)
        # and put out of effect by that command's end (--protect-created)
        self.assertEqual([q["path"] for q in m["protected_paths_quarantined"]], [".profile"], m)
        m = sv.call(op="exec", command="echo more >> .bashrc; true")
        self.assertEqual(m["protected_paths_changed"], [".bashrc"], m)
        self.assertEqual(sv.call(op="read", path=".bashrc")["type"], "error")
        moved = m["protected_paths_quarantined"][0]["moved_to"]
        self.assertEqual(sv.call(op="read", path=moved)["type"], "result")
        m = sv.call(op="exec", command="true")
        self.assertEqual(m["protected_paths_changed"], [], m)


def descendants(pid):
    """Every process below pid, by /proc/PID/task/*/children."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            kids = open("/proc/%d/task/%s/children" % (pid, tid)).read().split()
        except OSError:
            continue
        for k in kids:
            out += [int(k)] + descendants(int(k))
    return out


if __name__ == "__main__":
    unittest.main()
