"""No output lost to a disconnect (docs/detached.md, "Nothing lost"): every
output event carries its offset in the command's stream; a client killed
in the middle of a 3,000,000-line seq loses no byte (the next client gets
the rest, and the two placed by offset are the whole output); the bound
of --keep-output holds (the launcher's memory does not grow past it) and
what it dropped is said (output_dropped); a running command's kept output
from an offset (op output); the next client takes over a running command.
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
