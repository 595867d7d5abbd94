"""What a hostile command does to the review and the commit of an overlay
workspace (docs/workspace.md, "What a command can do to review and
commit"): a fifo swapped in while the launcher copies, a rename out of the
selection into a protected path, a tree deeper than the launcher's fds, a
symlink to a host file. Through `agentbox serve` (the session's changes and
commit, while the command still runs) and through `agentbox run
--keep-changes DIR` with `agentbox changes|commit|discard DIR` (what the
command left in the layer, swapped by the test itself while the launcher
reads it, as a command of a session would)."""

import json
import os
import resource
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import unittest

from harness import BIN, ROOT, SANDBOX_UID, RunMode, ServeMode, Attacks, both_modes, one_mode

# seconds a review may take here before the test calls it hung: a 2,100-deep
# tree takes ~2 s; under ASan on a loaded 2-core machine it took 30
BOUND = 90 if os.environ.get("AGENTBOX_SANITIZED") == "1" else 30

# a.txt, then 300 files the launcher copies after it, with enough in them
# that the copy takes a while (each is synced)
MAKE_FILES = 'echo a > a.txt; for i in $(seq 100 399); do echo "line $i" > b$i.txt; done'
# once a.txt's atime moves (the launcher copies it), every b*.txt becomes a
# fifo: in one process, so that the swap beats the launcher's copies
SWAP = ("python3 -c 'import os, time\n"
        "a0 = os.stat(\"a.txt\").st_atime_ns\n"
        "end = time.monotonic() + 20\n"
        "while os.stat(\"a.txt\").st_atime_ns == a0:\n"
        "    if time.monotonic() > end: raise SystemExit(3)\n"
        "for n in sorted(os.listdir(\".\")):\n"
        "    if n.startswith(\"b\"): os.unlink(n); os.mkfifo(n)\n"
        "print(\"SWAPPED\")\n"
        "time.sleep(20)'")


def rm_rf(path):
    """rm -rf, at any depth (shutil.rmtree recurses)."""
    subprocess.run(["rm", "-rf", "--one-file-system", path], check=False)


def swap_in_layer(upper, stop):
    """The same swap from the host side, in the layer's upper directory."""
    a = os.path.join(upper, "a.txt")
    a0 = os.stat(a).st_atime_ns
    while not stop.is_set() and os.stat(a).st_atime_ns == a0:
        time.sleep(0.0005)
    for n in sorted(os.listdir(upper)):
        if n.startswith("b") and n.endswith(".txt"):
            p = os.path.join(upper, n)
            os.unlink(p)
            os.mkfifo(p)


class Review(Attacks):
    options = ("--workspace-mode", "overlay")

    def setUp(self):
        super().setUp()
        if ROOT:
            os.chown(self.ws, SANDBOX_UID, SANDBOX_UID)
        self.layer = None
        if self.mode is RunMode:
            parent = tempfile.mkdtemp(prefix="agentbox-sec-layer-")
            self.addCleanup(rm_rf, parent)
            self.layer = os.path.join(parent, "layer")
            self.options = self.options + ("--keep-changes", self.layer)

    def cli(self, *args, timeout=BOUND, nofile=None):
        """agentbox changes|commit|discard on the kept layer: (status, out, err)."""
        pre = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) \
            if nofile else None
        try:
            p = subprocess.run([BIN, *args], capture_output=True, timeout=timeout,
                               preexec_fn=pre)
        except subprocess.TimeoutExpired:
            self.fail("agentbox %s hung for %ds" % (args[0], timeout))
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    def changes(self, **kw):
        """The changes as a list of dicts (or fail)."""
        if self.mode is ServeMode:
            m = self.box().call({"op": "changes", **kw}, BOUND)
            self.assertEqual(m["type"], "result", m)
            return m["changes"]
        code, out, err = self.cli("changes", "--json", self.layer)
        self.assertEqual(code, 0, err)
        return json.loads(out)["changes"]

    def commit(self, paths=None, force=False):
        """(ok, what): the committed paths and the reply, or the error's message."""
        if self.mode is ServeMode:
            req = {"op": "commit", "force": force}
            if paths is not None:
                req["paths"] = paths
            m = self.box().call(req, BOUND)
            return m["type"] == "result", m if m["type"] == "result" else m["message"]
        code, out, err = self.cli("commit", *(["--force"] if force else []), self.layer,
                                  *(paths or []))
        return code == 0, ({"committed": out.split(), "stderr": err} if code == 0 else err)

    # 1. a fifo swapped in while the launcher copies must not freeze it

    def test_fifo_swapped_in_during_commit(self):
        self.fifo_swap({"op": "commit"}, ("commit",))

    def test_fifo_swapped_in_during_changes_with_diff(self):
        self.fifo_swap({"op": "changes", "diff": True}, ("changes", "--diff"))

    def fifo_swap(self, req, cli):
        """req (serve) or `agentbox CLI... DIR` (run) while b*.txt become fifos."""
        r = self.sh(MAKE_FILES)
        self.assertEqual(r.code, 0, r)
        if self.mode is ServeMode:
            sv = self.box()
            # a command that swaps, and one with a 2 s timeout meanwhile
            for i, (cmd, t) in enumerate(((SWAP, 25), ("sleep 30", 2))):
                sv.p.stdin.write((json.dumps({"op": "exec", "id": "bg%d" % i, "command": cmd,
                                              "timeout": t}) + "\n").encode())
            sv.p.stdin.flush()
            time.sleep(0.3)  # the swapper is watching
            start = time.monotonic()
            sv.p.stdin.write((json.dumps({**req, "id": "c0"}) + "\n").encode())
            sv.p.stdin.write(b'{"op":"ping","id":"c1"}\n')
            sv.p.stdin.flush()
            got = {}
            timer = threading.Timer(BOUND, sv.p.kill)
            timer.start()
            try:
                while len(got) < 3:
                    line = sv.p.stdout.readline()
                    self.assertTrue(line, "the session froze (killed after %ds)" % BOUND)
                    m = json.loads(line)
                    if m.get("id") in ("bg1", "c0", "c1") and m["type"] != "output":
                        got[m["id"]] = (m, time.monotonic() - start)
            finally:
                timer.cancel()
            # timeouts were enforced meanwhile
            self.assertTrue(got["bg1"][0].get("timed_out"), got["bg1"])
            self.assertLess(got["bg1"][1], 10, got["bg1"])
            self.assertEqual(got["c1"][0]["type"], "pong")
            self.assertEqual(sv.call({"op": "changes"}, 10)["type"], "result")
        else:
            upper = os.path.join(self.layer, "upper")
            stop = threading.Event()
            t = threading.Thread(target=swap_in_layer, args=(upper, stop), daemon=True)
            t.start()
            try:  # fails or succeeds, but ends (self.cli's bound)
                self.cli(*cli, self.layer)
            finally:
                stop.set()
                t.join()
            self.changes()
        for n in os.listdir(self.ws):  # nothing but regular files reached the host
            self.assertTrue(stat.S_ISREG(os.lstat(os.path.join(self.ws, n)).st_mode), n)

    # 2. a selection commits exactly what is beneath it; protected needs naming

    def test_rename_out_of_the_selection_into_a_hook(self):
        os.makedirs(os.path.join(self.ws, "src"))
        helper = os.path.join(self.ws, "src/ci-helper.sh")
        with open(helper, "w") as f:
            f.write("#!/bin/sh\necho ci\n")
        os.chmod(helper, 0o755)
        with open(os.path.join(self.ws, "src/main.c"), "w") as f:
            f.write("int main;\n")
        if ROOT:
            for p in ("src", "src/ci-helper.sh", "src/main.c"):
                os.chown(os.path.join(self.ws, p), SANDBOX_UID, SANDBOX_UID)
        r = self.sh("mkdir -p .git/hooks && mv src/ci-helper.sh .git/hooks/post-checkout && "
                    "echo 'int main(void);' > src/main.c")
        self.assertEqual(r.code, 0, r)
        hook = os.path.join(self.ws, ".git/hooks/post-checkout")
        ok, what = self.commit(["src"])
        self.assertTrue(ok, what)
        self.assertFalse(os.path.lexists(hook), "the hook reached the host")
        self.assertTrue(os.path.exists(helper), "a path outside the selection was deleted")
        with open(os.path.join(self.ws, "src/main.c")) as f:
            self.assertEqual(f.read(), "int main(void);\n")
        if self.mode is ServeMode:
            self.assertEqual(what["outside_selection"], [".git/hooks/post-checkout"])
        else:
            self.assertIn(".git/hooks/post-checkout", what["stderr"])
        # everything, or force without naming it: refused, nothing written
        for paths, force in ((None, False), (None, True), ([".git"], True)):
            ok, what = self.commit(paths, force)
            self.assertFalse(ok, (paths, force, what))
            self.assertIn("protected", what)
            self.assertFalse(os.path.lexists(hook))
        # named, with force: written
        ok, what = self.commit([".git/hooks"], True)
        self.assertTrue(ok, what)
        self.assertTrue(os.path.exists(hook))

    # 3. a deep tree: review works, the layer goes, in bounded fds

    def test_deep_tree(self):
        # 2100 levels: deeper than 256, than the fds of a launcher limited to
        # 256 below, and than a path can name (4096 bytes)
        r = self.sh("echo ok > legit.txt; python3 -c 'import os\n"
                    "for i in range(2100): os.mkdir(\"d\"); os.chdir(\"d\")\n"
                    "open(\"f\", \"w\").write(\"deep\")'", timeout=120)
        self.assertEqual(r.code, 0, r)
        if self.mode is ServeMode:
            resource.prlimit(self.box().p.pid, resource.RLIMIT_NOFILE, (256, 256))
            m = self.box().call({"op": "changes"}, BOUND)
            self.assertEqual(m["type"], "result", m)
            layer, ch = m["layer"], m["changes"]
            self.addCleanup(rm_rf, layer)  # were it left behind
        else:
            code, out, err = self.cli("changes", "--json", self.layer, nofile=256)
            self.assertEqual(code, 0, err)
            layer, ch = self.layer, json.loads(out)["changes"]
        paths = {c["path"]: c for c in ch}
        self.assertIn("legit.txt", paths)
        deep = [c for c in ch if c.get("too_deep")]
        self.assertEqual(len(deep), 1, [c["path"][-40:] for c in deep])
        self.assertGreater(len(deep[0]["path"]), 4000)
        ok, what = self.commit()
        self.assertFalse(ok, what)
        self.assertIn("nested deeper than a path can name", what)
        ok, what = self.commit(["legit.txt"])
        self.assertTrue(ok, what)
        self.assertTrue(os.path.exists(os.path.join(self.ws, "legit.txt")))
        if self.mode is ServeMode:
            self.box().close()
        else:
            code, out, err = self.cli("discard", self.layer, nofile=256)
            self.assertEqual(code, 0, err)
        self.assertFalse(os.path.exists(layer), "the layer outlived the session")

    # 5. a symlink's target is shown, flagged when it leaves the workspace

    def test_symlink_targets_are_shown(self):
        r = self.sh("ln -s /etc/shadow innocent.txt; mkdir -p a/b; ln -s ../../../x a/b/up; "
                    "ln -s ../c a/b/in")
        self.assertEqual(r.code, 0, r)
        ch = {c["path"]: c for c in self.changes()}
        self.assertEqual(ch["innocent.txt"]["target"], "/etc/shadow")
        self.assertTrue(ch["innocent.txt"]["target_outside"])
        self.assertTrue(ch["a/b/up"]["target_outside"])
        self.assertEqual(ch["a/b/in"]["target"], "../c")
        self.assertFalse(ch["a/b/in"]["target_outside"])
        if self.mode is RunMode:
            code, out, err = self.cli("changes", self.layer)
            self.assertIn("innocent.txt (symlink to /etc/shadow) [points outside the workspace]",
                          out)


both_modes(globals(), Review)


class ReviewWatchdog(Attacks):
    """The serve loop's watchdog: a review past its bound is stopped with an
    error, and the session goes on (serve only: `agentbox changes` is one
    process the caller bounds)."""
    options = ("--workspace-mode", "overlay")

    def test_a_review_past_its_bound_is_stopped(self):
        if ROOT:
            os.chown(self.ws, SANDBOX_UID, SANDBOX_UID)
        r = self.sh("for i in $(seq 1000 2999); do echo $i > f$i; done")
        self.assertEqual(r.code, 0, r)
        sv = self.box()
        start = time.monotonic()
        sv.p.stdin.write(b'{"op":"exec","id":"t","command":"sleep 30","timeout":1}\n'
                         b'{"op":"changes","id":"c","diff":true,"timeout":0.2}\n')
        sv.p.stdin.flush()
        got = {}
        timer = threading.Timer(BOUND, sv.p.kill)
        timer.start()
        try:
            while len(got) < 2:
                m = sv._recv()
                self.assertIsNotNone(m, "the session froze (killed after %ds)" % BOUND)
                if m.get("id") in ("t", "c") and m["type"] != "output":
                    got[m["id"]] = (m, time.monotonic() - start)
        finally:
            timer.cancel()
        m, took = got["c"]
        self.assertEqual(m["type"], "error", m)
        self.assertEqual(m["code"], "timeout", m)
        self.assertLess(took, 3, m)
        m, took = got["t"]  # the command's timeout held meanwhile
        self.assertTrue(m["timed_out"], m)
        self.assertLess(took, 8, m)
        self.assertEqual(sv.call({"op": "ping"}, 10)["type"], "pong")
        m = sv.call({"op": "changes", "timeout": 0}, 10)
        self.assertEqual((m["type"], m["code"]), ("error", "invalid_request"), m)
        m = sv.call({"op": "changes", "timeout": 20}, BOUND)
        self.assertEqual(len(m["changes"]), 2000)


one_mode(globals(), ReviewWatchdog, ServeMode)
