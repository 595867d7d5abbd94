"""The image cache trusts nothing it did not make (docs/images.md, "Whom the
cache trusts"), through the real binary, as root and as a plain user:

- a cache, or a directory on the way to it, that another user owns or that
  its group or others may write is refused (125) naming the directory, its
  owner and the fix; a link on the way is followed only where no one else
  could have made it;
- a cached layer changed after it was unpacked (a file's content, a file
  added, a mode, a file replaced, its times set back) is found at the next
  start and refused (125) naming the layer and the entry; prune and the next
  start unpack it anew; a layer without a seal is unpacked anew;
- the warm path still works and unpacks nothing.

Environment: AGENTBOX_BIN; AGENTBOX_MUST_WORK=1 turns "cannot sandbox
here" into a failure."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ocigen import layer_from_tree, write_layout  # noqa: E402
from test_image import TOP, make_tree  # noqa: E402

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")
MUST_WORK = os.environ.get("AGENTBOX_MUST_WORK") == "1"


def other_user():
    """A user who is not the caller, and a directory of theirs the caller
    can name: as root, one made here and given to them; as a plain user,
    their home when it is open to look into (tester2's on the test VM)."""
    for name in ("tester2", "nobody"):
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        if pw.pw_uid != os.geteuid():
            return pw
    return None


class CacheTrustTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="agentbox-cache-trust-")
        os.chmod(cls.tmp, 0o755)
        tree = os.path.join(cls.tmp, "tree")
        make_tree(tree)
        cls.img = os.path.join(cls.tmp, "img")
        cls.digests = write_layout(cls.img, [layer_from_tree(tree), TOP])
        cls.ws = os.path.join(cls.tmp, "ws")
        os.mkdir(cls.ws)
        r = subprocess.run([BIN, "run", "--workspace", cls.ws, "--", "/bin/true"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            if MUST_WORK:
                raise AssertionError("agentbox cannot run here: " + r.stderr)
            raise unittest.SkipTest("agentbox cannot run here: " + r.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="cache-", dir=self.tmp)

    def run_box(self, cache, script="cat /opt/keep /opt/new"):
        return subprocess.run([BIN, "run", "--workspace", self.ws, "--image", "oci:" + self.img,
                               "--", "/bin/sh", "-c", script], capture_output=True, text=True,
                              env=dict(os.environ, AGENTBOX_IMAGE_CACHE=cache), timeout=120)

    def works(self, cache):
        r = self.run_box(cache)
        self.assertEqual((r.returncode, r.stdout), (0, "from-base\nnew\n"), r.stderr)

    def refused(self, cache, *want):
        r = self.run_box(cache)
        self.assertEqual(r.returncode, 125, r)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        for w in want:
            self.assertIn(w, r.stderr)
        return r

    # ---- whose the cache is ----

    def test_a_cache_another_user_owns_is_refused(self):
        pw = other_user()
        self.assertIsNotNone(pw, "no other user on this machine")
        if os.geteuid() == 0:
            theirs = os.path.join(self.tmp, "theirs-" + os.urandom(4).hex())
            os.mkdir(theirs, 0o755)
            os.chown(theirs, pw.pw_uid, pw.pw_gid)
            self.addCleanup(shutil.rmtree, theirs, True)
        else:
            theirs = pw.pw_dir  # a plain user cannot give a directory away
            st = os.stat(theirs)
            self.assertEqual(st.st_uid, pw.pw_uid)
            self.assertFalse(st.st_mode & 0o022, "%s is writable: test it elsewhere" % theirs)
        owner = "%s (uid %d)" % (pw.pw_name, pw.pw_uid)
        # the cache itself theirs
        self.refused(theirs, "the image cache %s is owned by %s, not by you" % (theirs, owner),
                     "use a directory you own")
        # the cache in a directory of theirs: refused before anything is made in it
        inside = os.path.join(theirs, "cache-" + os.urandom(4).hex())
        self.refused(inside, "the image cache %s lies in %s, which is owned by %s" %
                     (inside, theirs, owner))
        self.assertFalse(os.path.exists(inside))

    def test_a_cache_its_group_or_others_may_write_is_refused(self):
        for mode, who in ((0o770, "its group"), (0o777, "others"), (0o1777, "others")):
            os.chmod(self.cache, mode)
            for name in (self.cache, self.cache + "/."):
                self.refused(name, "the image cache %s is writable by %s (mode %04o" %
                             (self.cache, who, mode), "chmod go-w %s" % self.cache)
        os.chmod(self.cache, 0o755)
        self.works(self.cache)
        # its layers/ too
        layers = os.path.join(self.cache, "layers")
        os.chmod(layers, 0o777)
        self.refused(self.cache, "the image cache's directory %s is writable by others" % layers)
        os.chmod(layers, 0o755)
        self.works(self.cache)

    def test_a_directory_on_the_way_others_may_write_is_refused_unless_sticky(self):
        way = tempfile.mkdtemp(dir=self.tmp)
        cache = os.path.join(way, "cache")
        os.chmod(way, 0o777)
        self.refused(cache, "the image cache %s lies in %s, which is writable by others" %
                     (cache, way), "chmod go-w %s" % way)
        self.assertFalse(os.path.exists(cache))
        # sticky, as /tmp: others may add names but not move or remove the cache
        os.chmod(way, 0o1777)
        self.works(cache)

    def test_a_link_on_the_way_is_followed_only_where_no_one_else_made_it(self):
        self.works(self.cache)
        private = tempfile.mkdtemp(dir=self.tmp)
        os.symlink(self.cache, os.path.join(private, "link"))
        self.works(os.path.join(private, "link"))
        r = subprocess.run([BIN, "images", "--json"], capture_output=True, text=True,
                           env=dict(os.environ, AGENTBOX_IMAGE_CACHE="%s/../%s/./link/" % (
                               private, os.path.basename(private))),
                           timeout=60)
        self.assertEqual(json.loads(r.stdout)["cache"], self.cache, r)  # without the link
        public = tempfile.mkdtemp(dir=self.tmp)
        os.chmod(public, 0o1777)
        os.symlink(self.cache, os.path.join(public, "link"))
        self.refused(os.path.join(public, "link"),
                     "%s/link is a symbolic link in a directory others can write" % public)

    # ---- a layer changed after it was unpacked ----

    def base_layer(self):
        return os.path.join(self.cache, "layers", self.digests[0])

    def changed(self, entry):
        r = self.refused(self.cache, "layer 1 (sha256:%s) at %s was changed after it was "
                         "unpacked: '%s' is not what was unpacked" %
                         (self.digests[0][:12], self.base_layer(), entry),
                         "agentbox images prune")
        # prune removes it (no sandbox uses it) and the next start unpacks it anew
        p = subprocess.run([BIN, "images", "prune"], capture_output=True, text=True,
                           env=dict(os.environ, AGENTBOX_IMAGE_CACHE=self.cache), timeout=60)
        self.assertIn("removed 2 layers", p.stdout, p)
        self.works(self.cache)
        return r

    def test_a_file_whose_content_changed_is_found(self):
        self.works(self.cache)
        keep = os.path.join(self.base_layer(), "opt", "keep")
        st = os.stat(keep)
        with open(keep, "r+") as f:  # the same size, other bytes
            f.write("FROM-BASE\n")
        os.utime(keep, ns=(st.st_atime_ns, st.st_mtime_ns))  # its times set back
        self.assertEqual(os.stat(keep).st_size, st.st_size)
        self.changed("opt/keep")

    def test_a_file_added_is_found(self):
        self.works(self.cache)
        with open(os.path.join(self.base_layer(), "bin", "planted"), "w") as f:
            f.write("#!/bin/sh\n")
        self.changed("bin")

    def test_a_mode_changed_is_found(self):
        self.works(self.cache)
        os.chmod(os.path.join(self.base_layer(), "bin", "sh"), 0o4755)
        self.changed("bin/sh")

    def test_a_file_replaced_is_found(self):
        self.works(self.cache)
        keep = os.path.join(self.base_layer(), "opt", "keep")
        with open(keep + ".new", "w") as f:
            f.write("from-base\n")
        os.rename(keep + ".new", keep)
        self.changed("opt")

    def test_a_name_in_the_empty_bottom_layer_is_refused(self):
        self.works(self.cache)
        with open(os.path.join(self.cache, "empty", "planted"), "w") as f:
            f.write("x")
        self.refused(self.cache, "empty must be empty and has 'planted'")
        os.unlink(os.path.join(self.cache, "empty", "planted"))
        self.works(self.cache)

    def test_a_layer_without_a_seal_is_unpacked_anew(self):
        self.works(self.cache)
        keep = os.path.join(self.base_layer(), "opt", "keep")
        ctime = os.stat(keep).st_ctime_ns
        os.unlink(self.base_layer() + ".seal")  # as an agentbox before seals left it
        self.works(self.cache)
        self.assertNotEqual(os.stat(keep).st_ctime_ns, ctime)
        self.assertTrue(os.path.isfile(self.base_layer() + ".seal"))

    def test_the_warm_path_unpacks_nothing_and_runs(self):
        self.works(self.cache)
        keep = os.path.join(self.base_layer(), "opt", "keep")
        before = (os.stat(keep).st_ino, os.stat(keep).st_ctime_ns,
                  os.stat(self.base_layer() + ".seal").st_ctime_ns)
        for _ in range(3):
            self.works(self.cache)
        self.assertEqual(before, (os.stat(keep).st_ino, os.stat(keep).st_ctime_ns,
                                  os.stat(self.base_layer() + ".seal").st_ctime_ns))


if __name__ == "__main__":
    unittest.main()
