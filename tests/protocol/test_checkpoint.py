"""Checkpoints of a detached sandbox's overlay workspace (docs/checkpoints.md):
agentbox checkpoint, checkpoints, restore, changes --since, and the protocol's
ops. A restore brings back an earlier content and removes a later file; the
host workspace is untouched; a direct-mode sandbox is refused (125) saying
why; a checkpoint is refused while a command runs; the protected paths stay
read-only after a switch; rm leaves no layer on disk. Runs as root and as an
unprivileged user; each test has its own sandboxes' directory and layers'
state directory (XDG_STATE_HOME; root's is /var/lib/agentbox/layers, where
the test looks for its own layer by the workspace it names)."""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_detach import Client, DetachedBase  # noqa: E402

ROOT = os.getuid() == 0


class CheckpointBase(DetachedBase):
    """A test's own layers' state directory and its helpers (test_fork.py
    builds on it too)."""

    def setUp(self):
        # removed last (cleanups run in reverse): after the sandboxes' rm
        self.state_home = tempfile.mkdtemp(prefix="ab-state-")
        self.addCleanup(shutil.rmtree, self.state_home, True)
        super().setUp()
        self.env["XDG_STATE_HOME"] = self.state_home
        with open(os.path.join(self.ws, "a.txt"), "w") as f:
            f.write("v1\n")

    def layer_dirs(self):
        """The layer directories of this test's workspace."""
        base = ("/var/lib/agentbox/layers" if ROOT
                else os.path.join(self.state_home, "agentbox", "layers"))
        found = []
        for info in glob.glob(os.path.join(base, "*", "layer.info")):
            try:
                with open(info) as f:
                    if "workspace=%s\n" % os.path.realpath(self.ws) in f.read():
                        found.append(os.path.dirname(info))
            except OSError:
                pass
        return found

    def sh(self, sid, script):
        r = self.ab("exec", sid, "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def ok(self, *args):
        r = self.ab(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout


class Checkpoints(CheckpointBase):
    def test_checkpoint_restore_changes(self):
        sid = self.create("--workspace-mode", "overlay")
        self.sh(sid, "echo v2 > a.txt; echo x > b.txt")
        self.assertEqual(self.ok("checkpoint", sid).strip(), "c1")
        self.sh(sid, "echo v3 > a.txt; rm b.txt; echo new > c.txt")
        self.assertEqual(self.sh(sid, "cat a.txt; ls"), "v3\na.txt\nc.txt\n")
        # what changed after c1: written, deleted
        out = json.loads(self.ok("changes", "--json", "--since", "c1", sid))
        got = {c["path"]: c["status"] for c in out["changes"]}
        self.assertEqual(got, {"a.txt": "written", "b.txt": "deleted",
                               "c.txt": "written"})
        # against the host: the stack's merged view (b.txt came and went)
        out = json.loads(self.ok("changes", "--json", sid))
        got = {c["path"]: c["status"] for c in out["changes"]}
        self.assertEqual(got, {"a.txt": "modified", "c.txt": "added"})
        self.assertEqual(self.ok("checkpoint", "--name", "after", sid).strip(), "after")
        listed = json.loads(self.ok("checkpoints", "--json", sid))["checkpoints"]
        self.assertEqual([c["name"] for c in listed], ["c1", "after"])
        self.assertEqual([c["layers"] for c in listed], [1, 2])
        # undo: the earlier content back, the later file gone
        self.ok("restore", sid, "c1")
        self.assertEqual(self.sh(sid, "cat a.txt; ls"), "v2\na.txt\nb.txt\n")
        # and forward again: a later checkpoint stays restorable
        self.ok("restore", sid, "after")
        self.assertEqual(self.sh(sid, "cat a.txt; ls"), "v3\na.txt\nc.txt\n")
        # writes go on after a switch, each in the fresh layer
        self.sh(sid, "echo v4 > a.txt")
        self.ok("restore", sid, "after")
        self.assertEqual(self.sh(sid, "cat a.txt"), "v3\n")
        # the host's workspace was never touched
        with open(os.path.join(self.ws, "a.txt")) as f:
            self.assertEqual(f.read(), "v1\n")
        self.assertEqual(sorted(os.listdir(self.ws)), ["a.txt"])
        self.assertEqual(len(self.layer_dirs()), 1)
        self.ok("rm", sid)
        self.assertEqual(self.layer_dirs(), [])

    def test_review_and_commit_a_stack(self):
        """changes and commit of a workspace on checkpoints: the merged
        view of its uppers (a whiteout or an opaque directory of a later
        layer hides what an earlier one wrote, and the host's files)
        against the host, with the same conflict check as one upper."""
        os.makedirs(os.path.join(self.ws, "hd"))
        for name, text in (("h.txt", "h\n"), ("hd/keep", "k\n"), ("conf.txt", "c1\n")):
            with open(os.path.join(self.ws, name), "w") as f:
                f.write(text)
        sid = self.create("--workspace-mode", "overlay")
        self.sh(sid, "echo v2 > a.txt; echo x > b.txt; mkdir d; echo 1 > d/f; rm h.txt;"
                     " echo mine > conf.txt")
        self.ok("checkpoint", sid)
        self.sh(sid, "echo v3 > a.txt; rm b.txt; echo new > c.txt; rm -r d; mkdir d;"
                     " echo 2 > d/g; rm -r hd; mkdir hd; echo n > hd/new")
        self.ok("checkpoint", sid)
        self.sh(sid, "echo v4 > a.txt")
        out = json.loads(self.ok("changes", "--json", sid))
        got = {c["path"]: c["status"] for c in out["changes"]}
        # hd made again has the host's mode (the caller's umask, not the
        # launcher's 077): its contents changed, not it
        self.assertEqual(got, {"a.txt": "modified", "c.txt": "added", "d": "added",
                               "d/g": "added", "h.txt": "deleted", "hd/keep": "deleted",
                               "hd/new": "added", "conf.txt": "modified"}, out)
        # the host's conf.txt changed since the sandbox started: a conflict
        time.sleep(0.05)
        with open(os.path.join(self.ws, "conf.txt"), "w") as f:
            f.write("theirs\n")
        r = self.ab("commit", sid)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("changed on the host since the layer started: conf.txt", r.stderr)
        with open(os.path.join(self.ws, "a.txt")) as f:
            self.assertEqual(f.read(), "v1\n")  # nothing written before the check
        self.ok("commit", "--force", sid)
        def read(name):
            with open(os.path.join(self.ws, name)) as f:
                return f.read()
        self.assertEqual((read("a.txt"), read("c.txt"), read("d/g"), read("hd/new"),
                          read("conf.txt")), ("v4\n", "new\n", "2\n", "n\n", "mine\n"))
        self.assertEqual(sorted(os.listdir(self.ws)),
                         ["a.txt", "c.txt", "conf.txt", "d", "hd"])
        self.assertEqual(os.listdir(os.path.join(self.ws, "hd")), ["new"])
        out = json.loads(self.ok("changes", "--json", sid))
        self.assertEqual(out["changes"], [])
        # the merged view is the review's alone: nothing of it stays
        for d in self.layer_dirs():
            self.assertNotIn("merged", os.listdir(d))

    def test_tmp_and_home_restored(self):
        """/tmp and the home directory are in a checkpoint: a restore
        brings back an earlier content there, removes a later file, and
        each keeps its mode, its owner and the size limit it had."""
        sid = self.create("--workspace-mode", "overlay")
        before = self.sh(sid, 'stat -c "%a %u" /tmp "$HOME"')
        self.sh(sid, 'echo t1 > /tmp/t; echo h1 > "$HOME/h"; mkdir /tmp/d;'
                     ' echo in > /tmp/d/f')
        out = json.loads(self.ok("checkpoints", "--json", sid))
        reply = self.ab("checkpoint", sid)
        self.assertEqual(reply.returncode, 0, reply.stderr)
        self.sh(sid, 'echo t2 > /tmp/t; echo h2 > "$HOME/h"; echo later > /tmp/later;'
                     ' rm -r /tmp/d; echo new > "$HOME/n"')
        self.ok("restore", sid, "c1")
        self.assertEqual(self.sh(sid, 'cat /tmp/t "$HOME/h" /tmp/d/f; ls /tmp; ls "$HOME"'),
                         "t1\nh1\nin\nd\nt\nh\n")
        self.assertEqual(self.sh(sid, 'stat -c "%a %u" /tmp "$HOME"'), before)
        # a plain user's write where it could before, none where it could not
        self.sh(sid, "echo again > /tmp/t; touch /tmp/x && rm /tmp/x")
        r = self.ab("exec", sid, "-c", "echo x > /etc/agentbox-test")
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(self.sh(sid, "stat -f -c %T /tmp"), "overlayfs\n")
        self.assertEqual(out["paths"], ["/workspace", "/tmp",
                                        self.sh(sid, 'echo "$HOME"').strip()])
        listed = json.loads(self.ok("checkpoints", "--json", sid))["checkpoints"]
        # the files of c1's layers of /tmp and home (the git identity's too)
        gitconfig = int(self.sh(sid, 'cat "$HOME/.gitconfig" 2>/dev/null | wc -c'))
        self.assertEqual(listed[0]["own_bytes"], len("t1\nh1\nin\n") + gitconfig)

    def test_tmp_size_limit_holds(self):
        """--tmpfs-size bounds /tmp's layers together: what a checkpoint
        keeps still counts after the file is deleted."""
        sid = self.create("--workspace-mode", "overlay", "--tmpfs-size", "8M")
        self.sh(sid, "head -c 6000000 /dev/zero > /tmp/big")
        self.ok("checkpoint", sid)
        self.sh(sid, "rm /tmp/big")
        r = self.ab("exec", sid, "-c", "head -c 6000000 /dev/zero > /tmp/big2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("No space left", r.stderr)
        self.ok("restore", sid, "c1")
        self.assertEqual(self.sh(sid, "wc -c < /tmp/big"), "6000000\n")

    def test_bad_requests(self):
        sid = self.create("--workspace-mode", "overlay")
        r = self.ab("restore", sid, "nope")
        self.assertEqual(r.returncode, 125)
        self.assertIn("no checkpoint nope", r.stderr)
        self.ok("checkpoint", "--name", "x", sid)
        r = self.ab("checkpoint", "--name", "x", sid)
        self.assertEqual(r.returncode, 125)
        self.assertIn("already", r.stderr)
        r = self.ab("checkpoint", "--name", "../up", sid)
        self.assertEqual(r.returncode, 125)
        self.assertIn("'name' must be", r.stderr)
        r = self.ab("changes", "--since", "nope", sid)
        self.assertEqual(r.returncode, 125)

    def test_depth_limit_refused_then_restore(self):
        """63 checkpoints in a row stand the workspace (and /tmp) on 64
        layers; the next is refused saying what to do, and a restore goes
        on from the earlier checkpoint's depth (docs/checkpoints.md,
        "Bounds")."""
        sid = self.create("--workspace-mode", "overlay")
        c = Client(self.sock(sid))
        self.addCleanup(c.close)
        self.assertEqual(c.recv()["type"], "hello")
        for i in range(64):
            c.send(id="w%d" % i, op="exec", command="echo %d > n; echo %d > /tmp/n" % (i, i))
            while c.recv().get("id") != "w%d" % i:
                pass
            c.send(id="c%d" % i, op="checkpoint")
            while True:
                m = c.recv()
                if m.get("id") == "c%d" % i:
                    break
            if i < 63:
                self.assertEqual(m["type"], "result", m)
        self.assertEqual(m["type"], "error")
        self.assertEqual(m["code"], "invalid_request")
        self.assertIn("restore an earlier checkpoint", m["message"])
        c.close()  # one client at a time: the CLI's turn
        time.sleep(0.2)
        self.assertEqual(self.sh(sid, "cat n /tmp/n"), "63\n63\n")
        self.ok("restore", sid, "c5")
        self.assertEqual(self.sh(sid, "cat n /tmp/n"), "4\n4\n")
        self.assertEqual(self.ok("checkpoint", "--name", "again", sid).strip(), "again")

    def test_layer_quota(self):
        """--layer-quota: a checkpoint is refused once the caller's layers
        hold that much (root's layers directory is shared with whatever
        else root runs here: only a refusal is certain below a quota)."""
        sid = self.create("--workspace-mode", "overlay", "--layer-quota", "1M")
        self.sh(sid, "head -c 2000000 /dev/zero > big")
        r = self.ab("checkpoint", sid)
        self.assertEqual(r.returncode, 125)
        self.assertIn("the quota is 1048576 (--layer-quota)", r.stderr)
        self.assertEqual(json.loads(self.ok("checkpoints", "--json", sid))["checkpoints"], [])
        roomy = self.create("--workspace-mode", "overlay", "--layer-quota", "1000000G")
        self.sh(roomy, "head -c 2000000 /dev/zero > big")
        self.assertEqual(self.ok("checkpoint", roomy).strip(), "c1")
        r = self.ab("create", "--workspace", self.ws, "--layer-quota", "1k")
        self.assertEqual(r.returncode, 125)
        self.assertIn("--layer-quota", r.stderr)

    def test_a_bind_of_the_workspace_is_a_link_to_it(self):
        # overlay mode: --bind WS:/src names /workspace, whatever overlay
        # is mounted there now; nothing reaches the host
        sid = self.create("--workspace-mode", "overlay", "--bind", self.ws + ":/src")
        self.assertEqual(self.sh(sid, "readlink /src").strip(), "/workspace")
        self.sh(sid, "echo v2 > /src/a.txt")
        self.ok("checkpoint", sid)
        self.sh(sid, "echo v3 > /src/a.txt")
        self.assertEqual(self.sh(sid, "cat /workspace/a.txt"), "v3\n")
        self.ok("restore", sid, "c1")
        self.assertEqual(self.sh(sid, "cat /src/a.txt"), "v2\n")
        with open(os.path.join(self.ws, "a.txt")) as f:
            self.assertEqual(f.read(), "v1\n")

    def test_direct_mode_refused(self):
        sid = self.create()
        r = self.ab("checkpoint", sid)
        self.assertEqual(r.returncode, 125)
        self.assertIn("direct mode", r.stderr)
        self.assertIn("--workspace-mode overlay", r.stderr)
        row = [s for s in json.loads(self.ok("ls", "--json")) if s["id"] == sid][0]
        self.assertIsNone(row["disk"])

    def test_busy_while_a_command_runs(self):
        sid = self.create("--workspace-mode", "overlay")
        c = Client(self.sock(sid))
        self.addCleanup(c.close)
        self.assertEqual(c.recv()["type"], "hello")
        c.send(id="long", op="exec", command="sleep 30")
        time.sleep(0.3)
        c.send(id="cp", op="checkpoint")
        while True:
            m = c.recv()
            if m.get("id") == "cp":
                break
        self.assertEqual(m["type"], "error")
        self.assertEqual(m["code"], "busy")
        self.assertIn("commands are running", m["message"])
        c.send(id="cancel", op="cancel", target="long")
        while c.recv().get("id") != "long":  # its result: it ended
            pass
        c.send(id="cp2", op="checkpoint", name="later")
        while True:
            m = c.recv()
            if m.get("id") == "cp2":
                break
        self.assertEqual(m["type"], "result", m)
        self.assertEqual(m["checkpoint"], "later")
        c.send(id="ls", op="checkpoints")
        while True:
            m = c.recv()
            if m.get("id") == "ls":
                break
        self.assertEqual([x["name"] for x in m["checkpoints"]], ["later"])

    def test_protected_paths_stay_read_only(self):
        os.makedirs(os.path.join(self.ws, ".git", "hooks"))
        with open(os.path.join(self.ws, ".git", "config"), "w") as f:
            f.write("[core]\n")
        sid = self.create("--workspace-mode", "overlay")
        before = self.ab("exec", sid, "-c", "echo x >> .git/config")
        self.assertNotEqual(before.returncode, 0)
        self.ok("checkpoint", sid)
        after = self.ab("exec", sid, "-c", "echo x >> .git/config")
        self.assertNotEqual(after.returncode, 0, "a protected path became writable")
        self.assertEqual(self.sh(sid, "cat .git/config"), "[core]\n")

    def test_independent_of_size(self):
        """A checkpoint copies nothing: 3,000 files and a 64 MiB file
        written before it stay in the one layer that holds them, and the
        layers together hold them once (no clock: bench/checkpoint
        measures the time)."""
        sid = self.create("--workspace-mode", "overlay")
        self.sh(sid, "mkdir t && cd t && for i in $(seq 3000); do echo $i > f$i; done;"
                " head -c 67108864 /dev/zero > ../big")
        self.ok("checkpoint", sid)
        self.assertEqual(self.sh(sid, "ls t | wc -l; wc -c < big"), "3000\n67108864\n")
        listed = json.loads(self.ok("checkpoints", "--json", sid))["checkpoints"]
        self.assertGreaterEqual(listed[0]["bytes"], 67108864)
        # ls: the disk the layers take, every checkpoint's
        row = [s for s in json.loads(self.ok("ls", "--json")) if s["id"] == sid][0]
        self.assertGreaterEqual(row["disk"], 67108864 + 3000)
        self.assertIn("DISK", self.ok("ls").splitlines()[0])
        self.ok("checkpoint", sid)
        listed = json.loads(self.ok("checkpoints", "--json", sid))["checkpoints"]
        self.assertLess(sum(c["bytes"] for c in listed), 67108864 * 3 // 2, listed)


if __name__ == "__main__":
    unittest.main()
