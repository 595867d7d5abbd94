"""Sandbox.spawn and Sandbox.pty: streamed stdin, output as it comes, a
pty's size and resize, signals, and the ends of each (docs/python.md,
"Interactive commands")."""

import shutil
import threading
import unittest

import agentbox
import support


class Processes(unittest.TestCase):
    def setUp(self):
        self.ws = support.workspace()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.sb = support.sandbox(self.ws)
        self.addCleanup(self.sb.close)

    def test_cat_echoes_what_is_written_and_ends_on_eof(self):
        p = self.sb.spawn(["cat"], timeout=60)
        p.write("hello\n")
        self.assertEqual(p.read_until("hello\n"), b"hello\n")
        p.write(b"\x00\xffbytes", eof=True)
        r = p.wait()
        self.assertEqual(r["exit_code"], 0)
        self.assertEqual(r["stdout"], "hello\n\x00\ufffdbytes")
        with self.assertRaises(agentbox.ProtocolError):
            p.write("late")

    def test_pty_size_resize_and_repl(self):
        t = self.sb.pty(["python3", "-q"], rows=30, cols=100, timeout=90)
        t.read_until(">>> ")
        t.write("import shutil; print('size', tuple(shutil.get_terminal_size()))\n")
        self.assertIn(b"size (100, 30)", t.read_until(">>> "))
        t.resize(40, 120)
        t.write("print('size', tuple(shutil.get_terminal_size()))\n")
        self.assertIn(b"size (120, 40)", t.read_until("size (120, 40)"))
        t.read_until(">>> ")
        # sleeps of 50 ms in a loop, not one long one: a SIGINT that comes
        # between print() and time.sleep()'s system call is taken by Python's
        # handler but raised only when the sleep returns (CPython checks for
        # signals between bytecodes, and on EINTR); the loop's next turn
        # raises it
        t.write("import time; print('sleeping'); [time.sleep(0.05) for _ in iter(int, 1)]\n")
        t.read_until("sleeping\r\n")
        t.write("\x03")  # Ctrl-C: KeyboardInterrupt, the REPL goes on
        self.assertIn(b"KeyboardInterrupt", t.read_until("KeyboardInterrupt"))
        t.read_until(">>> ")
        t.write("exit(5)\n")
        self.assertEqual(t.wait(timeout=60)["exit_code"], 5)

    def test_pty_ctrl_d_ends_a_reader(self):
        t = self.sb.pty(["cat"], timeout=60)
        t.write("typed\n")
        self.assertIn(b"typed\r\ntyped\r\n", t.read_until("typed\r\ntyped\r\n"))
        t.close_stdin()  # Ctrl-D
        self.assertEqual(t.wait(timeout=60)["exit_code"], 0)

    def test_signal_and_iteration(self):
        p = self.sb.spawn(["sh", "-c", "echo ready; sleep 30"], timeout=60)
        self.assertEqual(p.read(timeout=60), b"ready\n")
        p.signal("INT")
        self.assertEqual(list(p), [])  # the end of its output
        self.assertEqual(p.wait()["signal"], "SIGINT")
        self.assertFalse(p.running)

    def test_read_times_out_without_output(self):
        p = self.sb.spawn(["sleep", "30"], timeout=60)
        self.assertEqual(p.read(timeout=0.2), b"")
        self.assertTrue(p.running)
        with self.assertRaises(TimeoutError):
            p.wait(timeout=0.2)
        p.kill()
        self.assertEqual(p.wait()["signal"], "SIGKILL")

    def test_other_calls_go_on_while_a_process_runs(self):
        p = self.sb.spawn(["cat"], timeout=60)
        got = []
        reader = threading.Thread(target=lambda: got.append(p.read_until("x\n", timeout=60)))
        reader.start()
        self.assertEqual(self.sb.run("echo other").stdout, "other\n")
        p.write("x\n")
        reader.join(20)
        self.assertEqual(got, [b"x\n"])
        p.close_stdin()
        self.assertEqual(p.wait()["exit_code"], 0)


if __name__ == "__main__":
    unittest.main()
