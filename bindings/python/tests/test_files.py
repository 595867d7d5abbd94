"""Files of any size, where deepagents writes, and no call that hangs:
agentbox.Sandbox against the real server (AGENTBOX_BIN)."""

import asyncio
import gc
import hashlib
import os
import shutil
import threading
import time
import tracemalloc
import unittest

from agentbox import FileError, ProtocolError
from support import SANITIZED, sandbox, status, workspace

MiB = 1 << 20


def pattern(size):
    """size bytes that differ from chunk to chunk (a shifted chunk would
    show), made quickly."""
    block = os.urandom(MiB)
    return b"".join(block[i % 251:] + block[:i % 251] for i in range(size // MiB))


class Base(unittest.TestCase):
    def setUp(self):
        self.ws = workspace()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.sb = sandbox(self.ws)
        self.addCleanup(self.sb.close)

    def server_hwm_below(self, kib):
        """The server's peak RSS (the launcher: under the sanitizers its
        own memory is not the client's doing, test_serve covers it)."""
        if not SANITIZED:
            hwm = status(self.sb._s.pid, "VmHWM")
            self.assertLess(hwm, kib, "the server held %d KiB" % hwm)


class Large(Base):
    def test_10_mib_upload_and_download(self):
        data = pattern(10 * MiB)
        (up,) = self.sb.upload_files([("/workspace/ten.bin", data)])
        self.assertIsNone(up.error)
        with open(os.path.join(self.ws, "ten.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        (down,) = self.sb.download_files(["/workspace/ten.bin"])
        self.assertEqual((down.error, down.content), (None, data))

    def test_200_mib_round_trips_with_memory_bounded(self):
        size = 200 * MiB
        data = pattern(size)
        digest = hashlib.sha256(data).hexdigest()
        gc.collect()
        tracemalloc.start()
        try:
            (up,) = self.sb.upload_files([("/workspace/big.bin", data)])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertIsNone(up.error)
        # beyond the caller's buffer: a chunk's encoding at a time
        self.assertLess(peak, 48 * MiB, "upload_files held %d MiB" % (peak // MiB))
        del data
        self.assertEqual(os.path.getsize(os.path.join(self.ws, "big.bin")), size)
        host = os.path.join(self.ws, "copy.bin")
        gc.collect()
        tracemalloc.start()
        try:  # to a host file and back from it, a chunk at a time
            self.assertEqual(self.sb.download_file("/workspace/big.bin", host), size)
            self.sb.upload_file("/workspace/again.bin", host)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertLess(peak, 48 * MiB, "download_file/upload_file held %d MiB" % (peak // MiB))
        with open(host, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest)
        gc.collect()
        tracemalloc.start()
        try:
            (down,) = self.sb.download_files(["/workspace/again.bin"])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertIsNone(down.error)
        # the bytes asked for, and little more
        self.assertLess(peak, size + 64 * MiB, "download_files held %d MiB" % (peak // MiB))
        self.assertEqual(hashlib.sha256(down.content).hexdigest(), digest)
        self.server_hwm_below(96 << 10)

    def test_download_asked_ahead_follows_a_file_that_changes_size(self):
        # chunks after the first are asked for ahead at offsets the first
        # reply's size gave: a file that shrinks or grows meanwhile still
        # comes out as it is then, and no reply is left behind
        chunk = self.sb._s.max_chunk
        path = os.path.join(self.ws, "moving.bin")
        for after in (chunk + chunk // 2, 5 * chunk + 7):
            first = pattern(4 * chunk)
            with open(path, "wb") as f:
                f.write(first)
            it = self.sb._download_chunks("/workspace/moving.bin")
            got = [next(it)]
            rest = pattern(after)
            with open(path, "r+b") as f:
                f.truncate(0)
                f.write(first[:chunk] + rest[chunk:])
            got.extend(it)
            self.assertEqual(b"".join(got), first[:chunk] + rest[chunk:], after)
            self.assertEqual(self.sb.execute("echo on").output.strip(), "on")

    def test_file_errors_of_the_streaming_calls(self):
        with self.assertRaises(FileError) as cm:
            self.sb.download_file("/workspace/none", os.path.join(self.ws, "x"))
        self.assertEqual(cm.exception.code, "file_not_found")
        src = os.path.join(self.ws, "src.bin")
        with open(src, "wb") as f:
            f.write(b"x" * 10)
        with self.assertRaises(FileError) as cm:
            self.sb.upload_file("/etc/nope", src)
        self.assertEqual(cm.exception.code, "read_only")
        with open(os.devnull, "rb") as f:
            self.sb.upload_file("/workspace/empty", f)
        self.assertEqual(os.path.getsize(os.path.join(self.ws, "empty")), 0)


class HostFiles(Base):
    """upload "from" and download "to" (docs/protocol.md, "Host files")
    where the server says host_files, the JSON chunks where it does not."""

    def sent(self):
        """The requests the client sends from now on."""
        reqs, send = [], self.sb._s.send

        def spy(req, *rest, **kw):
            reqs.append(dict(req, data=rest[0]) if rest and rest[0] else dict(req))
            return send(req, *rest, **kw)
        self.sb._s.send = spy
        self.addCleanup(setattr, self.sb._s, "send", send)
        return reqs

    def without_host_files(self):
        self.sb._s.features = self.sb._s.features - {"host_files"}

    def round_trip(self, size):
        data = pattern(size) + b"tail"
        src, dst = os.path.join(self.ws, "src.bin"), os.path.join(self.ws, "dst.bin")
        with open(src, "wb") as f:
            f.write(data)
        self.sb.upload_file("/workspace/in/up.bin", src)
        with open(os.path.join(self.ws, "in", "up.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(self.sb.download_file("/workspace/in/up.bin", dst), len(data))
        with open(dst, "rb") as f:
            self.assertEqual(f.read(), data)
        (up,) = self.sb.upload_files([("/workspace/in/batch.bin", data)])
        self.assertIsNone(up.error)
        (down,) = self.sb.download_files(["/workspace/in/batch.bin"])
        self.assertEqual((down.error, down.content), (None, data))

    def test_fast_path_moves_no_bytes_in_the_protocol(self):
        self.assertIn("host_files", self.sb._s.features)
        reqs = self.sent()
        self.round_trip(8 * MiB)
        self.assertTrue(any("from" in r for r in reqs) and any("to" in r for r in reqs))
        # beside the probe of download_files (one 1 MiB chunk), no data
        self.assertEqual([r for r in reqs if "data" in r], [])
        self.assertEqual(sum(1 for r in reqs if "offset" in r), 1)
        self.assertEqual([n for n in os.listdir(os.path.join(self.ws, "in"))
                          if ".agentbox-" in n], [])

    def test_fallback_without_the_feature(self):
        self.without_host_files()
        reqs = self.sent()
        self.round_trip(5 * MiB)
        self.assertEqual([r for r in reqs if "from" in r or "to" in r], [])
        self.assertTrue(any(r["op"] == "upload" and "data" in r for r in reqs))

    def test_not_through_another_host(self):
        self.sb._detached = ("id", ["ssh", "elsewhere"], "agentbox")
        self.assertFalse(self.sb._host_files())
        self.sb._detached = None
        self.assertTrue(self.sb._host_files())

    def test_small_files_stay_on_json_and_errors_keep_their_codes(self):
        reqs = self.sent()
        (up,) = self.sb.upload_files([("/workspace/small.txt", b"small")])
        (down,) = self.sb.download_files(["/workspace/small.txt"])
        self.assertEqual((up.error, down.content), (None, b"small"))
        self.assertEqual([r for r in reqs if "from" in r or "to" in r], [])
        with self.assertRaises(FileError) as cm:
            self.sb.download_file("/workspace/none", os.path.join(self.ws, "x"))
        self.assertEqual(cm.exception.code, "file_not_found")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "x")))
        with self.assertRaises(FileError) as cm:
            self.sb.upload_file("/workspace/x", os.path.join(self.ws, "none"))
        self.assertEqual(cm.exception.code, "file_not_found")
        (down,) = self.sb.download_files(["/workspace/none"])
        self.assertEqual(down.error, "file_not_found")


class WhereDeepagentsWrites(Base):
    def test_large_tool_results_round_trip(self):
        text = "".join("result line %d\n" % i for i in range(50000))  # ~840 KB
        f = "/large_tool_results/call_abc123"
        self.assertEqual(self.sb.write(f, text).path, f)
        r = self.sb.read(f, 100, 5)
        self.assertEqual(r.file_data["content"],
                         "\n".join("result line %d" % i for i in range(100, 105)))
        self.assertEqual((r.total_lines, r.next_offset), (50000, 105))
        self.assertEqual([m["line"] for m in self.sb.grep("line 4999", "/large_tool_results")
                          .matches], [5000] + list(range(49991, 50001)))
        self.assertEqual(self.sb.execute("wc -l < %s" % f).output, "50000\n")
        h = "/conversation_history/session.md"
        self.assertIsNone(self.sb.write(h, "## turn 1\n").error)
        self.assertIsNone(self.sb.edit(h, "## turn 1\n", "## turn 1\n## turn 2\n").error)
        self.assertEqual(self.sb.download_files([h])[0].content, b"## turn 1\n## turn 2\n")
        (up,) = self.sb.upload_files([("/conversation_history/media/a.png", b"\x89PNG")])
        self.assertIsNone(up.error)
        # no writable root for commands, and nothing of it in the workspace
        self.assertNotEqual(self.sb.execute("touch /elsewhere").exit_code, 0)
        self.assertIsNotNone(self.sb.write("/elsewhere", "x").error)
        self.assertEqual(os.listdir(self.ws), [])

    def test_without_the_writable_dirs(self):
        ws = workspace()
        self.addCleanup(shutil.rmtree, ws, True)
        with sandbox(ws, writable_dirs=()) as sb:
            self.assertIn("Read-only", sb.write("/large_tool_results/x", "x").error)


class NoHang(Base):
    def test_a_line_over_max_line_is_refused_before_sending(self):
        big = "x" * (self.sb.hello["max_line"] + 1)
        t = time.monotonic()
        with self.assertRaises(ProtocolError) as cm:
            self.sb.run(big)
        self.assertEqual(cm.exception.code, "too_large")
        # no hang: encoding the line is the client's only work (1 s was
        # passed once on a loaded machine); a line sent would wait for ever
        self.assertLess(time.monotonic() - t, 10)
        self.assertEqual(self.sb.execute("echo on").output, "on\n")

    def test_the_server_answers_an_oversized_line_with_its_id(self):
        self.sb._s.max_line = 1 << 40  # as a client that did not check
        call = self.sb._s.send({"op": "exec", "command": "x" * (9 * MiB)})
        t = time.monotonic()
        with self.assertRaises(ProtocolError) as cm:
            self.sb._s.wait(call)
        self.assertLess(time.monotonic() - t, 1)
        self.assertEqual(cm.exception.code, "too_large")
        self.assertEqual(self.sb.execute("echo on").output, "on\n")

    def test_an_error_without_id_fails_every_pending_call(self):
        got = {}

        def waiting(n):
            try:
                self.sb.execute("sleep 5")
            except ProtocolError as e:
                got[n] = (e, time.monotonic())

        threads = [threading.Thread(target=waiting, args=(n,)) for n in range(3)]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 10
        while len(self.sb._s._calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(len(self.sb._s._calls), 3)
        t = time.monotonic()
        self.sb._s.write_raw(b"not json\n")  # answered invalid_json with id null
        for th in threads:
            th.join(5)
        self.assertEqual(sorted(got), [0, 1, 2])
        for e, when in got.values():
            self.assertEqual(e.code, "invalid_json")
            self.assertIn("could not put down to a request", e.message)
            self.assertLess(when - t, 1)
        self.assertEqual(self.sb.execute("echo on").output, "on\n")  # the session goes on


class Concurrency(Base):
    def test_threads_and_asyncio_at_once(self):
        errors = []

        def worker(n):
            try:
                for i in range(5):
                    p = "/workspace/t%d/%d.txt" % (n, i)
                    self.assertIsNone(self.sb.write(p, "%d-%d\n" % (n, i)).error)
                    self.assertEqual(self.sb.read(p).file_data["content"], "%d-%d" % (n, i))
                    self.assertEqual(self.sb.execute("cat %s" % p).output, "%d-%d\n" % (n, i))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        async def coroutines():
            async def one(n):
                p = "/workspace/a%d.txt" % n
                await self.sb.awrite(p, "async %d\n" % n)
                r = await self.sb.aread(p)
                e = await self.sb.aexecute("cat %s" % p)
                g = await self.sb.agrep("async %d" % n, "/workspace", "a*.txt")
                return r.file_data["content"], e.output, len(g.matches)

            return await asyncio.gather(*(one(n) for n in range(12)))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for th in threads:
            th.start()
        results = asyncio.run(coroutines())
        for th in threads:
            th.join(60)
        self.assertEqual(errors, [])
        # "async 1" is in a1.txt, a10.txt and a11.txt
        self.assertEqual(results, [("async %d" % n, "async %d\n" % n, 3 if n == 1 else 1)
                                   for n in range(12)])


if __name__ == "__main__":
    unittest.main()
