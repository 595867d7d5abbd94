"""Shell completion through the script `agentbox completion bash` prints,
as bash runs it: every command, and every option each command's --help
lists, is offered (so an option added without completion fails here);
values of --net, profiles, and the caller's sandbox ids. AGENTBOX_BIN names
the binary."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")


def complete(*words, env=None):
    """What bash's completion offers for the line `agentbox WORDS...`, the
    last word being typed."""
    script = subprocess.run([BIN, "completion", "bash"], capture_output=True, text=True,
                            check=True, timeout=30).stdout
    words = " ".join("'%s'" % w for w in (BIN,) + words)
    prog = (script + "\nCOMP_WORDS=(%s); COMP_CWORD=%d; _agentbox; "
            "printf '%%s\\n' \"${COMPREPLY[@]}\"\n" % (words, len(words.split()) - 1))
    r = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=30,
                       env=env)
    if r.returncode != 0:
        raise AssertionError("bash: " + r.stderr)
    return set(r.stdout.split())


def help_options(command):
    """The options `agentbox COMMAND --help` lists: in its usage line(s) for
    this command, and at the start of its option lines."""
    text = subprocess.run([BIN, command, "--help"], capture_output=True, text=True,
                          timeout=30).stdout
    usage, found = True, set()
    for line in text.split("\n"):
        if not line.strip():
            usage = False
        elif usage and re.search(r"agentbox %s\b" % command, line):
            found.update(re.findall(r"(?<=[\[|])(--?[a-zA-Z][\w-]*)", line))
        elif not usage and re.match(r"^\s{2,}-", line):
            lead = re.match(r"^\s+((?:--?[a-zA-Z][\w-]*(?:, )?)+)", line).group(1)
            found.update(re.findall(r"--?[a-zA-Z][\w-]*", lead))
    # the layer commands share one --help: only their own usage lines count
    if command in ("changes", "commit", "discard"):
        found = {o for o in found if re.search(r"agentbox %s .*%s" % (command, re.escape(o)),
                                               text)}
    return found - {"-h"}


class Completion(unittest.TestCase):
    def test_every_command_is_offered(self):
        commands = complete("")
        for c in ("run", "serve", "mcp", "runtime", "create", "exec", "connect", "ls", "rm",
                  "pause", "resume", "check", "images", "changes", "commit", "discard"):
            self.assertIn(c, commands)
        self.assertEqual(complete("ex"), {"exec"})

    def test_every_option_of_every_command_is_offered(self):
        commands = sorted(complete("") - {"--help", "--version", "completion"})
        for c in commands:
            with self.subTest(command=c):
                listed = help_options(c)
                offered = complete(c, "-")
                if c in ("run", "serve", "runtime", "create", "exec", "check", "changes"):
                    self.assertTrue(listed, "no option found in %s --help" % c)
                missing = sorted(listed - offered)
                self.assertEqual(missing, [], "agentbox %s: in --help, not completed" % c)

    def test_values_and_profiles(self):
        self.assertTrue({"none", "host", "allow=", "secret="} <= complete("run", "--net", ""))
        self.assertIn("untrusted", complete("run", "--profile", "un"))
        self.assertEqual(complete("serve", "--workspace-mode", "o"), {"overlay"})
        # an option's value is not taken for the command's first word
        self.assertIn("--quiet", complete("run", "--timeout", "5s", "--q"))

    def test_sandbox_ids(self):
        rt = tempfile.mkdtemp(prefix="ab-rt-")
        os.chmod(rt, 0o700)
        self.addCleanup(shutil.rmtree, rt, True)
        ws = tempfile.mkdtemp(prefix="ab-ws-")
        self.addCleanup(shutil.rmtree, ws, True)
        env = dict(os.environ, AGENTBOX_RUNTIME_DIR=rt)
        r = subprocess.run([BIN, "create", "--workspace", ws, "--name", "compl-1"],
                           capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(subprocess.run, [BIN, "rm", "-f", "compl-1"], env=env, timeout=60,
                        capture_output=True)
        self.assertEqual(complete("exec", "co", env=env), {"compl-1"})
        self.assertEqual(complete("rm", "", env=env), {"compl-1"})
        # after the id, exec's command
        self.assertIn("sh", complete("exec", "compl-1", "s", env=env))


if __name__ == "__main__":
    unittest.main()
