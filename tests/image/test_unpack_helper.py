"""The unpack and layout helpers (src/image/unpack_proc.c, layout_proc.c,
docs/security.md), looked at from outside: a layer is unpacked, and the
layout's JSON parsed, by processes apart from the launcher,
with no capability, no_new_privs, a seccomp filter, an unprivileged uid
when root runs it and no fd but its own; killed mid-unpack it leaves
nothing half-made in the cache and the start fails (125) saying so; the
hostile tars of the fuzz corpus (tests/fuzz/corpus/untar) are refused,
one line each, with nothing left behind.

AGENTBOX_TEST_UNPACK_STOP=1 (AGENTBOX_TEST_LAYOUT_STOP=1) makes the helper
stop itself (SIGSTOP) once confined and the launcher print its pid."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_image as ti  # noqa: E402
from ocigen import write_layout  # noqa: E402

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus",
                      "untar")
# plain tars of the corpus that must be refused, and a word of the reason
HOSTILE = {"absolute": "absolute path", "dotdot": "'..' component",
           "hardlink-out": "refused", "hardlink-through-symlink": "refused",
           "through-symlink": "not a directory of this layer",
           "whiteout-of-dotdot": "whiteout", "over-path-max": "refused",
           "pax-bad-record": "tar header", "not-a-tar": "not a tar",
           "truncated": "tar"}


def status_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


class UnpackHelperTest(unittest.TestCase):
    # test_image's scratch directory, tiny system and workspace, its
    # cache of each test's own
    setUpClass = classmethod(ti.ImageTest.setUpClass.__func__)
    tearDownClass = classmethod(ti.ImageTest.tearDownClass.__func__)
    setUp = ti.ImageTest.setUp

    def layout(self, layers, compress=True):
        path = os.path.join(self.tmp, "img-" + os.urandom(4).hex())
        self.digests = write_layout(path, layers, compress=compress)
        return path

    def argv(self, img):
        return [ti.BIN, "run", "--workspace", self.ws, "--image", "oci:" + img, "--",
                "/bin/sh", "-c", "cat /opt/keep"]

    def assert_nothing_half_made(self):
        self.assertEqual(os.listdir(os.path.join(self.cache, "tmp")), [])
        layers = os.listdir(os.path.join(self.cache, "layers"))
        self.assertNotIn(self.digests[-1], layers)
        self.assertNotIn(self.digests[-1] + ".seal", layers)

    def start_stopped(self, img, helper="unpack"):
        """The launcher started with the hook: its process and the helper's
        pid, the helper stopped (confined, before the tar or JSON is read)."""
        env = dict(self.env, **{"AGENTBOX_TEST_%s_STOP" % helper.upper(): "1"})
        p = subprocess.Popen(self.argv(img), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
        self.addCleanup(p.stderr.close)
        self.addCleanup(p.stdout.close)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        line = p.stderr.readline()
        m = re.match(r"agentbox: test: the %s helper is pid (\d+)$" % helper, line.strip())
        self.assertTrue(m, line)
        pid = int(m.group(1))
        for _ in range(500):
            if status_of(pid)["State"].startswith("T"):
                break
            time.sleep(0.01)
        self.addCleanup(lambda: self._kill(pid))
        return p, pid

    @staticmethod
    def _kill(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def test_the_unpack_runs_in_a_confined_helper(self):
        img = self.layout([self.base])
        p, pid = self.start_stopped(img)
        self.assertNotEqual(pid, p.pid)
        st = status_of(pid)
        self.assertEqual(int(st["PPid"]), p.pid)
        self.assertEqual(st["Name"], "agentbox-unpack")
        for key in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            self.assertEqual(int(st[key], 16), 0, key)
        if os.geteuid() == 0:
            self.assertEqual(int(st["CapBnd"], 16), 0)
            self.assertEqual(st["Uid"].split(), ["65534"] * 4)
            self.assertEqual(st["Gid"].split(), ["65534"] * 4)
            self.assertEqual(st["Groups"].strip(), "")
        else:
            self.assertEqual(st["Uid"].split()[1], str(os.geteuid()))
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")
        if os.geteuid() != 0:
            # not dumpable: not even its own user may look at its fds
            with self.assertRaises(PermissionError):
                os.listdir("/proc/%d/fd" % pid)
            os.kill(pid, signal.SIGCONT)
            out, err = p.communicate(timeout=120)
            self.assertEqual((p.returncode, out), (0, "from-base\n"), err)
            return
        # no fd but its own: /dev/null on 0-2, two sockets, the directory it fills
        fds = {int(n): os.readlink("/proc/%d/fd/%s" % (pid, n))
               for n in os.listdir("/proc/%d/fd" % pid)}
        self.assertEqual([fds.pop(n) for n in (0, 1, 2)], ["/dev/null"] * 3)
        paths = [t for t in fds.values() if not t.startswith("socket:")]
        self.assertEqual(len(fds), 3, fds)
        self.assertEqual(len(paths), 1, fds)
        self.assertTrue(paths[0].startswith(os.path.join(os.path.realpath(self.cache), "tmp")),
                        fds)
        self.assertTrue(paths[0].endswith("/tree"), fds)
        os.kill(pid, signal.SIGCONT)
        out, err = p.communicate(timeout=120)
        self.assertEqual((p.returncode, out), (0, "from-base\n"), err)
        # the layer is the caller's, as before the helper
        layer = os.path.join(self.cache, "layers", self.digests[0])
        for dirpath, dirs, names in os.walk(layer):
            for n in dirs + names + ["."]:
                self.assertEqual(os.lstat(os.path.join(dirpath, n)).st_uid, os.geteuid(),
                                 os.path.join(dirpath, n))

    def test_a_helper_killed_mid_unpack_leaves_nothing_and_says_so(self):
        img = self.layout([self.base])
        p, pid = self.start_stopped(img)
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 125, err)
        self.assertIn("layer 1 (sha256:%s): the unpack helper died (signal 9" %
                      self.digests[0][:12], err)
        self.assertEqual(out, "")
        self.assert_nothing_half_made()
        # and the next start unpacks it whole
        r = subprocess.run(self.argv(img), capture_output=True, text=True, env=self.env,
                           timeout=120)
        self.assertEqual((r.returncode, r.stdout), (0, "from-base\n"), r.stderr)

    def test_the_layout_json_is_parsed_in_a_confined_helper_without_files(self):
        img = self.layout([self.base])
        p, pid = self.start_stopped(img, "layout")
        st = status_of(pid)
        self.assertEqual((int(st["PPid"]), st["Name"]), (p.pid, "agentbox-layout"))
        self.assertEqual(int(st["CapEff"], 16), 0)
        self.assertEqual((st["NoNewPrivs"], st["Seccomp"]), ("1", "2"))
        if os.geteuid() == 0:
            self.assertEqual(st["Uid"].split(), ["65534"] * 4)
            fds = {int(n): os.readlink("/proc/%d/fd/%s" % (pid, n))
                   for n in os.listdir("/proc/%d/fd" % pid)}
            self.assertEqual([fds.pop(n) for n in (0, 1, 2)], ["/dev/null"] * 3)
            self.assertEqual(list(fds), [3])
            self.assertTrue(fds[3].startswith("socket:"), fds)
        os.kill(pid, signal.SIGCONT)
        out, err = p.communicate(timeout=120)
        self.assertEqual((p.returncode, out), (0, "from-base\n"), err)

    def test_a_layout_helper_killed_is_reported(self):
        img = self.layout([self.base])
        p, pid = self.start_stopped(img, "layout")
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 125, err)
        self.assertIn("--image oci:%s: the layout helper died (signal 9" % img, err)
        layers = os.path.join(self.cache, "layers")
        self.assertEqual(os.listdir(layers) if os.path.isdir(layers) else [], [])

    def test_a_start_on_the_same_index_parses_nothing_and_still_checks_the_blobs(self):
        img = self.layout([self.base])
        env = dict(self.env, AGENTBOX_TEST_LAYOUT_STOP="1", AGENTBOX_TEST_UNPACK_STOP="1")
        r = subprocess.run(self.argv(img), capture_output=True, text=True, env=self.env,
                           timeout=120)
        self.assertEqual((r.returncode, r.stdout), (0, "from-base\n"), r.stderr)
        parsed = [n for n in os.listdir(os.path.join(self.cache, "images"))
                  if n.endswith(".parsed")]
        self.assertEqual(len(parsed), 1)
        # the same index.json and tag: no helper at all (neither would stop)
        r = subprocess.run(self.argv(img), capture_output=True, text=True, env=env,
                           timeout=120)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "from-base\n", ""))
        # the config blob changed at its size: refused as before
        with open(os.path.join(img, "index.json")) as f:
            mhex = json.load(f)["manifests"][0]["digest"][7:]
        with open(os.path.join(img, "blobs", "sha256", mhex)) as f:
            chex = json.load(f)["config"]["digest"][7:]
        blob = os.path.join(img, "blobs", "sha256", chex)
        with open(blob, "rb") as f:
            data = f.read()
        with open(blob, "wb") as f:
            f.write(data.replace(b"linux", b"LINUX"))
        r = subprocess.run(self.argv(img), capture_output=True, text=True, env=self.env,
                           timeout=120)
        self.assertEqual(r.returncode, 125, r)
        self.assertIn("the config blob sha256:%s does not match its digest" % chex, r.stderr)

    def test_hostile_tars_of_the_fuzz_corpus_are_refused(self):
        for name, want in sorted(HOSTILE.items()):
            with self.subTest(name):
                with open(os.path.join(CORPUS, name), "rb") as f:
                    data = f.read()
                self.assertEqual(data[0], 0)  # a plain tar, its digest right
                img = self.layout([ti.tar_bytes([]), data[1:]], compress=False)
                r = subprocess.run(self.argv(img), capture_output=True, text=True,
                                   env=self.env, timeout=120)
                self.assertEqual(r.returncode, 125, r)
                self.assertIn("layer 2 (sha256:%s)" % self.digests[1][:12], r.stderr)
                self.assertIn(want, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assert_nothing_half_made()


if __name__ == "__main__":
    unittest.main()
