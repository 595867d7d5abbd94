"""agentbox watch ID [PATH] (docs/detached.md): a detached sandbox's file
events as lines or JSON, from the ready line on; a path outside the view
refused (125); the watch ends with its sandbox (agentbox rm), exit 0. Runs
as root and as an unprivileged user. AGENTBOX_BIN names the binary."""

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fileops import BIN, make_dir  # noqa: E402

DELEGATED = os.environ.get("AGENTBOX_TEST_DELEGATED_PARENT")


class DetachedWatch(unittest.TestCase):
    def setUp(self):
        self.rt = tempfile.mkdtemp(prefix="ab-rt-")
        os.chmod(self.rt, 0o700)
        self.addCleanup(shutil.rmtree, self.rt, True)
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.env = dict(os.environ, AGENTBOX_RUNTIME_DIR=self.rt)

    def ab(self, *args, **kw):
        kw.setdefault("timeout", 60)
        return subprocess.run([BIN, *args], env=self.env, capture_output=True, text=True, **kw)

    def create(self):
        args = ("--cgroup-parent", DELEGATED) if DELEGATED else ()
        r = self.ab("create", "--workspace", self.ws, "--net", "none", *args)
        if r.returncode != 0:
            if os.environ.get("AGENTBOX_MUST_WORK") != "1" and "cannot" in r.stderr:
                self.skipTest("agentbox cannot run here: " + r.stderr)
            self.fail(r.stderr)
        sid = r.stdout.strip()
        self.addCleanup(self.ab, "rm", "-f", sid)
        return sid

    def watch(self, *args):
        """agentbox watch ARGS, its stdout's lines read by a thread (a hung
        watch fails the test, never hangs it)."""
        p = subprocess.Popen([BIN, "watch", *args], env=self.env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(p.stdout.close)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        p.lines = queue.Queue()

        def read():
            for ln in p.stdout:
                p.lines.put(ln)
            p.lines.put("")
        threading.Thread(target=read, daemon=True).start()
        return p

    def line(self, p, timeout=30):
        try:
            return p.lines.get(timeout=timeout)
        except queue.Empty:
            self.fail("no line from agentbox watch in %s s" % timeout)

    def test_events_then_the_sandbox_ends(self):
        sid = self.create()
        r = self.ab("watch", sid, "../outside")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("'..'", r.stderr)
        r = self.ab("watch", sid, "/no/such/dir")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("/no/such/dir", r.stderr)
        # a command whose background process writes once the watch is ready
        r = self.ab("exec", sid, "-c",
                    "(while [ ! -e go ]; do sleep 0.02; done; mkdir d && echo x > d/f) "
                    ">/dev/null 2>&1 &")
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.watch("-r", "--json", sid)
        self.assertEqual(json.loads(self.line(p)), {"event": "ready", "path": "/workspace",
                                                     "dir": True})
        open(os.path.join(self.ws, "go"), "w").close()
        seen = []
        while ("written", "/workspace/d/f") not in seen:
            ev = json.loads(self.line(p))
            seen.append((ev["event"], ev.get("path")))
        self.assertIn(("created", "/workspace/d"), seen)
        started = time.monotonic()
        r = self.ab("rm", "-f", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertIn("ended", p.stderr.read())
        self.assertLess(time.monotonic() - started, 30)
        p.stderr.close()

    def test_plain_lines_and_a_signal_cancels(self):
        sid = self.create()
        r = self.ab("exec", sid, "-c",
                    "(while [ ! -e go ]; do sleep 0.02; done; echo a > a && mv a b) "
                    ">/dev/null 2>&1 &")
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.watch(sid, ".")
        self.assertEqual(self.line(p), "ready /workspace\n")
        open(os.path.join(self.ws, "go"), "w").close()
        lines = []
        while not lines or not lines[-1].startswith("renamed"):
            lines.append(self.line(p))
        self.assertIn("created /workspace/a\n", lines)
        self.assertEqual(lines[-1], "renamed /workspace/b <- /workspace/a\n")
        p.send_signal(2)
        self.assertEqual(p.wait(timeout=30), 0)
        p.stderr.close()
        # the sandbox goes on, its one client free again
        self.assertEqual(self.ab("exec", sid, "--", "true").returncode, 0)


if __name__ == "__main__":
    unittest.main()
