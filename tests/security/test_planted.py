"""Files planted in the workspace for the host to run later: git hooks, git
config, shell rc files (README "Protected workspace paths")."""

import json
import os
import shutil
import subprocess
import unittest

import harness
from harness import (BIN, ROOT, SANDBOX_UID, RunMode, Attacks, base_options, both_modes,
                     one_mode)

HOOK = "#!/bin/sh\necho original hook\n"
FILES = {
    ".git/hooks/pre-commit": HOOK,
    ".git/config": "[core]\n\trepositoryformatversion = 0\n",
    ".bashrc": "# original bashrc\n",
    ".profile": "# original profile\n",
    ".git/HEAD": "ref: refs/heads/main\n",
}


def plant(ws, files=FILES):
    for rel, content in files.items():
        p = os.path.join(ws, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(content)
        os.chmod(p, 0o755 if "hooks" in rel else 0o644)
    if ROOT:  # the sandbox user owns them: only agentbox keeps them read-only
        for d, dirs, names in os.walk(ws):
            for n in dirs + names:
                os.chown(os.path.join(d, n), SANDBOX_UID, SANDBOX_UID)


def tree(ws):
    out = {}
    for d, dirs, names in os.walk(ws):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, ws)] = (os.lstat(p).st_mode, f.read())
    return out


# every way to change an existing file or the directory holding it
CHANGE = ('f=$1; echo "echo pwned" >> "$f" && echo "APPENDED $f"; '
          'echo "echo pwned" > "$f" && echo "TRUNCATED $f"; '
          'chmod 777 "$f" && echo "CHMOD $f"; '
          'echo "echo pwned" > /tmp/x; mv /tmp/x "$f" && echo "MOVED-OVER $f"; '
          'cp /tmp/x "$f.new" && mv "$f.new" "$f" && echo "RENAMED-OVER $f"; '
          'rm -f "$f.new"; rm -f "$f" && echo "REMOVED $f"; '
          'ln -sf /tmp/x "$f" && echo "SYMLINKED $f"; '
          'python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY); '
          'os.write(fd, b\'pwned\')" "$f" 2>/dev/null && echo "PYWROTE $f"; '
          'truncate -s 0 "$f" && echo "TRUNCATE $f"; true')


class Planted(Attacks):
    def setUp(self):
        super().setUp()
        plant(self.ws)
        self.before = tree(self.ws)

    def attack(self, *files):
        out = ""
        for f in files:
            r = self.sh(CHANGE, args=("sh", f))
            out += r.out
            self.assertIn("Read-only file system", r.err, r)
        for mark in ("APPENDED", "TRUNCATED", "CHMOD", "MOVED-OVER", "RENAMED-OVER", "REMOVED",
                     "SYMLINKED", "PYWROTE", "TRUNCATE"):
            self.assertNotIn(mark, out)
        self.assertEqual(tree(self.ws), self.before)

    def test_existing_git_hook(self):
        self.attack(".git/hooks/pre-commit")
        r = self.sh("echo 'echo pwned' > .git/hooks/post-checkout && echo CREATED; "
                    "mkdir .git/hooks/x && echo MKDIR; chmod 777 .git/hooks && echo CHMOD; "
                    "mv .git/hooks .git/old && echo MOVED; true")
        self.assertEqual(r.out, "", r)
        self.assertEqual(tree(self.ws), self.before)

    def test_existing_git_config(self):
        self.attack(".git/config")
        r = self.sh("git config core.fsmonitor 'echo pwned' && echo SET; "
                    "git config core.hooksPath /workspace/evil && echo SET; "
                    "git -c safe.directory='*' config core.pager pwned && echo SET; true")
        self.assertNotIn("SET", r.out, r)
        self.assertEqual(tree(self.ws), self.before)

    def test_existing_shell_rc_files(self):
        self.attack(".bashrc", ".profile")

    def test_moving_the_parent_of_a_protected_path_away(self):
        # .git/hooks is read-only, .git itself is not: move .git away and
        # build a new .git/hooks in its place
        r = self.sh("mv .git .git-old && echo MOVED; mv .git/hooks/.. /tmp/g && echo MOVED; "
                    "mkdir -p .git/hooks; echo 'echo pwned' > .git/hooks/pre-commit; "
                    "rmdir .git 2>/dev/null && echo REMOVED; "
                    "echo data > .git/objects-new && echo WROTE-INSIDE-GIT; true")
        self.assertNotIn("MOVED", r.out, r)
        self.assertNotIn("REMOVED", r.out, r)
        self.assertIn("WROTE-INSIDE-GIT", r.out, r)  # .git stays writable for git
        if not harness.OVERLAY:  # in the layer, not on the host
            os.unlink(os.path.join(self.ws, ".git", "objects-new"))
        self.assertEqual(tree(self.ws), self.before)


both_modes(globals(), Planted)


class PlantedReport(Attacks):
    """Run only, with --protect-created report (the default quarantines
    them: test_quarantine.py): protected paths that did not exist at the
    start may be created (so `git init` works), and `agentbox run` then
    reports them in `protected_paths_changed` and on stderr, and leaves
    them. A session has no such report: it runs many commands and writes no
    per-command report of the workspace."""

    def run_report(self, script):
        r, w = os.pipe()
        p = subprocess.run([BIN, "run", *base_options(self.ws), "--protect-created", "report",
                            "--report", "fd:%d" % w, "--",
                            "/bin/sh", "-c", script], pass_fds=(w,), capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, timeout=60)
        os.close(w)

        with os.fdopen(r) as f:
            return p, json.load(f)

    def test_created_protected_paths_are_reported(self):
        p, rep = self.run_report("mkdir -p .git/hooks && echo 'echo pwned' > .git/hooks/pre-commit"
                                 " && printf '[core]\\n\\tfsmonitor = echo pwned\\n' > .git/config"
                                 " && echo pwned > .bashrc && echo pwned > .profile")
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(sorted(rep["protected_paths_changed"]),
                         [".bashrc", ".git/config", ".git/hooks", ".profile"], rep)
        self.assertIn("protected workspace paths", p.stderr)
        for f in (".git/hooks", ".git/config", ".bashrc", ".profile"):
            self.assertIn(f, p.stderr)

    def test_git_init_is_reported_without_a_warning(self):
        # what `git init` makes is in the report, not on stderr; one hook
        # or one config key more and the warning is back
        p, rep = self.run_report("git init -q")
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(sorted(rep["protected_paths_changed"]), [".git/config", ".git/hooks"], rep)
        self.assertEqual(p.stderr, "", p)
        # in an overlay workspace, .git went with the run's layer
        if "overlay" not in harness.EXTRA_OPTIONS:
            shutil.rmtree(os.path.join(self.ws, ".git"))
        p, rep = self.run_report("git init -q && git config core.hooksPath /tmp && "
                                 "echo 'echo pwned' > .git/hooks/post-checkout")
        self.assertEqual(sorted(rep["protected_paths_changed"]), [".git/config", ".git/hooks"], rep)
        self.assertIn("protected workspace paths: .git/hooks .git/config", p.stderr)

one_mode(globals(), PlantedReport, RunMode)

if __name__ == "__main__":
    unittest.main()
