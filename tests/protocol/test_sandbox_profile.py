"""agentbox serve --profile (docs/profiles.md): the profile's limits, mounts
and defaults are those of the session, the command line overrides them, a
bad profile starts no session, and a shipped profile serves commands.
AGENTBOX_BIN names the binary."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fileops import BIN, Server, make_dir  # noqa: E402


class SandboxProfile(unittest.TestCase):
    def setUp(self):
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws)
        self.conf = tempfile.mkdtemp(prefix="agentbox-profile-")
        os.chmod(self.conf, 0o755)
        self.addCleanup(shutil.rmtree, self.conf)
        os.mkdir(os.path.join(self.conf, "data"))
        with open(os.path.join(self.conf, "data", "f"), "w") as f:
            f.write("from the profile\n")

    def profile(self, obj, text=None):
        path = os.path.join(self.conf, "p.json")
        with open(path, "w") as f:
            f.write(text if text is not None else json.dumps(obj))
        return path

    def serve(self, *args):
        try:
            sv = Server(self.ws, *args)
        except AssertionError as e:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                raise
            self.skipTest(f"agentbox cannot run here: {e}")
        self.addCleanup(sv.close)
        return sv

    def test_the_session_is_what_the_profile_says(self):
        p = self.profile({"memory": "80M", "max-concurrent": 3, "timeout": "9s",
                          "seccomp": "strict", "ro-bind": ["data:/data"],
                          "env": ["FROM_PROFILE=yes"]})
        # best: without a cgroup the profile's memory cannot hold as asked
        sv = self.serve("--profile", p, "--limits", "best")
        self.assertEqual(sv.hello["limits"]["memory"]["value"], 80 << 20)
        self.assertEqual(sv.hello["limits"]["seccomp"], "strict")
        self.assertEqual(sv.hello["max_concurrent"], 3)
        self.assertEqual(sv.hello["defaults"]["timeout_ms"], 9000)
        m = sv.call(op="exec", command="cat /data/f; echo $FROM_PROFILE; "
                    "touch /data/new 2>/dev/null && echo WRITABLE; cat /data/f")
        self.assertEqual((m["exit_code"], m["stdout"]),
                         (0, "from the profile\nyes\nfrom the profile\n"), m)
        self.assertFalse(os.path.exists(os.path.join(self.conf, "data", "new")))

    def test_the_command_line_overrides_the_profile(self):
        p = self.profile({"memory": "80M", "max-concurrent": 3, "timeout": "9s"})
        sv = self.serve("--max-concurrent", "5", "--profile", p, "--memory", "100M",
                        "--limits", "best")
        self.assertEqual(sv.hello["limits"]["memory"]["value"], 100 << 20)
        self.assertEqual(sv.hello["max_concurrent"], 5)
        self.assertEqual(sv.hello["defaults"]["timeout_ms"], 9000)

    def test_a_bad_profile_starts_no_session(self):
        for obj, text, words in (
                (None, '{"pids": "lots"}', '"pids": \'lots\' is not a number'),
                (None, '{"report": "r.json"}', '"report" belongs on the command line'),
                (None, '{"pids": 1, "pids": 2}', '"pids" is given twice'),
                (None, '{"pids": 1', "invalid JSON at line 1"),
        ):
            with self.subTest(text=text):
                p = self.profile(obj, text)
                r = subprocess.run([BIN, "serve", "--workspace", self.ws, "--profile", p],
                                   input=b'{"id": 1, "op": "exec", "command": "true"}\n',
                                   capture_output=True, timeout=30)
                self.assertEqual(r.returncode, 125)
                self.assertEqual(r.stdout, b"")
                err = r.stderr.decode()
                self.assertTrue(err.startswith(f"agentbox: profile {p}: "), err)
                self.assertIn(words, err)
                self.assertEqual(err.count("\n"), 1, err)

    def test_a_shipped_profile_serves_commands(self):
        # best: without a cgroup its memory and cpus cannot hold as asked
        sv = self.serve("--profile", "untrusted", "--limits", "best")
        self.assertEqual(sv.hello["limits"]["seccomp"], "strict")
        self.assertEqual(sv.hello["limits"]["pids"]["value"], 64)
        # pids hold for every user: a cgroup's or RLIMIT_NPROC
        self.assertIn(sv.hello["limits"]["pids"]["how"], ("cgroup", "rlimit"))
        m = sv.call(op="exec", command="echo hi > f; cat f")
        self.assertEqual((m["exit_code"], m["stdout"]), (0, "hi\n"), m)


if __name__ == "__main__":
    unittest.main()
