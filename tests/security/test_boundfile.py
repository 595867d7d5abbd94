"""A --bind of a regular file onto the view's own tmpfs ($HOME here): copied
in, and synced back to the host file when the sandbox ends (README.md,
"Bound files"). A program's atomic save (a temporary file renamed over it)
works, and what the sandbox leaves at the destination is hostile: a symlink,
a FIFO, a directory or nothing is never followed, waited on or written
anywhere but the one host file, and a host file changed meanwhile is never
overwritten."""

import hashlib
import os
import shutil
import stat
import tempfile
import threading
import unittest

from harness import Attacks, EXTRA_OPTIONS, ROOT, both_modes

# /tmp is the sandbox's own tmpfs whatever the system (the battery also runs
# on an --image, whose $HOME is the image's)
DST = "/tmp/cfg.json"
IMAGE = "--image" in EXTRA_OPTIONS
SAVE = ("import os\n"
        "p = %r\n"
        "open(p + '.tmp', 'w').write(open(p).read() + 'saved\\n')\n"
        "os.replace(p + '.tmp', p)\n"
        "print('SAVED')\n") % DST


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class BoundFile(Attacks):
    def setUp(self):
        super().setUp()
        self.home = tempfile.mkdtemp(prefix="agentbox-bindfile-")
        self.addCleanup(shutil.rmtree, self.home, True)
        os.chmod(self.home, 0o755)
        self.src = os.path.join(self.home, "cfg.json")
        with open(self.src, "w") as f:
            f.write('{"a": 1}\n')
        os.chmod(self.src, 0o640)

    def run_box(self, script, more=()):
        """script in a new sandbox with the file bound; the sandbox ended
        (serve: shut down) before it returns, so the sync is done."""
        b = self.sandbox(options=("--bind", self.src + ":" + DST, *more))
        r = b.sh(script)
        b.close()
        return r

    def host(self):
        with open(self.src) as f:
            return f.read()

    def assert_untouched(self):
        self.assertEqual(self.host(), '{"a": 1}\n')
        self.assertEqual(sorted(os.listdir(self.home)), ["cfg.json"])

    def test_atomic_save_reaches_the_host(self):
        r = self.run_box("python3 -c \"$(cat <<'EOF'\n%s\nEOF\n)\"" % SAVE)
        self.assertEqual(r.code, 0, r)
        self.assertIn("SAVED", r.out, r)
        self.assertEqual(self.host(), '{"a": 1}\nsaved\n')
        st = os.stat(self.src)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o640)  # its mode kept
        self.assertEqual(st.st_uid, os.getuid())
        self.assertEqual(sorted(os.listdir(self.home)), ["cfg.json"])  # no temp file left

    def test_write_in_place_reaches_the_host(self):
        r = self.run_box("echo more >> %s; exit 3" % DST)
        self.assertEqual(r.code, 3, r)  # the command's status is still the result
        self.assertEqual(self.host(), '{"a": 1}\nmore\n')

    def test_unchanged_file_is_not_rewritten(self):
        ino = os.stat(self.src).st_ino
        r = self.run_box("cat %s" % DST)
        self.assertEqual(r.out, '{"a": 1}\n', r)
        self.assertEqual(os.stat(self.src).st_ino, ino)

    def test_host_change_meanwhile_gives_a_conflict_file(self):
        sig = tempfile.mkdtemp(prefix="agentbox-bindfile-sig-")
        self.addCleanup(shutil.rmtree, sig, True)
        os.chmod(sig, 0o777)

        def host_writer():
            for _ in range(600):
                if os.path.exists(os.path.join(sig, "started")):
                    break
                threading.Event().wait(0.05)
            with open(self.src, "w") as f:
                f.write("host\n")
            open(os.path.join(sig, "go"), "w").close()
        t = threading.Thread(target=host_writer)
        t.start()
        try:
            r = self.run_box("echo sandbox > %s; touch /sig/started; i=0; "
                             "while [ ! -e /sig/go ] && [ $i -lt 400 ]; do sleep 0.05; "
                             "i=$((i+1)); done" % DST, more=("--bind", sig + ":/sig"))
        finally:
            t.join()
        self.assertEqual(r.code, 0, r)
        self.assertEqual(self.host(), "host\n")  # the host's write is not lost
        with open(self.src + ".agentbox-conflict") as f:
            self.assertEqual(f.read(), "sandbox\n")
        if self.mode.name == "run":
            self.assertIn("changed on the host while the sandbox ran", r.err)

    def test_symlink_planted_at_the_destination(self):
        passwd = digest("/etc/passwd")
        r = self.run_box("rm %s && ln -s /etc/passwd %s && echo PLANTED" % (DST, DST))
        self.assertIn("PLANTED", r.out, r)
        self.assert_untouched()
        self.assertEqual(digest("/etc/passwd"), passwd)
        if self.mode.name == "run":
            self.assertIn("is not synced back", r.err)

    def test_symlink_to_a_host_path_planted_at_the_destination(self):
        # a link that names the host file's own path, or a file next to it
        target = os.path.join(self.home, "elsewhere")
        r = self.run_box("rm %s && ln -s %s %s && echo PLANTED" % (DST, target, DST))
        self.assertIn("PLANTED", r.out, r)
        self.assert_untouched()
        self.assertFalse(os.path.lexists(target))

    def test_fifo_planted_at_the_destination_does_not_hang(self):
        r = self.run_box("rm %s && mkfifo %s && echo PLANTED" % (DST, DST))
        self.assertIn("PLANTED", r.out, r)
        self.assert_untouched()

    def test_directory_planted_at_the_destination(self):
        r = self.run_box("rm %s && mkdir %s && echo x > %s/f && echo PLANTED" % (DST, DST, DST))
        self.assertIn("PLANTED", r.out, r)
        self.assert_untouched()

    def test_deleted_destination_leaves_the_host_file(self):
        r = self.run_box("rm %s && echo GONE" % DST)
        self.assertIn("GONE", r.out, r)
        self.assert_untouched()
        if self.mode.name == "run":
            self.assertIn("was deleted in the sandbox", r.err)

    def test_over_the_bound_is_not_synced(self):
        r = self.run_box("head -c 70000000 /dev/zero > %s; echo BIG" % DST)
        self.assertIn("BIG", r.out, r)
        self.assert_untouched()
        if self.mode.name == "run":
            self.assertIn("over 64 MiB", r.err)

    def test_read_only_bind_of_a_file_stays_a_mount(self):
        b = self.sandbox(options=("--ro-bind", self.src + ":" + DST))
        r = b.sh("echo x > %s.tmp; mv %s.tmp %s 2>&1; echo x >> %s 2>&1; cat %s"
                 % (DST, DST, DST, DST, DST))
        b.close()
        self.assertIn('{"a": 1}', r.out, r)
        self.assert_untouched()

    def test_readme_recipe(self):
        """README's line for Claude Code, with a script in its place (and
        without -t). On an image, whose /home has no agent, $HOME is put
        elsewhere first."""
        claude = os.path.join(self.home, ".claude")
        os.mkdir(claude)
        os.chmod(claude, 0o777 if ROOT else 0o755)
        home = "/tmp/agent" if IMAGE else "/home/agent"
        b = self.sandbox(options=(("--home", home) if IMAGE else ()) + (
            "--net", "allow=api.anthropic.com",
            "--bind", claude + ":" + home + "/.claude",
            "--bind", self.src + ":" + home + "/.claude.json"))
        r = b.sh("cd " + home + " && echo '{\"b\":2}' > .claude.json.tmp.$$ && "
                 "mv .claude.json.tmp.$$ .claude.json && echo hist > .claude/history && "
                 "echo OK")
        b.close()
        self.assertIn("OK", r.out, r)
        self.assertEqual(self.host(), '{"b":2}\n')
        with open(os.path.join(claude, "history")) as f:
            self.assertEqual(f.read(), "hist\n")


both_modes(globals(), BoundFile)

if __name__ == "__main__":
    unittest.main()
