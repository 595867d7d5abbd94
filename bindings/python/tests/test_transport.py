"""The client's transport (agentbox._session) where no caller reads: replies
nobody waits for, a request written while the server's output piles up
unread, a wait interrupted in the middle of a line. No reader thread reads
for them: the waiting caller, the writer and close() do."""

import base64
import os
import select
import shutil
import signal
import sys
import threading
import unittest

from support import workspace, sandbox
from agentbox._session import ProtocolError, Session

# A stand-in for `agentbox serve`: a hello, then one reply per request line,
# written in two halves a pause apart (argv[1] seconds), after a lag before
# it reads its stdin at all (argv[2] seconds); a line it cannot parse gets an
# error with id null, as from the server.
FAKE_SERVER = r"""
import json, sys, time
out = sys.stdout.buffer
out.write(b'{"type":"hello","protocol":"agentbox/1","max_line":8388608,"features":[]}\n')
out.flush()
time.sleep(float(sys.argv[2]))  # before it reads its stdin
for line in sys.stdin.buffer:
    try:
        req = json.loads(line)
    except ValueError:
        out.write(b'{"type":"error","id":null,"code":"invalid_request","message":"bad"}\n')
        out.flush()
        continue
    if req["op"] == "shutdown":
        break
    reply = json.dumps({"type": "result", "id": req["id"], "bytes": len(line),
                        "stdout": "x" * 100000}).encode() + b"\n"
    half = len(reply) // 2
    out.write(reply[:half])
    out.flush()
    time.sleep(float(sys.argv[1]))
    out.write(reply[half:])
    out.flush()
"""


def readable(fd, timeout):
    """Whether fd has something to read within timeout seconds (the
    server has started a reply that nobody reads)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(timeout * 1000))


class Interrupt:
    """SIGALRM after `after` seconds raises KeyboardInterrupt in the main
    thread, as Ctrl-C in a REPL does."""

    def __init__(self, after):
        self.after = after

    def __enter__(self):
        def ring(signum, frame):
            raise KeyboardInterrupt
        self.old = signal.signal(signal.SIGALRM, ring)
        signal.setitimer(signal.ITIMER_REAL, self.after)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.old)


class Unread(unittest.TestCase):
    """Replies nobody waits for, with the real server."""

    def setUp(self):
        self.ws = workspace()
        self.addCleanup(shutil.rmtree, self.ws, True)

    def test_close_reads_an_abandoned_reply_and_the_server_exits_0(self):
        # as after Ctrl-C in a REPL: a call sent, never waited for, and its
        # 3 MB reply is there when the sandbox closes
        sb = sandbox(self.ws, max_output=4_000_000)
        self.addCleanup(sb.close)
        sb._s.send({"op": "exec", "argv": ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a"]})
        self.assertTrue(readable(sb._s._proc.stdout.fileno(), 30), "the server never replied")
        sb.close()
        self.assertEqual(sb._s._proc.returncode, 0,
                         "the server was killed: close() left its replies unread")

    def test_a_large_upload_while_replies_pile_up_unread(self):
        # the server stops reading its stdin while over 1 MiB of its replies
        # (a download's, here) is unread; the writer is the only caller, so
        # it must read them while it writes
        two = os.urandom(2 << 20)
        with open(os.path.join(self.ws, "two.bin"), "wb") as f:
            f.write(two)
        os.chmod(os.path.join(self.ws, "two.bin"), 0o644)
        sb = sandbox(self.ws)
        self.addCleanup(sb.close)
        unread = sb._s.send({"op": "download", "path": "two.bin", "offset": 0,
                             "length": len(two)})
        self.assertTrue(readable(sb._s._proc.stdout.fileno(), 30), "the server never replied")
        data = os.urandom(3 << 20)
        done = {}

        def upload():
            try:
                done["r"] = sb.upload_files([("big.bin", data)])
            except Exception as e:  # reported below
                done["r"] = e

        t = threading.Thread(target=upload, daemon=True)
        t.start()
        t.join(60)
        if t.is_alive():
            sb._s._proc.kill()  # the writer fails and its thread ends
            t.join(10)
            self.fail("the upload hung: nobody read the server's replies while it wrote")
        self.assertEqual([r.error for r in done["r"]], [None], done["r"])
        with open(os.path.join(self.ws, "big.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        reply = sb._s.wait(unread)  # the writer handed it to its call
        self.assertEqual(base64.b64decode(reply["data"]), two)
        sb.close()
        self.assertEqual(sb._s._proc.returncode, 0)


@unittest.skipIf(threading.current_thread() is not threading.main_thread(),
                 "signals reach only the main thread")
class Interrupts(unittest.TestCase):
    """KeyboardInterrupt in the middle of the transport's reads and writes,
    with a stand-in server that pauses half-way through each reply."""

    def session(self, pause=3.0, lag=0.0):
        s = Session([sys.executable, "-c", FAKE_SERVER, str(pause), str(lag)])
        self.addCleanup(s.close)
        return s

    def test_a_wait_interrupted_mid_line_keeps_what_it_read(self):
        s = self.session()
        call = s.send({"op": "exec", "argv": ["true"]})
        # half of the reply is there, the rest comes in 3 s
        self.assertTrue(readable(s._proc.stdout.fileno(), 30), "no reply began")
        with self.assertRaises(KeyboardInterrupt), Interrupt(0.2):
            s.wait(call)
        reply = s.wait(call)  # the rest of the same line, whole
        self.assertEqual(reply["stdout"], "x" * 100000)
        again = s.request("exec", argv=["true"])  # and the stream is in step
        self.assertEqual(again["stdout"], "x" * 100000)
        s.close()
        self.assertEqual(s._proc.returncode, 0)

    def test_a_write_interrupted_mid_line_is_finished_by_the_next_one(self):
        # the stand-in reads nothing for 3 s: a 2 MB line fills the
        # pipe and the writer waits for room when the interrupt comes
        s = self.session(pause=0.0, lag=3.0)
        with self.assertRaises(KeyboardInterrupt), Interrupt(0.3):
            s.send({"op": "exec", "argv": ["true"], "stdin": "y" * (2 << 20)})
        try:
            reply = s.request("exec", argv=["true"])
        except ProtocolError as e:
            self.fail("the server got a broken line: %s" % e)
        self.assertLess(reply["bytes"], 1000)  # its own line, not the rest of the other
        s.close()
        self.assertEqual(s._proc.returncode, 0)


if __name__ == "__main__":
    unittest.main()
