"""The client's transport (agentbox._session): a wait interrupted in the
middle of a reply line keeps what it read for the next reader."""

import select
import signal
import sys
import threading
import unittest

from agentbox._session import Session

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



if __name__ == "__main__":
    unittest.main()
