"""Streamed output (exec with "stream": true, docs/protocol.md): byte-exact
text and binary, and backpressure: a client that does not read makes the
command wait on its full pipe, never the server grow; cancel, timeouts and
other commands go on meanwhile. Runs as root and as an unprivileged user.
AGENTBOX_BIN names the binary."""

import base64
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fileops import BIN, RECV_TIMEOUT, end_server, make_dir  # noqa: E402

SANITIZED = os.environ.get("AGENTBOX_SANITIZED") == "1"
MiB = 1 << 20

# Written into the workspace and run inside: CHUNKS times 64 KiB of text to
# stdout (0: for ever), the count of chunks written so far in progress.
CHUNK = 64 << 10
WRITER = """#!/usr/bin/python3
import os
import sys
chunk = b"0123456789abcdef" * 4095 + b"0123456789abcde\\n"
total, n = int(sys.argv[1]), 0
while total == 0 or n < total:
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()
    n += 1
    with open("/workspace/progress.tmp", "w") as f:
        f.write(str(n))
    os.rename("/workspace/progress.tmp", "/workspace/progress")
open("/workspace/finished", "w").close()
"""
WRITER_NAME = "blocked-writer"  # its comm, to find it among the server's processes


class RawServer:
    """`agentbox serve` whose output the test reads only when it says so:
    until then the server's replies stay in the pipe (and in the server)."""

    def __init__(self, ws, env=None, args=()):
        self.p = subprocess.Popen([BIN, "serve", "--workspace", ws, *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.buf = b""
        self.hello = self.recv()

    def send(self, **req):
        self.p.stdin.write((json.dumps(req) + "\n").encode())
        self.p.stdin.flush()

    def recv(self):
        """The next message; fails (never hangs) if none comes in time."""
        deadline = time.monotonic() + RECV_TIMEOUT
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                raise AssertionError("no message from the server in %d s" % RECV_TIMEOUT)
            got = os.read(self.p.stdout.fileno(), 1 << 20)
            if not got:
                raise AssertionError("the server ended")
            self.buf += got
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def until_result(self, rid):
        """(the data of rid's output events, by stream; its result)."""
        data = {}
        while True:
            m = self.recv()
            if m.get("id") != rid:
                continue
            if m["type"] != "output":
                return data, m
            data.setdefault(m["stream"], []).append(m)

    def hwm_kib(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        raise KeyError("VmHWM")

    def cpu_s(self):
        """The server's CPU time so far (user and system), in seconds."""
        with open("/proc/%d/stat" % self.p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def descendants(self):
        """comm of every process below the server, by pid (/proc/*/stat, which
        anyone may read, even of the sandbox's non-dumpable processes)."""
        parent, comm = {}, {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            name, rest = st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:]
            parent[int(d)], comm[int(d)] = int(rest.split()[1]), name
        out = {}
        for pid in parent:
            p = pid
            while p in parent and p > 1:
                p = parent[p]
                if p == self.p.pid:
                    out[pid] = comm[pid]
                    break
        return out

    def close(self):
        end_server(self.p)


class Base(unittest.TestCase):
    SERVE_ARGS = ()

    def setUp(self):
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)
        env = dict(os.environ)
        if SANITIZED:  # without the memory ASan keeps for itself (test_serve.py)
            env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                                   ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
                                   ":detect_stack_use_after_return=0")
        try:
            self.sv = RawServer(self.ws, env, self.SERVE_ARGS)
        except AssertionError as e:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                raise
            self.skipTest("agentbox cannot run here: %s" % e)
        self.addCleanup(self.sv.close)
        path = os.path.join(self.ws, WRITER_NAME)
        with open(path, "w") as f:
            f.write(WRITER)
        os.chmod(path, 0o755)

    def progress(self):
        try:
            with open(os.path.join(self.ws, "progress")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return 0

    def wait_blocked(self):
        """The writer's chunk count once it has stopped moving (for a second,
        polled): it is blocked on its full pipe. Fails if it never starts."""
        deadline = time.monotonic() + RECV_TIMEOUT
        last, same = -1, 0
        while same < 4:
            self.assertLess(time.monotonic(), deadline, "the writer never settled")
            time.sleep(0.25)
            n = self.progress()
            same = same + 1 if n == last and n > 0 else 0
            last = n
        return last

    def wait_gone(self, comm):
        deadline = time.monotonic() + RECV_TIMEOUT
        while comm in self.sv.descendants().values():
            self.assertLess(time.monotonic(), deadline, "%s still runs" % comm)
            time.sleep(0.1)


class ExactOutput(Base):
    def test_text_with_characters_cut_between_reads_comes_whole(self):
        # a 3 MiB file of 1- to 4-byte characters (reads cut them anywhere),
        # then a euro sign written a byte at a time
        text = ("a\u00e9\u20ac\U0001F600\n" * 300000)[:3 * MiB]
        with open(os.path.join(self.ws, "chars"), "w", encoding="utf-8") as f:
            f.write(text)
        cmd = ("cat chars; printf '\\342'; sleep 0.2; printf '\\202'; sleep 0.2;"
               " printf '\\254 and a cut one: \\360\\237'")
        self.sv.send(op="exec", id="t", command=cmd, stream=True, max_output=1024)
        data, res = self.sv.until_result("t")
        self.assertEqual(res["exit_code"], 0, res)
        self.assertTrue(all(m["encoding"] == "utf-8" for m in data["stdout"]))
        got = "".join(m["data"] for m in data["stdout"])
        # the cut sequence at the very end is one or more U+FFFD, as in
        # the result (lossy UTF-8, docs/protocol.md)
        self.assertEqual(got, text + "\u20ac and a cut one: \ufffd\ufffd")
        self.assertEqual(res["stdout_bytes"], len(got.encode()) - 6 + 2)
        self.assertTrue(res["stdout"].endswith("\u20ac and a cut one: \ufffd\ufffd"))

    def test_binary_round_trips_as_base64(self):
        blob = os.urandom(3 * MiB + 1)
        with open(os.path.join(self.ws, "blob"), "wb") as f:
            f.write(blob)
        self.sv.send(op="exec", id="b", command="cat blob; cat blob >&2", stream=True,
                     encoding="base64")
        data, res = self.sv.until_result("b")
        self.assertEqual(res["exit_code"], 0, res)
        for name in ("stdout", "stderr"):
            got = b"".join(base64.b64decode(m["data"]) for m in data[name])
            self.assertEqual(hashlib.sha256(got).digest(), hashlib.sha256(blob).digest(), name)
            self.assertTrue(all(m["encoding"] == "base64" for m in data[name]))
            # each chunk's offset: the stream's bytes before it
            lens = [len(base64.b64decode(m["data"])) for m in data[name]]
            self.assertEqual([m["offset"] for m in data[name]],
                             [sum(lens[:i]) for i in range(len(lens))], name)
        self.assertEqual((res["stdout_bytes"], res["stderr_bytes"]), (len(blob), len(blob)))

    def test_result_output_is_what_was_captured(self):
        # a result's output is escaped as it is sent (front_out.c): big and
        # full of what JSON must escape, it still comes exact
        self.sv.send(op="exec", id="r", command="head -c 300000 /dev/zero; printf 'x\\377\"'",
                     max_output=1 << 20)
        _, res = self.sv.until_result("r")
        self.assertEqual(res["stdout"], "\0" * 300000 + "x\ufffd\"")
        self.sv.send(op="exec", id="r64", command="head -c 300000 /dev/urandom | tee blob",
                     encoding="base64")
        _, res = self.sv.until_result("r64")
        with open(os.path.join(self.ws, "blob"), "rb") as f:
            self.assertEqual(base64.b64decode(res["stdout"]), f.read())


class Backpressure(Base):
    # What may sit between the writer and the client while neither moves:
    # the command's pipe (256 KiB), the server's buffer (about 0.3 MiB),
    # the pipe to the client (256 KiB) and the chunk being written: about
    # 1 MiB; 16 MiB leaves room, however much the writer has to say.
    MAX_IN_FLIGHT = 16 * MiB
    # The server's peak RSS: ~2.3 MiB idle (mostly shared libraries), 1 MiB
    # of capture, its buffers; docs/performance.md says what it is. 8 MiB
    # leaves room for other libc builds, and is far below what 200 MiB
    # queued would take.
    MAX_HWM_KIB = 8 << 10

    def test_a_client_that_does_not_read_stops_the_command_not_the_server(self):
        total = 200 * MiB // CHUNK
        self.sv.send(op="exec", id="w", command="./%s %d" % (WRITER_NAME, total), stream=True)
        n = self.wait_blocked()
        self.assertLess(n * CHUNK, self.MAX_IN_FLIGHT, "written while the client read nothing")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "finished")))
        self.assertIn(WRITER_NAME, self.sv.descendants().values())
        if not SANITIZED:  # ASan's shadow memory is counted too
            self.assertLessEqual(self.sv.hwm_kib(), self.MAX_HWM_KIB)
        # another command runs and ends meanwhile (its result waits too)
        self.sv.send(op="exec", id="other", command="echo hi > other")
        deadline = time.monotonic() + RECV_TIMEOUT
        while not os.path.exists(os.path.join(self.ws, "other")):
            self.assertLess(time.monotonic(), deadline, "the other command did not run")
            time.sleep(0.1)
        # now read: everything comes, exact, and the writer finishes
        data, res = self.sv.until_result("w")
        self.assertEqual(res["exit_code"], 0, res)
        got = "".join(m["data"] for m in data["stdout"])
        self.assertEqual(len(got), 200 * MiB)
        self.assertEqual(got[:32], "0123456789abcdef" * 2)
        self.assertEqual(got.count("\n"), total)
        self.assertTrue(os.path.exists(os.path.join(self.ws, "finished")))
        if not SANITIZED:
            self.assertLessEqual(self.sv.hwm_kib(), self.MAX_HWM_KIB)

    def test_cancel_ends_a_command_blocked_on_its_output(self):
        self.sv.send(op="exec", id="w", command="./%s 0" % WRITER_NAME, stream=True)
        self.wait_blocked()
        self.sv.send(op="cancel", id="c", target="w")
        self.wait_gone(WRITER_NAME)  # while the client still reads nothing
        got = {}
        while len(got) < 2:
            m = self.sv.recv()
            if m["type"] != "output":
                got[m["id"]] = m
        self.assertEqual(got["c"]["type"], "ok")
        self.assertEqual((got["w"]["type"], got["w"]["cancelled"]), ("result", True), got["w"])

    def test_a_timeout_ends_a_command_blocked_on_its_output(self):
        self.sv.send(op="exec", id="w", command="./%s 0" % WRITER_NAME, stream=True,
                     timeout=2)
        self.wait_blocked()
        self.wait_gone(WRITER_NAME)  # nothing read: the deadline alone ends it
        _, res = self.sv.until_result("w")
        self.assertEqual((res["timed_out"], res["exit_code"]), (True, 124), res)


class IdleWhileUnread(Base):
    """While a command's output waits for the client, the server sleeps: a
    command that ended (or was ended) with output still in its pipe costs
    no CPU however long the client takes to read it."""

    IDLE = 3.0  # seconds the client reads nothing
    MAX_CPU = 0.5  # the server's CPU time meanwhile (a spin takes all of it)

    def assert_idle(self):
        before = self.sv.cpu_s()
        time.sleep(self.IDLE)
        used = self.sv.cpu_s() - before
        self.assertLess(used, self.MAX_CPU, "CPU seconds the server used in %g s" % self.IDLE)

    def finish_with_unread_output(self, **req):
        # NUL bytes are escaped six times their size: the reply buffer
        # fills (output pauses) long before the command has written it all
        size = 150000
        self.sv.send(op="exec", id="w", stream=True, max_output=1024,
                     command="head -c %d /dev/zero; touch finished" % size, **req)
        deadline = time.monotonic() + RECV_TIMEOUT
        while not os.path.exists(os.path.join(self.ws, "finished")):
            self.assertLess(time.monotonic(), deadline, "the command did not end")
            time.sleep(0.1)
        self.assert_idle()
        data, res = self.sv.until_result("w")
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual("".join(m["data"] for m in data["stdout"]), "\0" * size)
        self.assertFalse(res["timed_out"], res)

    def test_a_finished_command_with_unread_output(self):
        self.finish_with_unread_output()

    def test_a_timeout_that_passes_after_the_command_ended(self):
        # the command ended well within it; its result waits for the client
        self.finish_with_unread_output(timeout=1)

    def test_a_cancelled_command_with_unread_output(self):
        self.sv.send(op="exec", id="w", command="./%s 0" % WRITER_NAME, stream=True)
        self.wait_blocked()
        self.sv.send(op="cancel", id="c", target="w")
        self.wait_gone(WRITER_NAME)
        self.assert_idle()
        _, res = self.sv.until_result("w")
        self.assertTrue(res["cancelled"], res)


class QueuedBehindResults(Base):
    # as many commands as results may wait to be written (serve.c's
    # MAX_DEFERRED), at once
    N = 16
    SERVE_ARGS = ("--max-concurrent", str(N))

    def wait_files(self, names):
        deadline = time.monotonic() + RECV_TIMEOUT
        while not all(os.path.exists(os.path.join(self.ws, n)) for n in names):
            self.assertLess(time.monotonic(), deadline, "the commands did not get there")
            time.sleep(0.05)

    def test_a_queued_command_starts_once_the_results_ahead_are_written(self):
        # sixteen results with big outputs in one wake-up of the server
        # (held still while their commands end): the most that may wait to
        # be written, so the next command is queued until they are; then
        # they are, at once, and nothing more comes to wake the server
        for i in range(self.N):
            self.sv.send(op="exec", id=i, command="touch started%d; while [ ! -e go ]; do "
                         "sleep 0.01; done; head -c 8000 /dev/zero | tr '\\0' a; touch done%d"
                         % (i, i))
        self.sv.send(op="exec", id="queued", command="echo last")
        self.wait_files(["started%d" % i for i in range(self.N)])
        os.kill(self.sv.p.pid, signal.SIGSTOP)
        self.addCleanup(os.kill, self.sv.p.pid, signal.SIGCONT)
        open(os.path.join(self.ws, "go"), "w").close()
        self.wait_files(["done%d" % i for i in range(self.N)])
        time.sleep(0.5)  # their shims say so
        os.kill(self.sv.p.pid, signal.SIGCONT)
        results = {}
        while len(results) < self.N + 1:
            m = self.sv.recv()
            if m["type"] != "output":
                results[m["id"]] = m
        self.assertEqual(results["queued"]["stdout"], "last\n", results["queued"])
        self.assertEqual(results[0]["stdout"], "a" * 8000)


class EndWithAClientThatDoesNotRead(Base):
    """The server writes its last replies before it exits, but a signal
    ends it even when its client reads none of them."""

    def result_waits(self):
        # a result of 4 MB the client does not read: the server holds it
        size = 4000000
        self.sv.send(op="exec", id="big", max_output=size,
                     command="head -c %d /dev/zero | tr '\\0' a; touch done" % size)
        deadline = time.monotonic() + RECV_TIMEOUT
        while not os.path.exists(os.path.join(self.ws, "done")):
            self.assertLess(time.monotonic(), deadline, "the command did not end")
            time.sleep(0.05)
        time.sleep(0.5)  # its result is made

    def assert_ends_on(self, sig):
        self.sv.p.send_signal(sig)
        try:
            self.sv.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.fail("the server did not end on signal %d in 10 s" % sig)

    def test_a_signal_ends_the_last_write(self):
        self.result_waits()
        self.sv.send(op="shutdown", id="bye")
        # the sandbox is gone: the server only writes now
        deadline = time.monotonic() + RECV_TIMEOUT
        while self.sv.descendants():
            self.assertLess(time.monotonic(), deadline, "the session did not end")
            time.sleep(0.1)
        time.sleep(0.5)
        self.assertIsNone(self.sv.p.poll(), "the server ended without writing")
        self.assert_ends_on(signal.SIGTERM)

    def test_a_signal_ends_the_session_and_what_it_has_to_write(self):
        self.result_waits()
        self.assert_ends_on(signal.SIGINT)


if __name__ == "__main__":
    unittest.main()
