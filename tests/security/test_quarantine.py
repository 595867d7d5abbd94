"""Protected paths a command creates never stay live on the host (docs/workspace.md,
"Protected paths a command creates"): a `.git/config` naming a program, a hook,
a `.git` pointing elsewhere are renamed aside before the result, so the
`git status` a shell prompt runs the moment the command ends runs nothing of
the command's. The red team's reproduction (issue 46, item 5), through
`agentbox run` and `agentbox serve`."""

import glob
import os
import shutil
import subprocess
import time
import unittest

import harness
from harness import Attacks, both_modes, make_dir, one_mode

FSMONITOR = "git init -q && git config core.fsmonitor 'touch PWNED'"
HOOKS_PATH = ("git init -q && mkdir h && printf '#!/bin/sh\\ntouch PWNED\\n' > h/pre-commit && "
              "chmod +x h/pre-commit && git config core.hooksPath h")
HOOK = ("git init -q && printf '#!/bin/sh\\ntouch PWNED\\n' > .git/hooks/pre-commit && "
        "chmod +x .git/hooks/pre-commit")
# as `git init --separate-git-dir` makes it, with a path the host reads too
GITFILE = ("git init -q elsewhere && mv elsewhere/.git elsewhere/repo && "
           "echo 'gitdir: elsewhere/repo' > .git && git config core.fsmonitor 'touch PWNED'")


def text_of(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


class HostGit(Attacks):
    def host_git(self, *args):
        """git on the host as the test's user, in the workspace, reading no
        system or global configuration of the machine."""
        home = make_dir(prefix="agentbox-sec-home-")
        self.addCleanup(shutil.rmtree, home, True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
        return subprocess.run(["git", *args], cwd=self.ws, env=env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    def prompt(self):
        """What a shell prompt and the user's next steps run on the host."""
        self.host_git("status")
        self.host_git("commit", "-q", "--allow-empty", "-m", "host")
        self.host_git("checkout", "-q", "-b", "host-branch")

    def pwned(self):
        return os.path.exists(os.path.join(self.ws, "PWNED"))


class Quarantine(HostGit):
    def attack(self, script, quarantined, fresh=True):
        r = self.sh(script)
        self.assertEqual(r.code, 0, r)
        self.prompt()
        self.assertFalse(self.pwned(), "the host ran what the command planted: %r" % r)
        if harness.OVERLAY:  # the host workspace got none of it: review decides
            if fresh:
                self.assertFalse(os.path.lexists(os.path.join(self.ws, ".git")), r)
            return r
        got = {q["path"]: q for q in r.raw["protected_paths_quarantined"]}
        self.assertEqual(sorted(got), sorted(quarantined), r.raw)
        for path, q in got.items():
            self.assertIn(path, r.raw["protected_paths_changed"], r.raw)
            self.assertTrue(q["moved_to"].startswith(path + ".agentbox-quarantine-"), q)
            self.assertTrue(os.path.lexists(os.path.join(self.ws, q["moved_to"])), q)
            self.assertFalse(os.path.lexists(os.path.join(self.ws, path)), q)
            if self.mode is harness.RunMode:  # and on stderr, with the way back
                self.assertIn("mv -T %s %s" % (q["moved_to"], path), r.err)
        return r

    def test_core_fsmonitor(self):
        r = self.attack(FSMONITOR, [".git/config"])
        if not harness.OVERLAY:
            q = r.raw["protected_paths_quarantined"][0]
            self.assertEqual(q["reason"], "sets core.fsmonitor", q)
            # what git init made stays: the host still has a repository
            self.assertEqual(self.host_git("rev-parse", "--git-dir").stdout, ".git\n")

    def test_core_hooks_path(self):
        self.attack(HOOKS_PATH, [".git/config"])

    def test_an_executable_hook(self):
        r = self.attack(HOOK, [".git/hooks"])
        if not harness.OVERLAY:
            q = r.raw["protected_paths_quarantined"][0]
            self.assertIn("pre-commit", q["reason"], q)

    def test_a_git_file_pointing_elsewhere(self):
        # .git as a file (gitdir:) or a symlink: no .git/config to look at
        self.attack(GITFILE, [".git"])
        if harness.OVERLAY:
            return
        shutil.rmtree(os.path.join(self.ws, "elsewhere"))
        for f in glob.glob(os.path.join(self.ws, ".git*")):
            os.unlink(f)
        self.attack("mkdir e && git -C e init -q && git -C e config core.fsmonitor "
                    "'touch ../PWNED' && ln -s e/.git .git", [".git"])

    def test_a_config_rewritten_by_a_later_command(self):
        # a plain git init stays; a later command that appends to the
        # config it made (same inode) is caught after that command
        r = self.attack("git init -q && git -c user.name=a -c user.email=a@b "
                        "commit -q --allow-empty -m one", [])
        self.assertEqual(r.raw["protected_paths_quarantined"] if not harness.OVERLAY else [],
                         [])
        if harness.OVERLAY:
            return
        self.assertIn("one", self.host_git("log", "--oneline").stdout)
        if self.mode is harness.RunMode:  # there at the start of this run: read-only
            r = self.sh("printf '[core]\\n\\tfsmonitor = touch PWNED\\n' >> .git/config")
            self.assertIn("Read-only file system", r.err, r)
            return
        self.attack("printf '[core]\\n\\tfsmonitor = touch PWNED\\n' >> .git/config",
                    [".git/config"])

    def test_a_plain_repository_stays(self):
        # git init, a commit, a remote, an identity: all kept, and the
        # host's git reads the repository
        r = self.sh("git init -q && git config user.name me && git config user.email me@x && "
                    "git remote add origin https://example.com/r.git && "
                    "echo hi > f && git add f && git commit -q -m first && "
                    "git branch --set-upstream-to=origin/main 2>/dev/null; true")
        self.assertEqual(r.code, 0, r)
        if harness.OVERLAY:
            return
        self.assertEqual(r.raw["protected_paths_quarantined"], [], r.raw)
        self.assertIn("first", self.host_git("log", "--oneline").stdout)
        self.assertEqual(self.host_git("remote", "get-url", "origin").stdout,
                         "https://example.com/r.git\n")
        self.assertEqual(r.err.count("agentbox:"), 0, r)

    def test_a_git_directory_left_read_only(self):
        # the rename needs .git writable: agentbox makes it so, and back
        git = os.path.join(self.ws, ".git")
        self.addCleanup(lambda: os.path.isdir(git) and os.chmod(git, 0o755))
        self.attack(FSMONITOR + " && chmod 555 .git", [".git/config"])
        if not harness.OVERLAY:
            self.assertEqual(os.stat(git).st_mode & 0o777, 0o555)

    def test_commondir_in_an_existing_repository(self):
        # .git/config is read-only, but a .git/commondir makes git read
        # another repository's config instead
        self.assertEqual(self.host_git("init", "-q").returncode, 0)
        self.attack("git init -q --bare evil && git -C evil config core.fsmonitor 'touch PWNED' "
                    "&& echo ../evil > .git/commondir", [".git/commondir"], fresh=False)

    def test_other_protected_paths(self):
        self.attack("echo 'touch PWNED' > .bashrc && mkdir .vscode && echo {} > .vscode/x",
                    [".bashrc", ".vscode"])

    def test_report_keeps_the_old_behaviour(self):
        # --protect-created report: left in place and reported, and the
        # host's git then runs it (what the default prevents)
        r = self.sh(FSMONITOR, options=("--protect-created", "report"))
        self.assertEqual(r.code, 0, r)
        if harness.OVERLAY:
            return
        self.assertEqual(r.raw["protected_paths_quarantined"], [], r.raw)
        self.assertIn(".git/config", r.raw["protected_paths_changed"], r.raw)
        self.host_git("status")
        self.assertTrue(self.pwned(), "the reproduction no longer works: the test proves nothing")


class QuarantineAtTheEnd(HostGit):
    """Serve only: what a kept background process or a file operation
    creates after the last command's check is put out of effect when the
    session ends, once every process of it is gone (`run` has one command,
    checked after all of its processes)."""

    def test_a_kept_background_process_and_a_file_operation(self):
        b = self.box()
        m = b.call({"op": "exec", "keep_background": True,
                    "command": "(sleep 1; " + FSMONITOR + ") >/dev/null 2>&1 &"})
        self.assertEqual(m["type"], "result", m)
        self.assertEqual(b.call({"op": "write", "path": ".bashrc",
                                 "content": "touch PWNED\n"})["type"], "result")
        config = os.path.join(self.ws, ".git", "config")
        for _ in range(200):  # the background process's git config, up to 20 s
            if harness.OVERLAY or "fsmonitor" in text_of(config):
                break
            time.sleep(0.1)
        b.close()
        self.prompt()
        self.assertFalse(self.pwned())
        if harness.OVERLAY:
            return
        self.assertFalse(os.path.exists(config))
        self.assertFalse(os.path.exists(os.path.join(self.ws, ".bashrc")))
        self.assertEqual(len(glob.glob(config + ".agentbox-quarantine-*")), 1)
        self.assertEqual(len(glob.glob(os.path.join(self.ws, ".bashrc.agentbox-quarantine-*"))),
                         1)


both_modes(globals(), Quarantine)
one_mode(globals(), QuarantineAtTheEnd, harness.ServeMode)

if __name__ == "__main__":
    unittest.main()
