"""The watch op (docs/protocol.md, "watch"): file events of a directory of
the view as they happen, from inotify in a shim: created, written,
removed, renamed, attributes; directories made later followed; a burst
arrives whole or says it overflowed; a path outside the view refused; a
command cannot stop the watcher; a watch ends when cancelled, at the end of
its client's input and with its sandbox. Runs as root and as an
unprivileged user. AGENTBOX_BIN names the binary."""

import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fileops import Server, make_dir  # noqa: E402


class Watch(unittest.TestCase):
    def setUp(self):
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.s = Server(self.ws)
        self.addCleanup(self.s.close)

    def watch(self, wid="w", **fields):
        """A watch started: its ready event."""
        self.s.send(op="watch", id=wid, **fields)
        m = self.s.recv()
        self.assertEqual(m.get("event"), "ready", m)
        return m

    def run_cmd(self, command, pred=None, wid="w"):
        """The events of watch wid until command's result came and (with
        pred) an event pred accepts."""
        rid = self.s.send(op="exec", command=command)
        events, done, seen = [], False, pred is None
        while not (done and seen):
            m = self.s.recv()
            if m.get("id") == rid:
                self.assertEqual(m["exit_code"], 0, m)
                done = True
                continue
            self.assertEqual(m.get("id"), wid, m)
            events.append(m)
            seen = seen or pred(m)
        return events

    def cancel(self, wid="w"):
        self.s.send(op="cancel", target=wid)
        while True:
            m = self.s.recv()
            if m.get("id") == wid and m["type"] == "result":
                return m
            self.assertIn(m["type"], ("ok", "event"), m)

    def test_each_kind(self):
        self.assertEqual(self.watch()["path"], "/workspace")
        ev = self.run_cmd("echo hi > a && chmod 600 a && mv a b && rm b",
                          lambda m: m["event"] == "removed" and m["path"] == "/workspace/b")
        got = [(m["event"], m["path"]) for m in ev]
        for want in [("created", "/workspace/a"), ("written", "/workspace/a"),
                     ("attributes", "/workspace/a"), ("renamed", "/workspace/b")]:
            self.assertIn(want, got)
        renamed = [m for m in ev if m["event"] == "renamed"][0]
        self.assertEqual(renamed["from"], "/workspace/a")
        self.assertFalse(renamed["dir"])
        end = self.cancel()
        self.assertTrue(end["cancelled"])
        self.assertGreaterEqual(end["events"], 5)

    def test_recursive_follows_new_directories(self):
        self.watch(path=".", recursive=True)
        ev = self.run_cmd("mkdir -p d/e && touch d/e/f && mv d d2 && touch d2/e/g",
                          lambda m: m["event"] == "written" and m["path"] == "/workspace/d2/e/g")
        paths = [m["path"] for m in ev if m["event"] == "created"]
        self.assertIn("/workspace/d/e/f", paths)
        self.assertIn("/workspace/d2/e/g", paths)
        self.cancel()

    def test_not_recursive_stays_at_its_level(self):
        self.watch(path="/workspace")
        ev = self.run_cmd("mkdir d && touch d/deep && touch top",
                          lambda m: m["event"] == "written" and m["path"] == "/workspace/top")
        self.assertNotIn("/workspace/d/deep", [m["path"] for m in ev])
        self.cancel()

    def test_burst_whole_or_overflow(self):
        self.watch(recursive=True)
        n = 20000
        rid = self.s.send(op="exec", command="mkdir burst && cd burst && "
                          f"seq {n} | sed s/^/f/ | xargs touch && touch /workspace/end")
        created, overflow, done, ended = set(), 0, False, False
        # the last creation's event may be among those an overflow dropped
        while not (done and (ended or overflow)):
            m = self.s.recv()
            if m.get("id") == rid:
                self.assertEqual(m["exit_code"], 0, m)
                done = True
                continue
            if m["event"] == "overflow":
                overflow += 1
            elif m["event"] == "created":
                created.add(m["path"])
                ended = ended or m["path"] == "/workspace/end"
        burst = {p for p in created if p.startswith("/workspace/burst/")}
        if not overflow:
            self.assertEqual(len(burst), n)
        self.cancel()

    def test_outside_the_view_refused(self):
        self.s.send(op="watch", id="up", path="../../etc")
        m = self.s.recv()
        self.assertEqual((m["type"], m["code"]), ("error", "invalid_path"), m)
        self.s.send(op="watch", id="none", path="/home/not-in-the-view")
        m = self.s.recv()
        self.assertEqual((m["type"], m["code"]), ("error", "file_not_found"), m)
        self.assertIn("/home/not-in-the-view", m["message"])
        self.s.call(op="write", path="file", content="x")
        self.s.send(op="watch", id="file", path="file")
        m = self.s.recv()
        self.assertEqual((m["type"], m["code"]), ("error", "not_directory"), m)

    def test_command_cannot_stop_the_watcher(self):
        self.watch()
        # every process the command may signal, then every one of the user
        self.run_cmd("kill -STOP -1; kill -KILL -1; true")
        self.run_cmd("touch after", lambda m: m["path"] == "/workspace/after")
        self.cancel()

    def test_end_of_input_ends_the_watch(self):
        self.watch()
        self.s.p.stdin.close()
        m = self.s.recv()
        self.assertEqual((m["id"], m["type"], m["cancelled"]), ("w", "result", True), m)
        self.assertEqual(self.s.p.wait(timeout=30), 0)

    def test_ends_with_its_sandbox(self):
        self.watch()
        self.s.send(op="shutdown", id="end")
        seen = {}
        while len(seen) < 2:
            m = self.s.recv()
            seen[m["id"]] = m
        self.assertEqual(seen["end"]["type"], "ok")
        self.assertIn(seen["w"]["type"], ("result", "error"), seen["w"])
        self.assertEqual(self.s.p.wait(timeout=30), 0)


if __name__ == "__main__":
    unittest.main()
