"""No output lost to a disconnect (docs/detached.md, "Nothing lost"): every
output event carries its offset in the command's stream; a client killed
in the middle of a 3,000,000-line seq loses no byte (the next client gets
the rest, and the two placed by offset are the whole output); the bound
of --keep-output holds (the launcher's memory does not grow past it) and
what it dropped is said (output_dropped); a running command's kept output
from an offset (op output); the next client takes over a running command;
a command that ended while its client was attached: what that client did
not read comes after the next hello, or when asked for (op output).
Runs as root and as an unprivileged user. AGENTBOX_BIN names the binary."""

import json
import os
import random
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_detach import BIN, Client, DetachedBase, wait_until  # noqa: E402

LINES = 3000000
WHOLE = b"".join(b"%d\n" % i for i in range(1, LINES + 1))


def place(buf, m):
    """m's data into buf at its offset; what overlaps must be the same."""
    data = m["data"].encode()
    off = m["offset"]
    if off > len(buf):
        buf.extend(b"\0" * (off - len(buf)))
    same = bytes(buf[off:off + len(data)])
    assert data.startswith(same), "chunk at %d differs from what was placed" % off
    buf[off:off + len(data)] = data


def vm_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class Replay(DetachedBase):
    def connect(self, sid):
        p = subprocess.Popen([BIN, "connect", sid], env=self.env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is not None or (p.kill(), p.wait()))
        self.assertEqual(json.loads(p.stdout.readline())["type"], "hello")
        return p

    def send(self, p, **req):
        p.stdin.write(json.dumps(req).encode() + b"\n")
        p.stdin.flush()

    def kill(self, sid, p):
        p.kill()
        p.wait()
        p.stdin.close()
        p.stdout.close()
        self.assertTrue(wait_until(lambda: self.ls()[sid]["attached"] is False, 10))

    def test_client_killed_mid_seq_loses_no_byte(self):
        sid = self.create("--keep-output", "32M")
        rnd = random.Random(os.getpid())
        for i in range(3):
            at = rnd.randrange(len(WHOLE) // 20, len(WHOLE) * 9 // 10)
            p = self.connect(sid)
            rid = "seq%d" % i
            self.send(p, op="exec", id=rid, stream=True, command="seq %d" % LINES)
            got = bytearray()
            while len(got) < at:
                m = json.loads(p.stdout.readline())
                self.assertEqual((m["type"], m["id"]), ("output", rid), m)
                place(got, m)
            first = len(got)
            self.kill(sid, p)  # mid-stream: what the bridge and the socket held goes with it
            c = Client(self.sock(sid))
            self.assertEqual(c.recv()["type"], "hello")
            m = c.recv()
            while m["type"] == "output":
                self.assertLessEqual(m["offset"], len(got), "a gap before %d" % m["offset"])
                place(got, m)
                m = c.recv()
            self.assertEqual((m["type"], m["id"], m["exit_code"]), ("result", rid, 0), m)
            self.assertEqual(len(got), len(WHOLE), "killed at %d" % first)
            self.assertTrue(got == WHOLE, "killed at %d: the bytes differ" % first)
            c.close()
            self.assertTrue(wait_until(lambda: self.ls()[sid]["attached"] is False, 10))

    def next_client_asks(self, sid, rid, got):
        """The next client asks for rid's output from where got ends (op
        output): what was kept is placed in got; its one result."""
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        c.send(op="output", id="ask", target=rid, offsets={"stdout": len(got)})
        result, answered = None, False
        while result is None or not answered:
            m = c.recv()
            if m["type"] == "output":
                self.assertEqual(m["id"], rid, m)
                self.assertLessEqual(m["offset"], len(got), "a gap before %d" % m["offset"])
                place(got, m)
            elif m["type"] == "result":
                self.assertEqual((m["id"], result), (rid, None), m)
                result = m
            else:  # ok, or invalid_request when it came after the hello already
                self.assertEqual(m["id"], "ask", m)
                self.assertIn(m["type"], ("ok", "error"), m)
                answered = True
        c.close()
        return result

    def test_ended_while_attached_its_unread_output_and_result_come_after_the_hello(self):
        # the gap of a command that ends while its client is still attached:
        # the client goes with the last output and the result unread in its
        # socket; the next client gets them after its hello, unasked
        sid = self.create()
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        whole = b"".join(b"%d\n" % i for i in range(1, 10001))
        c.send(op="exec", id="e", stream=True, command="seq 10000")
        self.assertTrue(wait_until(lambda: self.ls()[sid]["running"] == 0, 30))
        c.close()  # nothing read
        self.assertTrue(wait_until(lambda: self.ls()[sid]["attached"] is False, 10))
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        got = bytearray()
        m = c.recv()
        while m["type"] == "output":
            self.assertLessEqual(m["offset"], len(got), "a gap before %d" % m["offset"])
            place(got, m)
            m = c.recv()
        self.assertEqual((m["type"], m["id"], m["exit_code"]), ("result", "e", 0), m)
        self.assertTrue(got == whole, "%d bytes of %d" % (len(got), len(whole)))
        c.close()

    def test_killed_between_the_last_output_and_the_result(self):
        sid = self.create()
        whole = b"".join(b"%d\n" % i for i in range(1, 20001))
        for read_all in (False, True):
            p = self.connect(sid)
            self.send(p, op="exec", id="k", stream=True, command="seq 20000")
            got = bytearray()
            while len(got) < len(whole):  # every output event, not the result
                m = json.loads(p.stdout.readline())
                self.assertEqual((m["type"], m["id"]), ("output", "k"), m)
                place(got, m)
            self.assertTrue(wait_until(lambda: self.ls()[sid]["running"] == 0, 30))
            if read_all:  # the result too: asked for, it comes again
                m = json.loads(p.stdout.readline())
                self.assertEqual((m["type"], m["id"]), ("result", "k"), m)
            self.kill(sid, p)
            m = self.next_client_asks(sid, "k", got)
            self.assertEqual((m["exit_code"], m["stdout"].encode()), (0, whole))
            self.assertTrue(got == whole)

    def test_a_client_that_read_all_gets_nothing_again_unasked(self):
        sid = self.create()
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        c.send(op="exec", id="a", stream=True, command="seq 3")
        m = c.recv()
        while m["type"] == "output":
            m = c.recv()
        self.assertEqual((m["type"], m["id"]), ("result", "a"), m)
        c.close()
        r = self.ab("exec", sid, "--", "seq", "2")  # agentbox exec: read all, nothing kept
        self.assertEqual((r.returncode, r.stdout), (0, "1\n2\n"))
        self.assertTrue(wait_until(lambda: self.ls()[sid]["attached"] is False, 10))
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        c.send(op="ping", id="p")
        m = c.recv()
        self.assertEqual((m["type"], m["id"]), ("pong", "p"), m)
        c.close()
        self.assertTrue(wait_until(lambda: self.ls()[sid]["attached"] is False, 10))
        got = bytearray(b"1\n")  # a's, kept till asked: the rest, its result
        m = self.next_client_asks(sid, "a", got)
        self.assertEqual((m["stdout"], bytes(got)), ("1\n2\n3\n", b"1\n2\n3\n"))

    def test_the_bound_holds_and_what_it_dropped_is_said(self):
        if os.environ.get("AGENTBOX_SANITIZED") == "1":
            # the launcher's memory without what ASan holds for itself: its
            # quarantine of freed memory would count in VmHWM
            self.env["ASAN_OPTIONS"] = (self.env.get("ASAN_OPTIONS", "") +
                                        ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
                                        ":detect_stack_use_after_return=0")
        sid = self.create("--keep-output", "256K,1M")
        pid = self.state(sid)["pid"]
        p = self.connect(sid)
        self.send(p, op="exec", id="big", stream=True, command="seq %d" % LINES)
        m = json.loads(p.stdout.readline())
        self.assertEqual((m["type"], m["offset"]), ("output", 0), m)
        hwm = vm_hwm_kb(pid)
        self.kill(sid, p)
        self.assertTrue(wait_until(lambda: self.ls()[sid]["running"] == 0, 30))
        # 21 MiB went by while no one was attached: the launcher kept 256 KiB
        self.assertLess(vm_hwm_kb(pid) - hwm, 8 << 10)
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        m = c.recv()
        self.assertEqual((m["type"], m["id"], m["stream"]), ("output_dropped", "big", "stdout"), m)
        self.assertLess(m["offset"], m["end"])
        tail = bytearray()
        end = m["end"]
        m = c.recv()
        while m["type"] == "output":
            self.assertEqual(m["offset"], end + len(tail))
            tail += m["data"].encode()
            m = c.recv()
        self.assertEqual(m["type"], "result", m)
        self.assertEqual(end + len(tail), len(WHOLE))
        self.assertLessEqual(len(tail), 256 << 10)
        self.assertEqual(bytes(tail), WHOLE[end:])
        c.close()

    def test_output_from_an_offset_and_a_running_command_taken_over(self):
        sid = self.create()
        p = self.connect(sid)
        self.send(p, op="exec", id="w", stream=True,
                  command="printf abc; printf def >&2; until [ -e go ]; do sleep 0.05; done; "
                          "echo end")
        got = {"stdout": "", "stderr": ""}
        while got != {"stdout": "abc", "stderr": "def"}:
            m = json.loads(p.stdout.readline())
            self.assertEqual(m["type"], "output", m)
            got[m["stream"]] += m["data"]
        self.send(p, op="output", id="o1", target="w", offsets={"stdout": 1, "stderr": 3})
        m = json.loads(p.stdout.readline())
        self.assertEqual((m["type"], m["stream"], m["offset"], m["data"]),
                         ("output", "stdout", 1, "bc"), m)
        m = json.loads(p.stdout.readline())
        self.assertEqual(m, {"type": "ok", "id": "o1", "op": "output",
                             "offsets": {"stdout": 3, "stderr": 3}})
        for bad, code in (({"target": "nope"}, "invalid_request"),
                          ({"target": "w", "offsets": {"stdout": -1}}, "invalid_request"),
                          ({"target": "w", "offsets": {"other": 1}}, "invalid_request")):
            self.send(p, op="output", id="b", **bad)
            m = json.loads(p.stdout.readline())
            self.assertEqual((m["type"], m["code"]), ("error", code), m)
        self.kill(sid, p)
        # the next client gets what was kept, then the command's live output and result
        c = Client(self.sock(sid))
        self.assertEqual(c.recv()["type"], "hello")
        seen = {}
        for _ in range(2):
            m = c.recv()
            self.assertEqual((m["type"], m["offset"]), ("output", 0), m)
            seen[m["stream"]] = m["data"]
        self.assertEqual(seen, {"stdout": "abc", "stderr": "def"})
        open(os.path.join(self.ws, "go"), "w").close()
        m = c.recv()
        self.assertEqual((m["type"], m["stream"], m["offset"], m["data"]),
                         ("output", "stdout", 3, "end\n"), m)
        m = c.recv()
        self.assertEqual((m["type"], m["id"], m["stdout"]), ("result", "w", "abcend\n"), m)
        c.close()

    def test_keep_output_needs_a_size(self):
        r = self.ab("create", "--workspace", self.ws, "--keep-output", "lots")
        self.assertEqual(r.returncode, 125)
        self.assertIn("--keep-output 'lots'", r.stderr)


if __name__ == "__main__":
    unittest.main()
