"""Streamed stdin, terminals and signals through the protocol
(docs/protocol.md, "Terminals and streamed stdin"): `cat` fed by stdin ops
echoes and ends on eof; a write the command does not read is held (one per
command), never piled up; a pty command sees its size and a resize; signals
reach the command's process group; every new op on an unknown, finished or
unsuitable target gets a clear error. Runs as root and as an unprivileged
user. AGENTBOX_BIN names the binary."""

import base64
import os
import shutil
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fileops import make_dir  # noqa: E402
from test_stream import RawServer  # noqa: E402


class Terminal(unittest.TestCase):
    def setUp(self):
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)
        try:
            self.sv = RawServer(self.ws)
        except AssertionError as e:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                raise
            self.skipTest("agentbox cannot run here: %s" % e)
        self.addCleanup(self.sv.close)

    def reply(self, rid):
        """The next message for rid (output of others skipped)."""
        while True:
            m = self.sv.recv()
            if m.get("id") == rid and m["type"] != "output":
                return m

    def output_until(self, rid, text):
        """rid's output until it holds text (fails after RECV_TIMEOUT)."""
        got = ""
        while text not in got:
            m = self.sv.recv()
            self.assertNotEqual((m.get("id"), m["type"]), (rid, "result"), (got, m))
            if m.get("id") == rid and m["type"] == "output":
                got += m["data"]
        return got

    def test_hello_says_so(self):
        for f in ("stdin_stream", "pty", "signal"):
            self.assertIn(f, self.sv.hello["features"])

    def test_cat_fed_by_stdin_ops_ends_on_eof(self):
        self.sv.send(op="exec", id=1, argv=["cat"], stdin={"stream": True}, stream=True)
        self.sv.send(op="stdin", id=2, target=1, data="hello\n")
        self.assertEqual(self.reply(2), {"type": "ok", "id": 2, "op": "stdin"})
        self.assertEqual(self.output_until(1, "hello\n"), "hello\n")
        self.sv.send(op="stdin", id=3, target=1, encoding="base64",
                     data=base64.b64encode(b"\x00bin\xff").decode(), eof=True)
        self.assertEqual(self.reply(3)["type"], "ok")
        data, res = self.sv.until_result(1)
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(res["stdout"], "hello\n\x00bin\ufffd")
        # finished: a clear error, no hang
        self.sv.send(op="stdin", id=4, target=1, data="late")
        m = self.reply(4)
        self.assertEqual((m["type"], m["code"]), ("error", "invalid_request"), m)
        self.assertIn("no command with this target id", m["message"])

    def test_unread_stdin_is_held_not_piled_up(self):
        # sleep never reads: 1 MiB does not fit in its pipe, so the write
        # stays unanswered; a second one is refused (busy) at once
        self.sv.send(op="exec", id=1, argv=["sleep", "30"], stdin={"stream": True})
        self.sv.send(op="stdin", id=2, target=1, data="x" * (1 << 20))
        self.sv.send(op="stdin", id=3, target=1, data="more")
        m = self.reply(3)
        self.assertEqual((m["type"], m["code"]), ("error", "busy"), m)
        self.sv.send(op="ping", id=4)
        self.assertEqual(self.reply(4)["type"], "pong")
        self.sv.send(op="cancel", id=5, target=1)
        self.assertEqual(self.reply(5)["type"], "ok")
        # the held write is answered (with why) before the result
        m = self.reply(2)
        self.assertEqual(m["type"], "error", m)
        self.assertIn("stdin", m["message"])
        self.assertTrue(self.reply(1)["cancelled"])

    def test_pty_sees_its_size_and_a_resize(self):
        script = ("tty -s && echo is-a-tty; stty size; trap 'stty size; exit 3' WINCH; "
                  "echo ready; while :; do sleep 0.05; done")
        self.sv.send(op="exec", id=1, argv=["sh", "-c", script], pty={"rows": 33, "cols": 101},
                     stream=True, timeout=20)
        got = self.output_until(1, "ready")
        self.assertIn("is-a-tty\r\n33 101\r\n", got)
        self.sv.send(op="resize", id=2, target=1, rows=40, cols=120)
        self.assertEqual(self.reply(2), {"type": "ok", "id": 2, "op": "resize"})
        data, res = self.sv.until_result(1)
        self.assertEqual(res["exit_code"], 3, res)
        self.assertIn("40 120\r\n", res["stdout"])

    def test_pty_input_echo_and_eof(self):
        self.sv.send(op="exec", id=1, argv=["cat"], pty={"rows": 24, "cols": 80}, stream=True,
                     timeout=20)
        self.sv.send(op="stdin", id=2, target=1, data="typed\n")
        self.assertEqual(self.reply(2)["type"], "ok")
        # the terminal echoes, then cat writes it back
        self.output_until(1, "typed\r\ntyped\r\n")
        self.sv.send(op="stdin", id=3, target=1, eof=True)  # Ctrl-D
        self.assertEqual(self.reply(3)["type"], "ok")
        data, res = self.sv.until_result(1)
        self.assertEqual(res["exit_code"], 0, res)

    def test_pty_ctrl_c_interrupts(self):
        self.sv.send(op="exec", id=1, argv=["sh", "-c", "echo ready; exec sleep 30"],
                     pty={"rows": 24, "cols": 80}, stream=True, timeout=20)
        self.output_until(1, "ready")
        self.sv.send(op="stdin", id=2, target=1, data="\x03")
        self.assertEqual(self.reply(2)["type"], "ok")
        data, res = self.sv.until_result(1)
        self.assertEqual((res["exit_code"], res["signal"]), (130, "SIGINT"), res)

    def test_signal_reaches_the_process_group(self):
        # sh catches TERM (its wait ends at once); the sleep it started, in
        # its group, dies of it: the second wait says so (143). Had the
        # signal gone to sh alone, that wait would last until the timeout.
        self.sv.send(op="exec", id=1, timeout=20, stream=True,
                     command="trap 'echo trapped' TERM; sleep 30 & p=$!; "
                             # ready once it is sleep: a signal to the child
                             # before its exec would go to sh's trap in it
                             "until grep -qx sleep /proc/$p/comm; do :; done; echo ready; "
                             "wait $p; wait $p; echo status=$?; exit 4")
        self.output_until(1, "ready")
        start = time.monotonic()
        self.sv.send(op="signal", id=2, target=1, signal="TERM")
        self.assertEqual(self.reply(2), {"type": "ok", "id": 2, "op": "signal"})
        data, res = self.sv.until_result(1)
        self.assertEqual(res["exit_code"], 4, res)
        self.assertIn("trapped\nstatus=143\n", res["stdout"])
        self.assertLess(time.monotonic() - start, 10)

    def test_signal_kill_and_names(self):
        self.sv.send(op="exec", id=1, argv=["sleep", "30"], timeout=20)
        self.sv.send(op="signal", id=2, target=1, signal="SIGKILL")
        self.assertEqual(self.reply(2)["type"], "ok")
        self.assertEqual(self.reply(1)["signal"], "SIGKILL")

    def test_bad_requests_get_clear_errors(self):
        self.sv.send(op="exec", id=1, argv=["sleep", "30"], timeout=20)
        cases = [
            (dict(op="stdin", target=1, data="x"), "without a streamed stdin or a pty"),
            (dict(op="resize", target=1, rows=5, cols=5), "without a pty"),
            (dict(op="signal", target=1, signal="SEGV"), "must be one of"),
            (dict(op="resize", target=1, rows=0, cols=5), "from 1 to 65535"),
            (dict(op="stdin", target=1), "give 'data'"),
            (dict(op="stdin", target=1, data="!", encoding="base64"), "not valid base64"),
            (dict(op="signal", target=99, signal="INT"), "no command with this target"),
            (dict(op="resize", target=98, rows=5, cols=5), "no command with this target"),
            (dict(op="exec", argv=["true"], pty={"rows": 5}), "'pty' must be"),
            (dict(op="exec", argv=["true"], stdin={"stream": False}), "'stdin' must be"),
            (dict(op="exec", argv=["true"], pty={"rows": 5, "cols": 5}, stdin="data"),
             "give no 'stdin' data"),
        ]
        for i, (req, why) in enumerate(cases):
            rid = 10 + i
            self.sv.send(id=rid, **req)
            m = self.reply(rid)
            self.assertEqual((m["type"], m["code"]), ("error", "invalid_request"), (req, m))
            self.assertIn(why, m["message"], req)
        self.sv.send(op="cancel", id=2, target=1)
        self.assertEqual(self.reply(2)["type"], "ok")
        self.assertTrue(self.reply(1)["cancelled"])


if __name__ == "__main__":
    unittest.main()
