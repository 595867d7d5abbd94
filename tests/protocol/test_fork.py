"""agentbox fork (docs/checkpoints.md): new detached sandboxes whose
workspace starts at a checkpoint of another's, standing on its layers. Five
forks from one checkpoint each see its state and neither each other's
writes nor the parent's later ones; they keep the parent's options; a fork
of a fork stands on both; the layers outlive the parent and go with the
last sandbox on them (rm of all leaves nothing on disk, in any order);
bad input (an unknown checkpoint, a count out of bounds, a direct-mode
parent, a name taken) is refused (125) with nothing made; a parent killed
mid-fork leaves nothing rm and the stale sweep cannot clean. Runs as root
and as an unprivileged user."""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_checkpoint import CheckpointBase  # noqa: E402
from test_detach import BIN, Client  # noqa: E402


class Forks(CheckpointBase):
    def fork(self, sid, *args):
        out = self.ok("fork", *args, sid).split()
        self.made.extend(out)
        return out

    def ids(self):
        return sorted(self.ls())

    def test_five_forks_from_one_checkpoint(self):
        sid = self.create("--workspace-mode", "overlay", "--hostname", "par",
                          "--env", "FORKED_ENV=kept")
        self.sh(sid, "echo v2 > a.txt; echo b > b.txt; head -c 4194304 /dev/zero > big")
        self.ok("checkpoint", "--name", "base", sid)
        self.sh(sid, "echo v3 > a.txt; echo later > later.txt")  # after it
        forks = self.fork(sid, "--from", "base", "--count", "5", "--name", "try")
        self.assertEqual(forks, ["try-%d" % i for i in range(1, 6)])
        # no file copied: the forks' layer directories hold next to nothing
        dirs = self.layer_dirs()
        self.assertEqual(len(dirs), 6)
        sizes = sorted(sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(top)
                           for n in ns) for top in dirs)
        self.assertLess(sizes[-2], 65536, sizes)
        self.assertGreaterEqual(sizes[-1], 4194304, sizes)
        for f in forks:
            self.assertEqual(self.sh(f, "cat a.txt; ls"), "v2\na.txt\nb.txt\nbig\n")
            self.sh(f, "echo %s > mine.txt; rm b.txt big" % f)
            # the parent's options: its host name, its environment
            self.assertEqual(self.sh(f, "hostname; echo $FORKED_ENV"), "par\nkept\n")
        for f in forks:  # each its own writes only
            self.assertEqual(self.sh(f, "cat mine.txt; ls"), "%s\na.txt\nmine.txt\n" % f)
        # the parent goes on where it was, seeing none of theirs
        self.assertEqual(self.sh(sid, "cat a.txt; ls"), "v3\na.txt\nb.txt\nbig\nlater.txt\n")
        self.assertEqual([c["name"] for c in json.loads(
            self.ok("checkpoints", "--json", sid))["checkpoints"]], ["base"])
        with open(os.path.join(self.ws, "a.txt")) as f:
            self.assertEqual(f.read(), "v1\n")
        self.assertEqual(sorted(os.listdir(self.ws)), ["a.txt"])
        self.assertEqual(len(self.layer_dirs()), 6)
        # the parent goes first: its layers stay for the forks
        self.ok("rm", sid)
        self.assertEqual(self.sh(forks[0], "cat a.txt"), "v2\n")
        self.assertEqual(len(self.layer_dirs()), 6)
        self.ok("rm", *forks[:4])
        self.assertEqual(len(self.layer_dirs()), 2)  # the last fork's and the parent's
        self.ok("rm", forks[4])
        self.assertEqual(self.layer_dirs(), [])
        self.assertEqual(self.ids(), [])

    def test_fork_now_and_a_fork_of_a_fork(self):
        sid = self.create("--workspace-mode", "overlay")
        self.sh(sid, "echo p > p.txt")
        (f,) = self.fork(sid)
        # the state now, checkpointed in the parent first
        listed = json.loads(self.ok("checkpoints", "--json", sid))["checkpoints"]
        self.assertEqual([c["name"] for c in listed], ["c1"])
        self.assertEqual(self.sh(f, "cat p.txt"), "p\n")
        self.sh(f, "echo f > f.txt")
        self.ok("checkpoint", f)
        (g,) = self.fork(f, "--from", "c1")
        self.assertEqual(self.sh(g, "cat p.txt f.txt"), "p\nf\n")
        self.sh(g, "echo g > g.txt")
        self.assertEqual(self.sh(f, "ls"), "a.txt\nf.txt\np.txt\n")
        # a checkpoint and a restore of a fork keep the layers beneath it
        self.ok("checkpoint", g)
        self.sh(g, "rm p.txt")
        self.ok("restore", g, "c1")
        self.assertEqual(self.sh(g, "cat p.txt g.txt"), "p\ng\n")
        out = json.loads(self.ok("changes", "--json", "--since", "c1", g))
        self.assertEqual(out["changes"], [])
        self.ok("rm", f)  # the middle one first
        self.assertEqual(self.sh(g, "cat f.txt"), "f\n")
        self.ok("rm", sid, g)
        self.assertEqual(self.layer_dirs(), [])

    def test_tmp_and_home_start_at_the_checkpoint(self):
        sid = self.create("--workspace-mode", "overlay")
        self.sh(sid, "echo t1 > /tmp/before; mkdir -p /tmp/d/e; echo x > /tmp/d/e/x; "
                     "ln -s before /tmp/link; mkfifo /tmp/fifo; echo h > ~/home.txt; "
                     "echo gone > /tmp/gone; chmod 600 /tmp/before; "
                     # sparse: 8 GiB of holes, more than the tmpfs may hold
                     "printf s > /tmp/sparse; truncate -s 8G /tmp/sparse; "
                     "printf e >> /tmp/sparse; python3 -c \"import os; "
                     "os.setxattr('/tmp/before', 'user.big', b'ab' * 4096)\"")
        self.ok("checkpoint", sid)
        # deleted in a later layer of the parent's: a whiteout the fork copies
        self.sh(sid, "rm /tmp/gone; rm -r /tmp/d; mkdir /tmp/d; echo y > /tmp/d/y")
        self.ok("checkpoint", "--name", "c", sid)
        self.sh(sid, "echo after > /tmp/after; echo t2 > /tmp/before")  # after c
        (f,) = self.fork(sid, "--from", "c")
        self.assertEqual(self.sh(f, "cat /tmp/before ~/home.txt /tmp/d/y; readlink /tmp/link; "
                                    "stat -c %a /tmp/before; test -p /tmp/fifo && echo fifo; "
                                    "ls /tmp; ls /tmp/d"),
                         "t1\nh\ny\nbefore\n600\nfifo\nbefore\nd\nfifo\nlink\nsparse\ny\n")
        self.assertEqual(self.sh(f, "head -c 1 /tmp/sparse; tail -c 1 /tmp/sparse; "
                                    "stat -c %s /tmp/sparse"), "se8589934593\n")
        # a command's own attributes come along, a large one too (8 KiB)
        self.assertEqual(self.sh(f, "python3 -c \"import os; v = os.getxattr('/tmp/before', "
                                    "'user.big'); print(len(v), v[:2])\""), "8192 b'ab'\n")
        self.sh(f, "echo mine > /tmp/mine; echo f > /tmp/before")
        self.assertEqual(self.sh(sid, "cat /tmp/before; ls /tmp"),
                         "t2\nafter\nbefore\nd\nfifo\nlink\nsparse\n")
        # a fork's checkpoints and restores take its /tmp, over the copied layers
        self.ok("checkpoint", "--name", "fc", f)
        self.sh(f, "rm /tmp/before /tmp/mine")
        self.ok("restore", f, "fc")
        self.assertEqual(self.sh(f, "cat /tmp/before /tmp/mine"), "f\nmine\n")
        # a fork of a fork: the parent's layers copied on from the fork's copy
        (g,) = self.fork(f, "--from", "fc")
        self.ok("rm", sid, f)
        self.assertEqual(self.sh(g, "cat /tmp/before /tmp/mine ~/home.txt; ls /tmp"),
                         "f\nmine\nh\nbefore\nd\nfifo\nlink\nmine\nsparse\n")
        self.ok("rm", g)
        self.assertEqual(self.layer_dirs(), [])

    def test_review_and_commit_of_a_fork(self):
        """A fork's changes and commit are against the host: the layers
        it stands on (its parent's, up to the checkpoint) count with its
        own, and the parent's later writes do not."""
        sid = self.create("--workspace-mode", "overlay")
        self.sh(sid, "echo v2 > a.txt; echo p > p.txt")
        self.ok("checkpoint", "--name", "base", sid)
        self.sh(sid, "echo later > later.txt")
        (f,) = self.fork(sid, "--from", "base")
        self.sh(f, "echo f > f.txt")
        out = json.loads(self.ok("changes", "--json", f))
        got = {c["path"]: c["status"] for c in out["changes"]}
        self.assertEqual(got, {"a.txt": "modified", "p.txt": "added", "f.txt": "added"}, out)
        self.ok("commit", f)
        self.assertEqual(sorted(os.listdir(self.ws)), ["a.txt", "f.txt", "p.txt"])
        with open(os.path.join(self.ws, "a.txt")) as fh:
            self.assertEqual(fh.read(), "v2\n")
        for d in self.layer_dirs():
            self.assertNotIn("merged", os.listdir(d))
        self.ok("rm", sid, f)
        self.assertEqual(self.layer_dirs(), [])

    def test_bad_input_makes_nothing(self):
        sid = self.create("--workspace-mode", "overlay")
        self.ok("checkpoint", sid)
        layers = len(self.layer_dirs())
        for args, why in ((("--from", "nope"), "no checkpoint nope"),
                          (("--count", "0"), "from 1 to 100"),
                          (("--count", "101"), "from 1 to 100"),
                          (("--name", "-x"), "'name' must be"),
                          (("--name", sid), "exists already")):
            r = self.ab("fork", *args, sid)
            self.assertEqual(r.returncode, 125, args)
            self.assertIn(why, r.stderr)
            self.assertEqual(self.ids(), [sid], args)
            self.assertEqual(len(self.layer_dirs()), layers, args)
        # the protocol's bound too, and a fork while a command runs
        c = Client(self.sock(sid))
        self.addCleanup(c.close)
        self.assertEqual(c.recv()["type"], "hello")
        c.send(id="many", op="fork", count=101)
        m = c.recv()
        self.assertEqual((m["type"], m["code"]), ("error", "invalid_request"))
        c.send(id="long", op="exec", command="sleep 30")
        time.sleep(0.3)
        c.send(id="now", op="fork")
        while (m := c.recv()).get("id") != "now":
            pass
        self.assertEqual((m["type"], m["code"]), ("error", "busy"))
        c.send(id="from", op="fork", **{"from": "c1"})  # C is there: no switch
        while (m := c.recv()).get("id") != "from":
            pass
        self.assertEqual(m["type"], "result", m)
        self.made.extend(m["ids"])
        self.assertEqual(m["from"], "c1")
        c.send(id="cancel", op="cancel", target="long")
        # a direct-mode parent: said why
        d = self.create()
        r = self.ab("fork", d)
        self.assertEqual(r.returncode, 125)
        self.assertIn("direct mode", r.stderr)
        self.assertIn("--workspace-mode overlay", r.stderr)

    def test_parent_killed_mid_fork_leaves_nothing(self):
        sid = self.create("--workspace-mode", "overlay")
        self.sh(sid, "echo x > x.txt")
        self.ok("checkpoint", sid)
        pid = self.state(sid)["pid"]
        p = subprocess.Popen([BIN, "fork", "--from", "c1", "--count", "10", sid],
                             env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        p.communicate(timeout=60)
        left = self.ids()
        self.made.extend(left)
        # what was made works, or is removed whole
        # (one whose launcher the child had begun, and whose creator died
        # before it was ready, removes itself: it may go from the list)
        for f in left:
            info = self.ls().get(f)
            if f == sid or not info or info["state"] != "running":
                continue
            r = self.ab("exec", f, "-c", "cat x.txt")
            if f in self.ls():
                self.assertEqual((r.returncode, r.stdout), (0, "x\n"), r.stderr)
        if left:
            self.ok("rm", "-f", *left)
        self.assertEqual(self.ids(), [])
        self.assertEqual(self.layer_dirs(), [])
        self.assertEqual(os.listdir(self.rt), [])


if __name__ == "__main__":
    unittest.main()
