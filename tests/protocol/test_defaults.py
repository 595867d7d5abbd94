"""The defaults files (docs/profiles.md, "Defaults files"): the user's
$XDG_CONFIG_HOME/agentbox/config.json applies to run and serve before
--profile and the command line; bad content is refused naming the file and
the key; a file others may write is refused; AGENTBOX_CONFIG names another
file or none; agentbox check says which applied. AGENTBOX_BIN names the
binary."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fileops import BIN, make_dir  # noqa: E402


class Defaults(unittest.TestCase):
    def setUp(self):
        self.xdg = tempfile.mkdtemp(prefix="agentbox-xdg-")
        self.addCleanup(shutil.rmtree, self.xdg, True)
        os.mkdir(os.path.join(self.xdg, "agentbox"))
        self.file = os.path.join(self.xdg, "agentbox", "config.json")
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.env = {k: v for k, v in os.environ.items() if k != "AGENTBOX_CONFIG"}
        self.env["XDG_CONFIG_HOME"] = self.xdg

    def write(self, obj, mode=0o644):
        with open(self.file, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        os.chmod(self.file, mode)

    def run_ab(self, *args, env=None, input=None):
        return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60,
                              env=env or self.env, input=input)

    def test_the_users_timeout_applies_and_the_command_line_wins(self):
        self.write({"timeout": "1s", "env": ["FROM_DEFAULTS=yes"]})
        r = self.run_ab("run", "--workspace", self.ws, "--", "sh", "-c",
                        "echo $FROM_DEFAULTS; sleep 5")
        self.assertEqual((r.returncode, r.stdout), (124, "yes\n"), r.stderr)
        self.assertIn("timed out after 1s", r.stderr)
        # -t too: a timeout the user set bounds a terminal's command
        r = self.run_ab("run", "--workspace", self.ws, "--timeout", "10s", "--",
                        "sh", "-c", "sleep 1.5; echo done")
        self.assertEqual((r.returncode, r.stdout), (0, "done\n"), r.stderr)

    def test_it_applies_to_a_session(self):
        self.write({"hostname": "from-defaults"})
        r = self.run_ab("serve", "--workspace", self.ws,
                        input='{"op":"exec","id":1,"command":"hostname"}\n')
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        self.assertEqual(lines[-1]["stdout"], "from-defaults\n", r.stderr)

    def test_bad_content_is_refused_naming_the_file_and_key(self):
        self.write({"timeout": "soon"})
        r = self.run_ab("run", "--workspace", self.ws, "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(self.file, r.stderr)
        self.assertIn("timeout", r.stderr)
        self.write("{not json")
        r = self.run_ab("run", "--workspace", self.ws, "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(self.file, r.stderr)
        # --help needs no defaults, even broken ones
        self.assertEqual(self.run_ab("run", "--help").returncode, 0)

    def test_a_file_others_may_write_is_refused(self):
        self.write({"timeout": "5m"}, mode=0o666)
        r = self.run_ab("run", "--workspace", self.ws, "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn("may be written by others", r.stderr)
        self.assertIn("chmod go-w", r.stderr)

    def test_agentbox_config_names_another_or_none(self):
        self.write({"timeout": "soon"})  # broken: never read below
        other = os.path.join(self.xdg, "other.json")
        with open(other, "w") as f:
            json.dump({"env": ["WHICH=other"]}, f)
        r = self.run_ab("run", "--workspace", self.ws, "--", "sh", "-c", "echo $WHICH",
                        env=dict(self.env, AGENTBOX_CONFIG=other))
        self.assertEqual((r.returncode, r.stdout), (0, "other\n"), r.stderr)
        r = self.run_ab("run", "--workspace", self.ws, "--", "true",
                        env=dict(self.env, AGENTBOX_CONFIG="none"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_ab("run", "--workspace", self.ws, "--", "true",
                        env=dict(self.env, AGENTBOX_CONFIG=other + ".missing"))
        self.assertEqual(r.returncode, 125)
        self.assertIn("no such file", r.stderr)

    def test_check_says_which_applied(self):
        self.write({"timeout": "5m"})
        r = self.run_ab("check", "--json")
        items = {i["name"]: i for i in json.loads(r.stdout)["checks"]}
        self.assertIn(self.file, items["defaults"]["detail"])


if __name__ == "__main__":
    unittest.main()
