"""The overlay workspace (docs/workspace.md): the agent's writes land in a
layer; the host's files change only on commit. agentbox.Sandbox with
workspace_mode="overlay" against the real server (AGENTBOX_BIN), and the
CLI's changes/commit/discard on a kept layer."""

import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import unittest

from agentbox import CommitConflict, ProtocolError
from support import ROOT, UID, sandbox, workspace

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")


def tree(root):
    """{relative path: (kind, content or target, mode)} of everything."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p), 0)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", None, stat.S_IMODE(st.st_mode))
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read(), stat.S_IMODE(st.st_mode))
    return out


def remove_tree(path):
    """shutil.rmtree that also gets through overlayfs's mode-0 work/work."""
    def onerror(func, p, exc):
        parent = os.path.dirname(p)
        for d in (parent, p):
            try:
                if os.path.isdir(d) and not os.path.islink(d):
                    os.chmod(d, 0o700)
            except OSError:
                pass
        shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else func(p)
    shutil.rmtree(path, onerror=onerror)


def populate(ws):
    os.makedirs(os.path.join(ws, "src/lib"))
    files = {"README": b"read me\n", "src/main.c": b"int main(void) { return 0; }\n",
             "src/lib/util.c": b"/* util */\n", "data.bin": bytes(range(256)) * 4}
    for rel, data in files.items():
        with open(os.path.join(ws, rel), "wb") as f:
            f.write(data)
    if ROOT:
        for d, dirs, names in os.walk(ws):
            for n in dirs + names:
                os.lchown(os.path.join(d, n), UID, UID)


def populate_owner(ws):
    for d, dirs, names in os.walk(ws):
        for n in dirs + names:
            os.lchown(os.path.join(d, n), UID, UID)


class Overlay(unittest.TestCase):
    def setUp(self):
        self.ws = workspace()
        self.addCleanup(shutil.rmtree, self.ws, True)
        populate(self.ws)
        self.before = tree(self.ws)

    def open(self, **kw):
        sb = sandbox(self.ws, workspace_mode="overlay", **kw)
        self.addCleanup(sb.close)
        self.assertEqual(sb.hello.get("workspace_mode"), "overlay")
        return sb

    def test_agent_wrecks_the_tree_and_the_host_is_untouched_until_commit(self):
        sb = self.open()
        r = sb.run("rm -rf ./* && echo new > README && mkdir -p src && "
                   "echo 'int x;' > src/new.c && echo more >> README && ls -A")
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["README", "src"])
        self.assertEqual(tree(self.ws), self.before)
        got = {(c.path, c.status) for c in sb.changes()}
        self.assertEqual(got, {("README", "modified"), ("data.bin", "deleted"),
                               ("src/lib", "deleted"), ("src/main.c", "deleted"),
                               ("src/new.c", "added")})
        diff = {c.path: c for c in sb.changes(diff=True)}
        self.assertIn("-read me\n+new\n+more\n", diff["README"].diff)
        self.assertIsNone(diff["data.bin"].diff)  # binary: no diff
        res = sb.commit()
        self.assertEqual(sorted(res.committed), sorted(p for p, _ in got))
        self.assertEqual(sorted(os.listdir(self.ws)), ["README", "src"])
        self.assertEqual(os.listdir(os.path.join(self.ws, "src")), ["new.c"])
        with open(os.path.join(self.ws, "README")) as f:
            self.assertEqual(f.read(), "new\nmore\n")
        self.assertEqual(sb.changes(), [])  # what was committed is no change

    def test_checkpoint_and_restore(self):
        """docs/checkpoints.md: undo after a bad step, the host untouched."""
        sb = self.open()
        self.assertEqual(sb.run("echo v2 > README").exit_code, 0)
        self.assertEqual(sb.checkpoint(), "c1")
        self.assertEqual(sb.run("rm -rf src; echo bad > README").exit_code, 0)
        got = {c["path"]: c["status"] for c in sb.changes_since("c1")}
        self.assertEqual(got, {"README": "written", "src": "deleted"})
        sb.restore("c1")
        r = sb.run("cat README; ls src")
        self.assertEqual(r.stdout, "v2\nlib\nmain.c\n")
        self.assertEqual([c["name"] for c in sb.checkpoints()], ["c1"])
        with self.assertRaises(ProtocolError):
            sb.restore("nope")
        self.assertEqual(tree(self.ws), self.before)

    def test_changes_leave_out_what_gitignore_ignores(self):
        with open(os.path.join(self.ws, ".gitignore"), "w") as f:
            f.write("build/\n*.pyc\n!keep.pyc\n/top.log\n# a comment\ndocs/**/gen\n")
        os.makedirs(os.path.join(self.ws, "sub"))
        with open(os.path.join(self.ws, "sub", ".gitignore"), "w") as f:
            f.write("local.txt\n")
        if ROOT:
            populate_owner(self.ws)
        sb = self.open()
        r = sb.run("mkdir -p build/x sub/d docs/a/b/gen && for f in build/x/o a.pyc keep.pyc "
                   "top.log sub/top.log sub/local.txt sub/d/local.txt docs/a/b/gen/f "
                   "src/new.c; do echo x > $f; done")
        self.assertEqual(r.exit_code, 0, r.stderr)
        shown = {c.path for c in sb.changes()}
        self.assertEqual(shown, {"keep.pyc", "sub/top.log", "sub/d", "docs", "docs/a",
                                 "docs/a/b", "src/new.c"})
        every = {c.path: c.ignored for c in sb.changes(include_ignored=True)}
        hidden = {p for p, ign in every.items() if ign}
        self.assertEqual(hidden, {"build", "build/x", "build/x/o", "a.pyc", "top.log",
                                  "sub/local.txt", "sub/d/local.txt", "docs/a/b/gen",
                                  "docs/a/b/gen/f"})
        self.assertEqual(set(every) - hidden, shown)
        self.assertEqual(sb.request("changes")["ignored_count"], len(hidden))
        # the command's own .gitignore counts, and is itself always shown:
        # hiding everything cannot hide that it hides
        sb.run("echo '*' > .gitignore && echo y > more.c")
        self.assertEqual({c.path for c in sb.changes()}, {".gitignore"})
        self.assertIn("more.c", {c.path for c in sb.changes(include_ignored=True)})
        # deleted in the layer: nothing is ignored any more
        sb.run("rm .gitignore sub/.gitignore")
        self.assertIn("a.pyc", {c.path for c in sb.changes()})
        self.assertIn("sub/local.txt", {c.path for c in sb.changes()})
        # a FIFO or a symlink in its place is not read (no hang, nothing ignored)
        sb.run("mkfifo .gitignore && ln -s ../.gitignore sub/.gitignore")
        self.assertIn("a.pyc", {c.path for c in sb.changes()})
        self.assertIn("sub/local.txt", {c.path for c in sb.changes()})

    def test_partial_commit_and_a_second_round(self):
        sb = self.open()
        sb.run("echo a > README; echo b > src/main.c; rm src/lib/util.c")
        self.assertEqual(sb.commit(["src/main.c"]).committed, ["src/main.c"])
        now = tree(self.ws)
        self.assertEqual(now["src/main.c"][1], b"b\n")
        self.assertEqual(now["README"], self.before["README"])
        self.assertIn("src/lib/util.c", now)
        # the agent goes on with the committed file: no conflict with itself
        sb.run("echo c >> src/main.c")
        self.assertEqual(sb.commit(["/workspace/src"]).committed,
                         ["src/lib/util.c", "src/main.c"])
        self.assertNotIn("src/lib/util.c", tree(self.ws))
        with self.assertRaises(ProtocolError) as cm:
            sb.commit(["no/such/change"])
        self.assertEqual(cm.exception.code, "invalid_request")
        with self.assertRaises(ProtocolError):
            sb.commit(["../outside"])

    def test_conflict_refuses_everything_unless_forced(self):
        sb = self.open()
        sb.run("echo agent > README; echo agent > src/main.c")
        time.sleep(0.01)
        with open(os.path.join(self.ws, "README"), "w") as f:
            f.write("user\n")
        self.assertEqual({c.path for c in sb.changes() if c.conflict}, {"README"})
        with self.assertRaises(CommitConflict) as cm:
            sb.commit()
        self.assertEqual(cm.exception.paths, ["README"])
        self.assertEqual(tree(self.ws)["src/main.c"], self.before["src/main.c"])
        self.assertEqual(sorted(sb.commit(force=True).committed), ["README", "src/main.c"])
        self.assertEqual(tree(self.ws)["README"][1], b"agent\n")

    def test_commit_keeps_modes_times_links_and_follows_no_symlink(self):
        sb = self.open()
        sb.run("echo x > tool && chmod 751 tool && touch -d 2001-02-03 tool && "
               "ln tool tool2 && ln -s README rl && mkdir -m 700 priv && echo p > priv/f")
        sb.commit(["tool", "tool2", "rl", "priv"])
        st = os.stat(os.path.join(self.ws, "tool"))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o751)
        self.assertEqual(time.gmtime(st.st_mtime)[:3], (2001, 2, 3))
        self.assertEqual(st.st_ino, os.stat(os.path.join(self.ws, "tool2")).st_ino)
        self.assertEqual(os.readlink(os.path.join(self.ws, "rl")), "README")
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.ws, "priv")).st_mode), 0o700)
        # a directory of the workspace replaced by a symlink out of it on
        # the host: a commit beneath it is refused, nothing lands outside
        outside = tempfile.mkdtemp(prefix="agentbox-outside-")
        self.addCleanup(shutil.rmtree, outside, True)
        sb.run("mkdir -p esc && echo evil > esc/f")
        os.symlink(outside, os.path.join(self.ws, "esc"))
        with self.assertRaises(ProtocolError):
            sb.commit(["esc/f"], force=True)
        self.assertEqual(os.listdir(outside), [])

    def test_whiteouts_are_never_copied_as_devices(self):
        sb = self.open()
        sb.run("rm README && mv src moved")
        ch = {c.path: c.status for c in sb.changes()}
        self.assertEqual(ch.get("README"), "deleted")
        self.assertEqual(ch.get("src"), "deleted")
        sb.commit()
        for d, dirs, files in os.walk(self.ws):
            for n in dirs + files:
                m = os.lstat(os.path.join(d, n)).st_mode
                self.assertFalse(stat.S_ISCHR(m) or stat.S_ISBLK(m), n)
        self.assertEqual(sorted(os.listdir(self.ws)), ["data.bin", "moved"])

    def test_discard_leaves_nothing_on_disk(self):
        keep = os.path.join(tempfile.mkdtemp(prefix="agentbox-layer-"), "layer")
        self.addCleanup(shutil.rmtree, os.path.dirname(keep), True)
        sb = self.open(keep_changes=keep)
        sb.run("rm -rf src; echo z > README; dd if=/dev/zero of=big bs=64k count=16")
        self.assertTrue(os.path.isdir(os.path.join(keep, "upper")))
        sb.discard()
        self.assertTrue(sb.closed)
        self.assertFalse(os.path.exists(keep))
        self.assertEqual(tree(self.ws), self.before)

    def test_the_default_layer_goes_with_the_session(self):
        sb = self.open()
        sb.run("echo x > new")
        layer = sb.request("changes")["layer"]
        self.assertTrue(os.path.isdir(layer))
        sb.close()
        self.assertFalse(os.path.exists(layer))

    def test_file_operations_work_over_the_overlay(self):
        sb = self.open()
        self.assertIsNone(sb.write("/workspace/notes.txt", "one\ntwo\n").error)
        self.assertIsNone(sb.edit("/workspace/src/main.c", "return 0", "return 1").error)
        self.assertIn("return 1", sb.read_text("/workspace/src/main.c"))
        self.assertIn("/workspace/notes.txt", [f["path"] for f in sb.glob_info("*.txt")])
        self.assertTrue(sb.grep_raw("two", "/workspace"))
        up = sb.upload_files([("/workspace/up.bin", b"\0\1\2")])
        self.assertIsNone(up[0].error)
        self.assertEqual(sb.download_files(["/workspace/data.bin"])[0].content,
                         self.before["data.bin"][1])
        self.assertIn("/workspace/up.bin", [f["path"] for f in sb.ls_info("/workspace")])
        sb.delete("/workspace/README")
        self.assertEqual(tree(self.ws), self.before)
        self.assertEqual({(c.path, c.status) for c in sb.changes()},
                         {("notes.txt", "added"), ("src/main.c", "modified"),
                          ("up.bin", "added"), ("README", "deleted")})

    def test_protected_paths_stay_protected(self):
        os.makedirs(os.path.join(self.ws, ".git/hooks"))
        if ROOT:
            for p in (".git", ".git/hooks"):
                os.chown(os.path.join(self.ws, p), UID, UID)
        sb = self.open()
        r = sb.run("echo evil > .git/hooks/pre-commit")
        self.assertNotEqual(r.exit_code, 0)
        r = sb.run("mv .git .old")
        self.assertNotEqual(r.exit_code, 0)
        self.assertEqual([c.path for c in sb.changes()], [])

    def test_workspace_on_tmpfs(self):
        if not os.path.isdir("/dev/shm") or os.statvfs("/dev/shm").f_bsize == 0:
            raise unittest.SkipTest("no /dev/shm")
        with open("/proc/self/mounts") as f:
            if not any(l.split()[1] == "/dev/shm" and l.split()[2] == "tmpfs" for l in f):
                raise unittest.SkipTest("/dev/shm is not a tmpfs here")
        ws = tempfile.mkdtemp(prefix="agentbox-ovl-", dir="/dev/shm")
        self.addCleanup(shutil.rmtree, ws, True)
        populate(ws)
        if ROOT:
            os.chown(ws, UID, UID)
        before = tree(ws)
        sb = sandbox(ws, workspace_mode="overlay")
        self.addCleanup(sb.close)
        sb.run("rm -rf src; echo t > README")
        self.assertEqual(tree(ws), before)
        sb.commit()
        self.assertEqual(sorted(os.listdir(ws)), ["README", "data.bin"])

    def test_direct_mode_has_no_layer(self):
        sb = sandbox(self.ws)
        self.addCleanup(sb.close)
        self.assertEqual(sb.hello.get("workspace_mode"), "direct")
        with self.assertRaises(ProtocolError) as cm:
            sb.changes()
        self.assertEqual(cm.exception.code, "invalid_request")


class KeptLayer(unittest.TestCase):
    """agentbox run --keep-changes DIR, then agentbox changes/commit/discard."""

    def setUp(self):
        self.ws = workspace()
        self.addCleanup(shutil.rmtree, self.ws, True)
        populate(self.ws)
        self.tmp = tempfile.mkdtemp(prefix="agentbox-kept-")
        self.addCleanup(remove_tree, self.tmp)
        self.layer = os.path.join(self.tmp, "layer")

    def run_in(self, script):
        args = [BIN, "run", "--workspace", self.ws, "--workspace-mode", "overlay",
                "--keep-changes", self.layer]
        if ROOT:
            args += ["--host-uid", str(UID)]
        p = subprocess.run(args + ["-c", script], capture_output=True, text=True)
        if p.returncode == 125 and "user namespace" in p.stderr and \
                os.environ.get("AGENTBOX_MUST_WORK") != "1":
            raise unittest.SkipTest(p.stderr)
        self.assertEqual(p.returncode, 0, p.stderr)

    def cli(self, *args):
        return subprocess.run([BIN] + list(args), capture_output=True, text=True)

    def test_run_keep_changes_then_review(self):
        self.run_in("echo v2 > README; rm data.bin; echo n > new")
        self.assertEqual(tree(self.ws)["README"][1], b"read me\n")
        p = self.cli("changes", self.layer)
        self.assertEqual(p.stdout.split("\n")[:3], [" M README", " D data.bin", " A new"])
        # a second run goes on with the same layer
        self.run_in("test \"$(cat README)\" = v2 && echo v3 > README")
        p = self.cli("commit", self.layer, "README")
        self.assertEqual((p.returncode, p.stdout), (0, "README\n"), p.stderr)
        self.assertEqual(tree(self.ws)["README"][1], b"v3\n")
        p = self.cli("discard", self.layer)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(self.layer))
        self.assertIn("data.bin", tree(self.ws))
        p = self.cli("changes", self.layer)
        self.assertEqual(p.returncode, 125)
        self.assertIn("cannot open the layer", p.stderr)

    def test_commit_follows_no_symlink_without_openat2_either(self):
        outside = tempfile.mkdtemp(prefix="agentbox-outside-")
        self.addCleanup(shutil.rmtree, outside, True)
        self.run_in("mkdir -p esc/sub && echo evil > esc/sub/f && echo ok > fine")
        os.symlink(outside, os.path.join(self.ws, "esc"))
        for env in ({}, {"AGENTBOX_TEST_NO_OPENAT2": "1"}):
            p = subprocess.run([BIN, "commit", "--force", self.layer, "esc/sub/f"],
                               capture_output=True, text=True, env=dict(os.environ, **env))
            self.assertEqual(p.returncode, 125, (env, p.stdout))
            self.assertIn("cannot commit 'esc/sub/f'", p.stderr)
            self.assertEqual(os.listdir(outside), [], env)
        # the host's symlink is newer than the layer: a conflict; forced,
        # the layer's directory replaces the link, which is never followed
        self.assertEqual(self.cli("commit", self.layer, "esc").returncode, 1)
        p = self.cli("commit", "--force", self.layer, "esc", "fine")
        self.assertEqual((p.returncode, p.stdout), (0, "esc\nesc/sub\nesc/sub/f\nfine\n"),
                         p.stderr)
        self.assertEqual(os.listdir(outside), [])
        self.assertFalse(os.path.islink(os.path.join(self.ws, "esc")))

    def test_layers_left_by_a_killed_launcher_are_removed(self):
        env = dict(os.environ)
        if ROOT:
            base = "/var/lib/agentbox/layers"
        else:
            env["XDG_STATE_HOME"] = self.tmp
            base = os.path.join(self.tmp, "agentbox", "layers")
        os.makedirs(base, exist_ok=True)
        stale = tempfile.mkdtemp(dir=base)
        kept = tempfile.mkdtemp(dir=base)
        self.addCleanup(shutil.rmtree, kept, True)
        self.addCleanup(shutil.rmtree, stale, True)
        for d, extra in ((stale, ""), (kept, "kept=1\n")):
            os.makedirs(os.path.join(d, "upper"))
            # overlayfs leaves work/work mode 0: the sweep still removes it
            os.makedirs(os.path.join(d, "work", "work"), mode=0 if d == stale else 0o755)
            with open(os.path.join(d, "layer.info"), "w") as f:
                f.write("agentbox-layer 1\nworkspace=%s\nstarted=1.0\n%s" % (self.ws, extra))
        args = [BIN, "run", "--workspace", self.ws, "--workspace-mode", "overlay"]
        if ROOT:
            args += ["--host-uid", str(UID)]
        p = subprocess.run(args + ["--", "true"], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(stale))
        self.assertTrue(os.path.exists(os.path.join(kept, "layer.info")))

    @unittest.skipUnless(ROOT, "root's idmapped workspace")
    def test_root_overlays_an_idmapped_workspace(self):
        ws = tempfile.mkdtemp(prefix="agentbox-idmap-")  # root's own
        self.addCleanup(shutil.rmtree, ws, True)
        with open(os.path.join(ws, "old"), "w") as f:
            f.write("old\n")
        p = subprocess.run([BIN, "run", "--workspace", ws, "--workspace-mode", "overlay",
                            "--keep-changes", self.layer, "-c",
                            "echo new > old && echo n > added && stat -c %u added"],
                           capture_output=True, text=True)
        if p.returncode == 125 and "idmap" in p.stderr and \
                os.environ.get("AGENTBOX_MUST_WORK") != "1":
            raise unittest.SkipTest(p.stderr)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(ws, "old")) as f:
            self.assertEqual(f.read(), "old\n")
        self.assertEqual(self.cli("commit", self.layer).returncode, 0)
        st = os.stat(os.path.join(ws, "added"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))  # the workspace owner's
        with open(os.path.join(ws, "old")) as f:
            self.assertEqual(f.read(), "new\n")

    def test_bad_input(self):
        p = self.cli("run", "--workspace-mode", "copy", "--", "true")
        self.assertEqual(p.returncode, 125)
        self.assertIn("--workspace-mode: 'copy' is not one of direct, overlay", p.stderr)
        p = self.cli("run", "--workspace", self.ws, "--keep-changes", self.layer, "--", "true")
        self.assertEqual(p.returncode, 125)
        self.assertIn("only with --workspace-mode overlay", p.stderr)
        self.assertFalse(os.path.exists(self.layer))
        p = self.cli("run", "--workspace", self.ws, "--workspace-mode", "overlay",
                     "--keep-changes", os.path.join(self.ws, "in"), "--", "true")
        self.assertEqual(p.returncode, 125)
        self.assertIn("overlaps the workspace", p.stderr)
        p = self.cli("discard", self.ws)  # not a layer: never removed
        self.assertEqual(p.returncode, 125)
        self.assertTrue(os.path.isdir(self.ws))

    def test_a_killed_commit_leaves_each_file_old_or_new(self):
        names = ["f%03d" % i for i in range(64)]
        old, new = b"o" * (1 << 20), b"n" * (1 << 20)
        for n in names:
            with open(os.path.join(self.ws, n), "wb") as f:
                f.write(old)
        if ROOT:
            for n in names:
                os.chown(os.path.join(self.ws, n), UID, UID)
        self.run_in("for f in f*; do tr o n < $f > $f.t && mv $f.t $f; done")
        p = subprocess.Popen([BIN, "commit", self.layer], stdout=subprocess.DEVNULL)
        time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        for n in names:
            with open(os.path.join(self.ws, n), "rb") as f:
                self.assertIn(f.read(), (old, new), n)
        # and a commit after it finishes the job
        p = self.cli("commit", "--force", self.layer)
        self.assertEqual(p.returncode, 0, p.stderr)
        for n in names:
            with open(os.path.join(self.ws, n), "rb") as f:
                self.assertEqual(f.read(), new, n)


if __name__ == "__main__":
    unittest.main()
