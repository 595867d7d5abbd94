"""Host files (docs/protocol.md, "Host files"): upload "from" and download
"to" of agentbox serve, the bytes through a pipe instead of base64 lines.
Run as root and as an unprivileged user. AGENTBOX_BIN names the binary."""

import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import unittest

from test_fileops import Server

MIB = 1 << 20


class HostFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="agentbox-hostfiles-")
        os.chmod(cls.tmp, 0o700)
        cls.ws = os.path.join(cls.tmp, "ws")
        cls.host = os.path.join(cls.tmp, "host")
        os.mkdir(cls.ws)
        os.mkdir(cls.host)
        try:
            cls.sv = Server(cls.ws, "--tmpfs-size", "1M")
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

    def hostfile(self, name, data):
        p = os.path.join(self.host, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def leftovers(self, d):
        return [n for n in os.listdir(d) if ".agentbox-" in n]

    def test_feature_in_hello(self):
        self.assertIn("host_files", self.sv.hello["features"])

    def test_round_trip(self):
        data = os.urandom(9 * MIB + 123)
        src = self.hostfile("up.bin", data)
        m = self.call(op="upload", path="rt/big.bin", **{"from": src})
        self.assertEqual(m["type"], "result", m)
        self.assertEqual((m["op"], m["bytes"], m["size"], m["created"]),
                         ("upload", len(data), len(data), True))
        with open(os.path.join(self.ws, "rt", "big.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        dst = os.path.join(self.host, "down.bin")
        m = self.call(op="download", path="rt/big.bin", to=dst)
        self.assertEqual(m["type"], "result", m)
        self.assertEqual((m["op"], m["bytes"], m["size"]), ("download", len(data), len(data)))
        self.assertNotIn("data", m)
        with open(dst, "rb") as f:
            self.assertEqual(f.read(), data)
        mask = os.umask(0)
        os.umask(mask)
        self.assertEqual(stat.S_IMODE(os.stat(dst).st_mode), 0o666 & ~mask)
        self.assertEqual(self.leftovers(self.host) + self.leftovers(os.path.join(self.ws, "rt")),
                         [])
        # over existing files both ways (swapped in, the old one removed)
        data2 = os.urandom(3 * MIB)
        m = self.call(op="upload", path="rt/big.bin", **{"from": self.hostfile("up2.bin", data2)})
        self.assertEqual((m["type"], m["created"]), ("result", False), m)
        m = self.call(op="download", path="rt/big.bin", to=dst)
        self.assertEqual(m["type"], "result", m)
        with open(dst, "rb") as f:
            self.assertEqual(f.read(), data2)
        with open(os.path.join(self.ws, "rt", "big.bin"), "rb") as f:
            self.assertEqual(f.read(), data2)
        self.assertEqual(self.leftovers(self.host) + self.leftovers(os.path.join(self.ws, "rt")),
                         [])
        # the JSON path still reads what the bulk path wrote
        m = self.call(op="download", path="rt/big.bin", offset=0, length=16)
        self.assertEqual(m["type"], "result", m)

    def test_bad_host_paths_name_the_field(self):
        src = self.hostfile("some.bin", b"x")
        cases = [
            (dict(op="upload", path="a", **{"from": "relative"}), "invalid_path", "'from'"),
            (dict(op="upload", path="a", **{"from": self.host + "/none"}), "file_not_found",
             "'from'"),
            (dict(op="upload", path="a", **{"from": self.host}), "is_directory", "'from'"),
            (dict(op="upload", path="a", **{"from": "/dev/null"}), "invalid_request",
             "'from'"),
            (dict(op="upload", path="a", data="", **{"from": src}), "invalid_request",
             "'data' does not go with 'from'"),
            (dict(op="download", path="a", to=self.host + "/missing/x"), "file_not_found",
             "'to'"),
            (dict(op="download", path="a", to=self.host), "is_directory", "'to'"),
            (dict(op="download", path="a", to="x"), "invalid_path", "'to'"),
            (dict(op="download", path="a", offset=0, to=self.host + "/x"), "invalid_request",
             "'offset' does not go with 'to'"),
        ]
        for req, code, text in cases:
            m = self.call(**req)
            self.assertEqual((m["type"], m["code"]), ("error", code), (req, m))
            self.assertIn(text, m["message"], req)
        self.assertEqual(self.leftovers(self.host), [])

    def test_a_symlink_as_from_or_to_is_refused_not_followed(self):
        # a command plants links in its workspace, where the client names
        # "from" and "to": to a host secret to read, a host file to replace
        secret = self.hostfile("secret.key", b"do not upload\n")
        target = self.hostfile("rc.sh", b"the caller's own\n")
        self.call(op="write", path="data.txt", content="inside\n")
        m = self.call(op="exec", command="ln -s %s from.link && ln -s %s to.link && "
                      "ln -s %s todir.link" % (secret, target, self.host))
        self.assertEqual(m["exit_code"], 0, m)
        for req, field, link in (
                (dict(op="upload", path="got.txt", **{"from": self.ws + "/from.link"}),
                 "from", "from.link"),
                (dict(op="download", path="data.txt", to=self.ws + "/to.link"), "to",
                 "to.link"),
                (dict(op="download", path="data.txt", to=self.ws + "/todir.link"), "to",
                 "todir.link")):
            m = self.call(**req)
            self.assertEqual((m["type"], m["code"]), ("error", "invalid_path"), (req, m))
            self.assertIn("'%s' %s/%s is a symbolic link" % (field, self.ws, link),
                          m["message"])
            self.assertTrue(os.path.islink(os.path.join(self.ws, link)), link)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "got.txt")))
        with open(target, "rb") as f:
            self.assertEqual(f.read(), b"the caller's own\n")
        self.assertEqual(self.leftovers(self.ws) + self.leftovers(self.host), [])
        for n in ("from.link", "to.link", "todir.link", "data.txt"):
            os.unlink(os.path.join(self.ws, n))

    def test_download_refuses_what_is_not_a_regular_file(self):
        d = os.path.join(self.ws, "odd")
        os.mkdir(d)
        os.mkfifo(os.path.join(d, "fifo"))
        with open(os.path.join(d, "real"), "w") as f:
            f.write("real")
        os.symlink("real", os.path.join(d, "link"))
        dst = os.path.join(self.host, "odd.out")
        for name, code in (("fifo", "invalid_path"), ("link", "invalid_path"),
                           ("", "is_directory"), ("none", "file_not_found")):
            t = time.monotonic()
            m = self.call(op="download", path="odd/" + name if name else "odd", to=dst)
            self.assertLess(time.monotonic() - t, 5, name)
            self.assertEqual((m["type"], m["code"]), ("error", code), (name, m))
        self.assertFalse(os.path.exists(dst))
        self.assertEqual(self.leftovers(self.host), [])

    def test_short_source_leaves_destination(self):
        # a source shorter than its size at open: a sysfs file says 4096
        # bytes and holds a few (as a file truncated while copied would)
        short = "/sys/kernel/mm/transparent_hugepage/enabled"
        try:
            with open(short, "rb") as f:
                shorter = os.fstat(f.fileno()).st_size > len(f.read())
        except OSError:
            shorter = False
        if not shorter:
            self.skipTest("no sysfs file shorter than its size here")
        with open(os.path.join(self.ws, "keep.txt"), "w") as f:
            f.write("previous")
        m = self.call(op="upload", path="keep.txt", **{"from": short})
        self.assertEqual((m["type"], m["code"]), ("error", "io_error"), m)
        self.assertIn("left as it was", m["message"])
        with open(os.path.join(self.ws, "keep.txt")) as f:
            self.assertEqual(f.read(), "previous")
        self.assertEqual(self.leftovers(self.ws), [])

    def test_full_disk_and_overwrite_false_leave_destination(self):
        src = self.hostfile("two.bin", os.urandom(2 * MIB))
        self.assertEqual(self.call(op="write", path="/tmp/keep", content="previous")["type"],
                         "result")
        m = self.call(op="upload", path="/tmp/keep", **{"from": src})  # /tmp is 1 MiB
        self.assertEqual((m["type"], m["code"]), ("error", "no_space"), m)
        m = self.call(op="upload", path="/tmp/keep", overwrite=False, **{"from": src})
        self.assertEqual((m["type"], m["code"]), ("error", "exists"), m)
        m = self.call(op="read", path="/tmp/keep")
        self.assertEqual(m["content"], "previous")
        m = self.call(op="ls", path="/tmp")
        self.assertEqual([e["path"] for e in m["entries"]], ["/tmp/keep"])

    def test_download_keeps_a_reserve_on_the_host_disk(self):
        # the shim says how many bytes it sends, but a command can take it
        # over: a download leaves 5 % of "to"'s file system free (2 MiB of
        # this 40 MiB tmpfs), and its temporary file is removed
        if os.geteuid() != 0:
            self.skipTest("a small file system for 'to' is a tmpfs only root may mount")
        small = tempfile.mkdtemp(prefix="agentbox-hostfiles-fs-")
        self.addCleanup(os.rmdir, small)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m,mode=0700", "agentbox-test",
                        small], check=True)
        self.addCleanup(subprocess.run, ["umount", small], check=True)
        with open(os.path.join(self.ws, "fills.bin"), "wb") as f:
            f.write(os.urandom(39 * MIB))  # fits in 40 MiB, not beside the reserve
        self.addCleanup(os.unlink, os.path.join(self.ws, "fills.bin"))
        dst = os.path.join(small, "fills.bin")
        m = self.call(op="download", path="fills.bin", to=dst)
        self.assertEqual((m["type"], m["code"]), ("error", "no_space"), m)
        self.assertIn("less than 2 MiB free", m["message"])
        self.assertEqual(os.listdir(small), [])
        st = os.statvfs(small)
        self.assertEqual(st.f_bfree, st.f_blocks)  # nothing held either
        with open(os.path.join(self.ws, "fills.bin"), "r+b") as f:
            f.truncate(30 * MIB)
        m = self.call(op="download", path="fills.bin", to=dst)
        self.assertEqual((m["type"], m["bytes"]), ("result", 30 * MIB), m)
        self.assertEqual(os.path.getsize(dst), 30 * MIB)
        os.unlink(dst)

    def test_cancelled_upload_leaves_destination(self):
        # a source that never ends (a FIFO is refused; a regular file that
        # the copier reads is not): cancel while the shim waits for bytes
        with open(os.path.join(self.ws, "cancel.txt"), "w") as f:
            f.write("previous")
        src = self.hostfile("slow.bin", os.urandom(64 * MIB))
        rid = self.sv.send(op="upload", path="cancel.txt", **{"from": src})
        self.sv.send(op="cancel", target=rid)
        got = {}
        while rid not in got:
            m = self.sv.recv()
            if m.get("id") == rid:
                got[rid] = m
        m = got[rid]
        with open(os.path.join(self.ws, "cancel.txt"), "rb") as f:
            now = f.read()
        if m["type"] == "error":
            self.assertEqual(m["code"], "cancelled", m)
        # whole or not at all, whatever the cancel met
        if now != b"previous":
            with open(src, "rb") as f:
                self.assertTrue(now == f.read(), "a partial upload replaced the file")
        self.assertEqual(self.leftovers(self.ws), [])

    def test_growing_file_is_cut_at_its_size_at_open(self):
        p = os.path.join(self.ws, "grows.bin")
        with open(p, "wb") as f:
            f.write(os.urandom(16 * MIB))
        stop = threading.Event()

        def grow():
            with open(p, "ab") as f:
                while not stop.is_set():
                    f.write(b"g" * 65536)
                    f.flush()
        t = threading.Thread(target=grow)
        t.start()
        try:
            dst = os.path.join(self.host, "grows.out")
            m = self.call(op="download", path="grows.bin", to=dst)
        finally:
            stop.set()
            t.join()
        self.assertEqual(m["type"], "result", m)
        self.assertEqual(m["bytes"], m["size"])
        self.assertEqual(os.path.getsize(dst), m["size"])
        self.assertLess(m["size"], os.path.getsize(p))
        with open(p, "rb") as a, open(dst, "rb") as b:
            self.assertEqual(a.read(m["size"]), b.read())


if __name__ == "__main__":
    unittest.main()
