"""Sandbox.watch: a directory's file events as an iterator, ended by
cancel or a with block; a path that is not a directory of the view raises
(docs/python.md, "File events")."""

import shutil
import unittest

import agentbox
import support


class Watching(unittest.TestCase):
    def setUp(self):
        self.ws = support.workspace()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.sb = support.sandbox(self.ws)
        self.addCleanup(self.sb.close)

    def test_events_of_a_command_then_cancel(self):
        with self.sb.watch("/workspace") as w:
            self.assertEqual(w.path, "/workspace")
            seen = []

            def until(last):  # bounded: a missed event fails, never hangs
                while True:
                    ev = w.next(timeout=30)
                    self.assertIsNotNone(ev, "no %s event; saw %s" % (last, seen))
                    seen.append((ev["event"], ev["path"]))
                    if ev["event"] == last:
                        return ev

            # a new directory's "created" comes once it is watched too:
            # what is made in it after the event is seen
            self.sb.run("mkdir sub")
            self.assertEqual(until("created")["path"], "/workspace/sub")
            self.sb.run("echo x > sub/f && mv sub/f sub/g")
            self.assertEqual(until("renamed")["from"], "/workspace/sub/f")
            self.assertIn(("written", "/workspace/sub/f"), seen)
        self.assertTrue(w.cancel()["cancelled"])
        self.assertFalse(w.running)
        self.assertEqual(self.sb.run("true").exit_code, 0)  # the session goes on

    def test_not_a_directory_raises(self):
        with self.assertRaises(agentbox.ProtocolError) as e:
            self.sb.watch("/no/such/dir")
        self.assertEqual(e.exception.code, "file_not_found")
        with self.assertRaises(agentbox.ProtocolError) as e:
            self.sb.watch("../outside")
        self.assertEqual(e.exception.code, "invalid_path")


if __name__ == "__main__":
    unittest.main()
