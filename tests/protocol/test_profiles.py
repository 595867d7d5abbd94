"""agentbox serve under every shipped seccomp profile: the session's own
plumbing works whatever the profile denies to commands, and the profile
still applies to the commands. AGENTBOX_BIN names the binary."""

import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fileops import Server, make_dir  # noqa: E402


class Profiles(unittest.TestCase):
    def session(self, profile):
        ws = make_dir()
        self.addCleanup(shutil.rmtree, ws)
        try:
            sv = Server(ws, "--seccomp", profile)
        except AssertionError as e:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                raise
            self.skipTest(f"agentbox cannot run here: {e}")
        self.addCleanup(sv.close)
        return sv

    def test_every_profile_runs_commands_and_file_operations(self):
        for profile in ("default", "strict", "permissive"):
            with self.subTest(profile=profile):
                sv = self.session(profile)
                m = sv.call(op="exec", argv=["/bin/sh", "-c", "echo hi > f; cat f"])
                self.assertEqual((m["type"], m["exit_code"], m["stdout"]),
                                 ("result", 0, "hi\n"), m)
                m = sv.call(op="read", path="f")
                self.assertEqual((m["type"], m["content"]), ("result", "hi\n"), m)
                # several at once: each needs a shim and fds passed to it
                ids = [sv.send(op="exec", command="sleep 0.2; echo %d" % i) for i in range(4)]
                got = {}
                while len(got) < 4:
                    m = sv.recv()
                    got[m["id"]] = m
                self.assertEqual([got[i]["stdout"] for i in ids],
                                 ["%d\n" % i for i in range(4)])

    def test_strict_still_denies_sockets_to_commands(self):
        sv = self.session("strict")
        m = sv.call(op="exec", argv=["python3", "-c",
                                     "import socket\n"
                                     "try:\n socket.socket()\nexcept OSError as e:\n"
                                     " print(e.errno)"])
        self.assertEqual(m["stdout"], "1\n", m)  # EPERM
        self.assertIn("socket", [d["syscall"] for d in m["denied_syscalls"]])


if __name__ == "__main__":
    unittest.main()
