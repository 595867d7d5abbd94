"""agentbox.Sandbox as a deepagents 0.7 sandbox backend, against the real
server: every method's semantics and its async twin, once with agentbox's
own result classes (deepagents not installed) and once with the deepagents
stand-in importable (tests/standin), where Sandbox must be a subclass of
its SandboxBackendProtocol and return its classes."""

import asyncio
import base64
import dataclasses
import os
import shutil
import unittest

import agentbox
from support import ROOT, UID, agentbox_with_standin, sandbox, workspace

# the names and defaults of deepagents 0.7's result classes
SHAPES = {
    "ExecuteResponse": [("output", None), ("exit_code", None), ("truncated", False)],
    "ReadResult": [("error", None), ("file_data", None), ("total_lines", None),
                   ("start_line", None), ("end_line", None), ("next_offset", None),
                   ("no_lines_requested", False)],
    "WriteResult": [("error", None), ("path", None)],
    "EditResult": [("error", None), ("path", None), ("occurrences", None)],
    "DeleteResult": [("error", None), ("path", None)],
    "LsResult": [("error", None), ("entries", None)],
    "GrepResult": [("error", None), ("matches", None), ("truncated", False)],
    "GlobResult": [("error", None), ("matches", None), ("truncated", False)],
    "FileUploadResponse": [("path", None), ("error", None)],
    "FileDownloadResponse": [("path", None), ("content", None), ("error", None)],
}


def shape(cls):
    return [(f.name, None if f.default is dataclasses.MISSING else f.default)
            for f in dataclasses.fields(cls)]


class Semantics:
    """The tests; a subclass says which agentbox (ab) and which result
    classes (classes) it expects."""

    ab = agentbox
    classes = None  # the module whose result classes Sandbox must return

    @classmethod
    def setUpClass(cls):
        cls.tmp = workspace()
        os.chmod(cls.tmp, 0o755)
        cls.ws = os.path.join(cls.tmp, "ws")
        os.mkdir(cls.ws)
        cls.skills = os.path.join(cls.tmp, "skills")
        os.mkdir(cls.skills)
        with open(os.path.join(cls.skills, "SKILL.md"), "w") as f:
            f.write("# skill\n")
        if ROOT:
            os.chown(cls.ws, UID, UID)
        try:
            cls.sb = sandbox(cls.ws, module=cls.ab, skills=cls.skills)
        except unittest.SkipTest:
            shutil.rmtree(cls.tmp)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.sb.close()
        shutil.rmtree(cls.tmp, True)

    def setUp(self):
        self.d = "/workspace/%s" % self._testMethodName
        self.host = os.path.join(self.ws, self._testMethodName)

    def is_a(self, obj, name):
        self.assertIs(type(obj), getattr(self.classes, name), obj)

    def put(self, rel, data):
        if isinstance(data, str):
            data = data.encode()
        (r,) = self.sb.upload_files([("%s/%s" % (self.d, rel), data)])
        self.assertIsNone(r.error, r)

    def twin(self, name, *args, **kw):
        """The method and its async twin give the same result."""
        sync = getattr(self.sb, name)(*args, **kw)
        again = asyncio.run(getattr(self.sb, "a" + name)(*args, **kw))
        self.assertEqual(again, sync, name)
        return sync

    # ---- the classes ----

    def test_result_classes_have_deepagents_shape(self):
        for name, fields in SHAPES.items():
            self.assertEqual(shape(getattr(self.ab, name)), fields, name)

    # ---- execute, id ----

    def test_execute_and_id(self):
        r = self.twin("execute", "echo out; echo err >&2; exit 3")
        self.is_a(r, "ExecuteResponse")
        self.assertEqual((r.output, r.exit_code, r.truncated), ("out\nerr\n", 3, False))
        r = self.sb.execute("echo started; sleep 30", timeout=1)
        self.assertEqual((r.output, r.exit_code), ("started\n", 124))
        r = asyncio.run(self.sb.aexecute("echo x", timeout=None))
        self.assertEqual(r.output, "x\n")
        self.assertTrue(self.sb.id.startswith("ab-"))
        self.assertEqual(self.sb.id, self.sb.hello["sandbox_id"])

    # ---- ls ----

    def test_ls(self):
        self.put("b.txt", "bb")
        self.put("a/x", "")
        r = self.twin("ls", self.d)
        self.is_a(r, "LsResult")
        self.assertEqual([(e["path"], e["is_dir"]) for e in r.entries],
                         [(self.d + "/a", True), (self.d + "/b.txt", False)])
        self.assertEqual(r.entries[1]["size"], 2)
        self.assertRegex(r.entries[1]["modified_at"], r"^\d{4}-\d\d-\d\dT")
        for bad in (self.d + "/none", self.d + "/b.txt"):
            r = self.sb.ls(bad)
            self.is_a(r, "LsResult")
            self.assertIsNone(r.entries)
            self.assertIn(bad, r.error)

    # ---- read ----

    def test_read_windows(self):
        self.put("f.txt", "".join("line %d\n" % i for i in range(1, 11)))
        f = self.d + "/f.txt"
        r = self.twin("read", f)
        self.is_a(r, "ReadResult")
        self.assertEqual(r.file_data, {"content": "\n".join("line %d" % i for i in range(1, 11)),
                                       "encoding": "utf-8"})
        self.assertEqual((r.total_lines, r.start_line, r.end_line, r.next_offset),
                         (10, 1, 10, None))
        r = self.twin("read", f, 2, 3)  # lines 3 to 5, 1-based
        self.assertEqual(r.file_data["content"], "line 3\nline 4\nline 5")
        self.assertEqual((r.start_line, r.end_line, r.next_offset), (3, 5, 5))
        r = self.sb.read(f, -7, 1)  # a negative offset reads from the start
        self.assertEqual((r.file_data["content"], r.start_line), ("line 1", 1))
        for limit in (0, -3):  # nothing asked: the file is not looked into
            r = self.sb.read(f, 0, limit)
            self.assertEqual((r.error, r.file_data["content"], r.no_lines_requested),
                             (None, "", True))
            self.assertIsNone(r.start_line)
        r = self.sb.read(f, 10)
        self.assertIn("exceeds file length (10 lines)", r.error)
        self.assertIsNone(r.file_data)

    def test_read_edge_cases(self):
        self.put("empty", "")
        r = self.twin("read", self.d + "/empty")
        self.assertEqual((r.error, r.file_data),
                         (None, {"content": "System reminder: File exists but has empty contents", "encoding": "utf-8"}))
        self.assertEqual((r.start_line, r.end_line, r.total_lines), (None, None, None))
        self.assertFalse(r.no_lines_requested)
        self.put("crlf", "a\r\nb\r\n")
        self.assertEqual(self.sb.read(self.d + "/crlf").file_data["content"], "a\nb")
        blob = bytes(range(256)) * 4
        self.put("blob.bin", blob)
        r = self.sb.read(self.d + "/blob.bin")
        self.assertEqual(r.file_data["encoding"], "base64")
        self.assertEqual(base64.b64decode(r.file_data["content"]), blob)
        self.assertIsNone(r.start_line)
        self.put("pic.png", b"not really a png, but text")  # by extension: whole, base64
        r = self.sb.read(self.d + "/pic.png", 5, 1)
        self.assertEqual((r.file_data["encoding"], base64.b64decode(r.file_data["content"])),
                         ("base64", b"not really a png, but text"))
        r = self.sb.read(self.d + "/none")
        self.is_a(r, "ReadResult")
        self.assertEqual(r.error, "File '%s/none' not found" % self.d)
        self.assertIsNone(r.file_data)
        self.assertIsNotNone(self.sb.read(self.d + "/none.png").error)
        self.put("huge.png", b"\0" * ((6 << 20) + 1))  # over what a binary read returns
        r = self.sb.read(self.d + "/huge.png")
        self.assertIn("6291457 bytes", r.error)
        self.assertIsNone(r.file_data)

    # ---- write, edit, delete ----

    def test_write_overwrites_and_makes_parents(self):
        f = self.d + "/deep/er/w.txt"
        r = self.twin("write", f, "one\n")
        self.is_a(r, "WriteResult")
        self.assertEqual((r.error, r.path), (None, f))
        self.sb.write(f, "two\n")
        with open(os.path.join(self.host, "deep/er/w.txt")) as h:
            self.assertEqual(h.read(), "two\n")
        r = self.sb.write("/skills/SKILL.md", "x")
        self.is_a(r, "WriteResult")
        self.assertIsNotNone(r.error)
        self.assertIsNone(r.path)
        big = "0123456789abcde\n" * (1 << 17)  # 2 MiB: moves as chunks
        self.assertIsNone(self.sb.write(f, big).error)
        self.assertEqual(os.path.getsize(os.path.join(self.host, "deep/er/w.txt")), 2 << 20)

    def test_edit(self):
        f = self.d + "/e.py"
        self.put("e.py", "a = 1\nb = 1\n")
        r = self.sb.edit(f, "a = 1", "a = 2")
        self.is_a(r, "EditResult")
        self.assertEqual((r.error, r.path, r.occurrences), (None, f, 1))
        r = self.sb.edit(f, "= 1", "= 3")
        self.assertEqual((r.error, r.occurrences), (None, 1))
        r = self.sb.edit(f, "zzz", "y")
        self.assertIn("not found", r.error)
        self.assertIsNone(r.path)
        self.assertIn("appears multiple times (2)", self.sb.edit(f, "= ", "== ").error)
        r = asyncio.run(self.sb.aedit(f, "= ", "== ", replace_all=True))
        self.assertEqual((r.error, r.occurrences), (None, 2))
        self.assertEqual(self.sb.read(f).file_data["content"], "a == 2\nb == 3")
        self.assertEqual(self.sb.edit(self.d + "/none", "a", "b").error,
                         "Error: File '%s/none' not found" % self.d)
        # read shows CR LF lines as LF: an edit of what it showed keeps the CR LF
        self.put("crlf.txt", "one\r\ntwo\r\nthree\r\n")
        r = self.sb.edit(self.d + "/crlf.txt", "one\ntwo\n", "1\n2\n")
        self.assertEqual((r.error, r.occurrences), (None, 1))
        with open(os.path.join(self.host, "crlf.txt"), "rb") as h:
            self.assertEqual(h.read(), b"1\r\n2\r\nthree\r\n")

    def test_delete_is_recursive(self):
        self.put("t/a/b/c.txt", "c")
        self.put("t/d.txt", "d")
        r = self.sb.delete(self.d + "/t")
        self.is_a(r, "DeleteResult")
        self.assertEqual((r.error, r.path), (None, self.d + "/t"))
        self.assertFalse(os.path.exists(os.path.join(self.host, "t")))
        self.put("f", "f")
        r = asyncio.run(self.sb.adelete(self.d + "/f"))
        self.assertEqual(r.path, self.d + "/f")
        r = self.sb.delete(self.d + "/none")
        self.assertIsNotNone(r.error)
        self.assertIsNone(r.path)

    # ---- glob, grep ----

    def test_glob(self):
        for p in ("top.py", "src/app/main.py", "src/app/README.md", ".github/ci.yml",
                  "src/notes.txt", ".env", "src/.hidden.py"):
            self.put(p, "x")
        os.makedirs(os.path.join(self.host, "pkg.py"))  # a directory is never matched

        def paths(r):
            return [m["path"][len(self.d) + 1:] for m in r.matches]

        r = self.twin("glob", "*.py", self.d)
        self.is_a(r, "GlobResult")
        self.assertEqual(paths(r), ["src/app/main.py", "top.py"])  # any depth, files only
        self.assertEqual(paths(self.sb.glob("/*.py", self.d)), ["top.py"])  # anchored
        self.assertEqual(paths(self.sb.glob("src/**/*.py", self.d)), ["src/app/main.py"])
        self.assertEqual(paths(self.sb.glob("*.yml", self.d)), [".github/ci.yml"])
        # a dot only where the pattern has one
        self.assertEqual(paths(self.sb.glob("**/*.yml", self.d)), [])
        self.assertEqual(paths(self.sb.glob(".github/*.yml", self.d)), [".github/ci.yml"])
        self.assertEqual(paths(self.sb.glob(".env", self.d)), [".env"])
        self.assertEqual(paths(self.sb.glob(".*.py", self.d)), ["src/.hidden.py"])
        self.assertNotIn(".env", paths(self.sb.glob("*", self.d)))
        self.assertEqual(paths(self.sb.glob("*.{md,txt}", self.d)),
                         ["src/app/README.md", "src/notes.txt"])
        self.assertEqual(self.sb.glob("*.none", self.d).matches, [])
        self.assertIsNotNone(self.sb.glob("*.py", self.d + "/none").error)
        self.assertEqual(self.sb.glob("*.py", self.d).truncated, False)

    def test_grep(self):
        self.put("a.py", "x = f(1)\nneedle\n")
        self.put("sub/b.py", "needle needle\nno\nneedle\n")
        self.put("sub/c.txt", "needle\n")
        r = self.twin("grep", "needle", self.d, "*.py")
        self.is_a(r, "GrepResult")
        self.assertEqual([(m["path"][len(self.d) + 1:], m["line"], m["text"]) for m in r.matches],
                         [("a.py", 2, "needle"), ("sub/b.py", 1, "needle needle"),
                          ("sub/b.py", 3, "needle")])
        self.assertFalse(r.truncated)
        self.assertEqual(len(self.sb.grep("f(1)", self.d).matches), 1)  # literal
        self.assertEqual(len(self.sb.grep("needle", self.d, "/*.py").matches), 1)  # anchored
        r = self.sb.grep("needle", self.d, max_count=4)  # exactly all: not truncated
        self.assertEqual((len(r.matches), r.truncated), (4, False))
        r = asyncio.run(self.sb.agrep("needle", self.d, max_count=2))
        self.assertEqual((len(r.matches), r.truncated), (2, True))
        r = self.sb.grep("needle", self.d + "/none")
        self.assertIsNotNone(r.error)

    def test_grep_without_a_cap_returns_every_match(self):
        self.put("many.txt", "hit\n" * 12345)  # more than two pages
        r = self.sb.grep("hit", self.d, max_count=None)
        self.assertEqual((len(r.matches), r.truncated), (12345, False))
        self.assertEqual([m["line"] for m in r.matches], list(range(1, 12346)))

    # ---- upload_files, download_files ----

    def test_upload_and_download_partial_success_in_order(self):
        self.put("u/first", "")  # uploads run at once: the directory is there before
        up = self.twin("upload_files", [(self.d + "/u/ok.bin", b"\0\1\2"),
                                        ("/skills/new", b"no"),
                                        (self.d, b"a directory"),
                                        (self.d + "/../x", b"dots"),
                                        (self.d + "/u/two", b"2")])
        for r in up:
            self.is_a(r, "FileUploadResponse")
        self.assertEqual([r.error for r in up],
                         [None, "permission_denied", "is_directory", "invalid_path", None])
        self.assertEqual(up[1].path, "/skills/new")
        down = self.twin("download_files", [self.d + "/u/ok.bin", self.d + "/u/none",
                                            self.d + "/u", "bad\0path", self.d + "/u/two"])
        for r in down:
            self.is_a(r, "FileDownloadResponse")
        self.assertEqual([(r.content, r.error) for r in down],
                         [(b"\0\1\2", None), (None, "file_not_found"), (None, "is_directory"),
                          (None, "invalid_path"), (b"2", None)])

    # ---- the older names ----

    def test_older_names(self):
        self.put("o/one.py", "needle\n")
        self.assertEqual(self.twin("ls_info", self.d + "/o"), self.sb.ls(self.d + "/o").entries)
        self.assertEqual(self.sb.ls_info(self.d + "/none"), [])
        self.assertEqual([m["path"] for m in self.twin("glob_info", "*.py", self.d)],
                         [self.d + "/o/one.py"])
        self.assertEqual(self.twin("grep_raw", "needle", self.d)[0]["line"], 1)
        self.assertIsInstance(self.sb.grep_raw("needle", self.d + "/none"), str)
        self.assertEqual(self.twin("read_text", self.d + "/o/one.py"), "     1\tneedle")
        self.assertTrue(self.sb.read_text(self.d + "/none").startswith("Error: "))


class OwnClasses(Semantics, unittest.TestCase):
    """deepagents not installed: agentbox's structural copies."""

    classes = agentbox

    def test_without_deepagents(self):
        self.assertFalse(agentbox.DEEPAGENTS)
        self.assertIs(type(self.sb).__mro__[1], agentbox.SandboxBackendProtocol)


class WithDeepagents(Semantics, unittest.TestCase):
    """deepagents (the stand-in) importable: its classes."""

    @classmethod
    def setUpClass(cls):
        cls.ab, cls.classes = agentbox_with_standin()
        super().setUpClass()

    def test_is_a_deepagents_sandbox_backend(self):
        self.assertTrue(self.ab.DEEPAGENTS)
        self.assertIsInstance(self.sb, self.classes.SandboxBackendProtocol)
        self.assertIsInstance(self.sb, self.classes.BackendProtocol)
        self.assertTrue(issubclass(self.ab.LegacySandbox, self.classes.SandboxBackendProtocol))
        self.assertIsNot(self.ab.ReadResult, agentbox.ReadResult)


class Legacy(unittest.TestCase):
    def test_legacy_read_returns_numbered_text(self):
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        with sandbox(ws, cls="LegacySandbox") as sb:
            sb.write("/workspace/n.txt", "a\nb\nc\n")
            self.assertEqual(sb.read("/workspace/n.txt", 1, 1), "     2\tb")
            self.assertEqual(asyncio.run(sb.aread("/workspace/n.txt")),
                             "     1\ta\n     2\tb\n     3\tc")
            sb.write("/workspace/e.txt", "")
            self.assertEqual(sb.read("/workspace/e.txt"),
                             "System reminder: File exists but has empty contents")


if __name__ == "__main__":
    unittest.main()
