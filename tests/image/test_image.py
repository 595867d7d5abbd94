"""--image oci:DIR[:TAG] through the real binary (docs/images.md), as root
and as a plain user: layers stacked with whiteouts and opaque directories,
the image config's Env, WorkingDir and User and the options over them, the
layout never changed, the cache reused, listed and pruned, and hostile
layouts refused (125) naming what is wrong. The layouts are built here
(ocigen.py) from a tiny tree of the host's dash, cat, ls and the probe with
their libraries: no network, no podman.

Environment: AGENTBOX_BIN, AGENTBOX_PROBE; AGENTBOX_MUST_WORK=1 turns
"cannot sandbox here" into a failure."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ocigen import Entry, layer_from_tree, tar_bytes, write_layout  # noqa: E402

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")
PROBE = os.environ.get("AGENTBOX_PROBE")
MUST_WORK = os.environ.get("AGENTBOX_MUST_WORK") == "1"
# a preload that makes dlopen of libarchive fail (tests/helpers/no_libarchive.c);
# not under ASan, whose runtime must be the first library loaded
NO_LIBARCHIVE = (os.environ.get("AGENTBOX_NO_LIBARCHIVE")
                 if os.environ.get("AGENTBOX_SANITIZED") != "1" else None)


def make_tree(root):
    for d in ("bin", "etc", "home", "opt/d", "usr/bin"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for src, dst in (("/bin/dash", "bin/sh"), ("/bin/cat", "bin/cat"), ("/bin/ls", "bin/ls")):
        shutil.copy(src, os.path.join(root, dst))
    progs = ["/bin/dash", "/bin/cat", "/bin/ls"] + ([PROBE] if PROBE else [])
    out = subprocess.run(["ldd"] + progs, capture_output=True, text=True).stdout
    for word in out.split():
        if word.startswith("/") and os.path.exists(word):
            dst = root + word
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy(word, dst)
    files = {"opt/keep": "from-base\n", "opt/gone": "gone\n", "opt/d/lower-file": "lower\n",
             "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nimguser:x:4321:4322::/home:/bin/sh\n",
             "etc/group": "root:x:0:\n"}
    for name, text in files.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    for dirpath, dirs, names in os.walk(root):
        for n in dirs + names:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o444 | (0o111 if os.path.isdir(p) else 0))


TOP = [Entry.file("opt/new", b"new\n"), Entry.file("opt/.wh.gone", b""),
       Entry.file("opt/d/.wh..wh..opq", b""), Entry.file("opt/d/upper-file", b"up\n")]


def tree_hash(root):
    """Every name, type, mode, size, mtime and content under root."""
    h = hashlib.sha256()
    for dirpath, dirs, names in sorted(os.walk(root)):
        dirs.sort()
        for n in sorted(dirs + names):
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            h.update(("%s %o %d %d\n" % (p, st.st_mode, st.st_size, st.st_mtime_ns)).encode())
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


class ImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="agentbox-image-")
        os.chmod(cls.tmp, 0o755)
        cls.tree = os.path.join(cls.tmp, "tree")
        make_tree(cls.tree)
        cls.base = layer_from_tree(cls.tree)
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
        # a cache of this test's own
        self.cache = tempfile.mkdtemp(prefix="cache-", dir=self.tmp)
        self.env = dict(os.environ, AGENTBOX_IMAGE_CACHE=self.cache)

    def layout(self, name="img", layers=None, **kw):
        path = os.path.join(self.tmp, name + "-" + os.urandom(4).hex())
        kw.setdefault("env", ["PATH=/usr/bin:/bin", "IMGVAR=fromimage"])
        kw.setdefault("workdir", "/opt")
        self.digests = write_layout(path, layers or [self.base, TOP], **kw)
        return path

    def run_box(self, *args, stdin=None):
        r = subprocess.run([BIN, "run", "--workspace", self.ws] + list(args),
                           capture_output=True, text=True, env=self.env, timeout=120,
                           input=stdin)
        return r

    def sh(self, image, script, *opts):
        return self.run_box("--image", image, *opts, "--", "/bin/sh", "-c", script)

    def refused(self, image, want):
        r = self.sh("oci:" + image, "echo ran")
        self.assertEqual(r.returncode, 125, r)
        self.assertNotIn("ran", r.stdout)
        self.assertIn(want, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        # nothing half-unpacked is left to be believed later
        tmp = os.path.join(self.cache, "tmp")
        self.assertEqual(os.listdir(tmp) if os.path.isdir(tmp) else [], [])
        return r

    # ---- layers, whiteouts, opaque directories ----

    def test_layers_whiteouts_and_opaque_directories(self):
        img = self.layout()
        r = self.sh("oci:" + img, "cat /opt/new /opt/keep; test -e /opt/gone || echo gone-hidden; "
                    "echo /opt/d/*; ls -a /opt; (echo x > /opt/new) 2>/dev/null || echo ro; "
                    "(echo x > /x) 2>/dev/null || echo root-ro; echo w > /workspace/w && echo ws-rw")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(r.stdout, "new\nfrom-base\ngone-hidden\n/opt/d/upper-file\n"
                         ".\n..\nd\nkeep\nnew\nro\nroot-ro\nws-rw\n")
        # the host's system is not there: no /usr/bin/env in the tree
        r = self.sh("oci:" + img, "test -e /usr/bin/env && echo host || echo tree")
        self.assertEqual(r.stdout, "tree\n", r)

    def test_a_tag_picks_its_manifest(self):
        img = self.layout(tag="v1")
        write_layout(img, [self.base], tag="v2")
        self.assertEqual(self.sh("oci:%s:v1" % img, "cat /opt/new").stdout, "new\n")
        r = self.sh("oci:%s:v2" % img, "test -e /opt/new || echo base-only; cat /opt/gone")
        self.assertEqual(r.stdout, "base-only\ngone\n", r)
        r = self.sh("oci:%s:v3" % img, ":")
        self.assertEqual(r.returncode, 125)
        self.assertIn("no manifest tagged 'v3' (its tags: v1, v2)", r.stderr)

    def test_modes_are_the_tars_whatever_the_umask(self):
        img = self.layout()
        r = subprocess.run([BIN, "run", "--workspace", self.ws, "--image", "oci:" + img, "--",
                            "/bin/sh", "-c", "cat /opt/new /opt/d/upper-file"],
                           capture_output=True, text=True, env=self.env, timeout=120, umask=0o077)
        self.assertEqual(r.stdout, "new\nup\n", r)
        st = os.stat(os.path.join(self.cache, "layers", self.digests[1], "opt"))
        self.assertEqual(st.st_mode & 0o777, 0o755)

    def test_plain_tar_layers(self):
        img = self.layout(compress=False)
        self.assertEqual(self.sh("oci:" + img, "cat /opt/new").stdout, "new\n")

    # ---- the image config and the options over it ----

    def test_env_workdir_user_apply_and_options_override_them(self):
        img = self.layout(user="1234:1235")
        status = ("echo $IMGVAR; pwd; while read k a b; do case $k in Uid:|Gid:) echo $k$a;; "
                  "esac; done < /proc/self/status")
        r = self.sh("oci:" + img, status)
        self.assertEqual(r.stdout, "fromimage\n/opt\nUid:1234\nGid:1235\n", r)
        r = self.sh("oci:" + img, status, "--env", "IMGVAR=mine", "--cwd", "/workspace",
                    "--uid", "1000", "--gid", "1001")
        self.assertEqual(r.stdout, "mine\n/workspace\nUid:1000\nGid:1001\n", r)

    def test_a_user_by_name_from_the_image_passwd(self):
        img = self.layout(user="imguser")
        r = self.sh("oci:" + img, "while read k a b; do case $k in Uid:|Gid:) echo $k$a;; "
                    "esac; done < /proc/self/status")
        self.assertEqual(r.stdout, "Uid:4321\nGid:4322\n", r)
        self.refused(self.layout(user="nobody-here"), "its User 'nobody-here' has no line")

    def test_a_profile_names_the_image_relative_to_itself(self):
        img = self.layout()
        prof = os.path.join(self.tmp, "prof-%s.json" % os.urandom(4).hex())
        with open(prof, "w") as f:
            json.dump({"image": "oci:" + os.path.basename(img)}, f)
        r = subprocess.run([BIN, "run", "--profile", prof, "--workspace", self.ws, "--", "/bin/sh",
                            "-c", "cat /opt/new"], capture_output=True, text=True, env=self.env,
                           cwd="/", timeout=120)
        self.assertEqual(r.stdout, "new\n", r)

    def test_bad_specs_are_refused(self):
        for spec, want in (("docker://x", "expected oci:DIR[:TAG]"),
                           ("containers-storage:x", "containers-storage is not supported"),
                           ("oci:/nonexistent-dir", "cannot find the directory")):
            r = self.sh(spec, ":")
            self.assertEqual(r.returncode, 125, r)
            self.assertIn(want, r.stderr)
        r = self.run_box("--image", "oci:" + self.layout(), "--rootfs", self.tree, "--", "true")
        self.assertEqual(r.returncode, 125, r)
        self.assertIn("--image and --rootfs both", r.stderr)

    def test_check_makes_its_trial_on_the_image(self):
        img = self.layout()
        r = subprocess.run([BIN, "check", "--json", "--image", "oci:" + img],
                           capture_output=True, text=True, env=self.env, timeout=120)
        trial = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "trial"][0]
        self.assertIn("agentbox run --image oci:%s -- /bin/sh -c : worked" % img,
                      trial["detail"], r.stdout)
        # an image without /bin/sh fails the trial, naming it
        nosh = self.layout(layers=[[Entry.dir("etc"), Entry.file("etc/passwd", b"root:x:0:0::/:/x\n")]])
        r = subprocess.run([BIN, "check", "--json", "--image", "oci:" + nosh],
                           capture_output=True, text=True, env=self.env, timeout=120)
        trial = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "trial"][0]
        self.assertIn("has no /bin/sh", trial["detail"], r.stdout)

    # ---- the layout, the cache ----

    def test_the_layout_is_never_changed_and_the_cache_is_reused(self):
        img = self.layout()
        before = tree_hash(img)
        self.assertEqual(self.sh("oci:" + img, "cat /opt/new").returncode, 0)
        self.assertEqual(tree_hash(img), before)
        layer = os.path.join(self.cache, "layers", self.digests[0])
        st = os.stat(layer)
        probe = os.path.join(layer, "opt", "keep")
        ino = os.stat(probe).st_ino
        r = self.sh("oci:" + img, "cat /opt/keep")
        self.assertEqual(r.stdout, "from-base\n", r)
        # not unpacked again: the same directory, the same files
        self.assertEqual((os.stat(layer).st_ino, os.stat(layer).st_mtime_ns),
                         (st.st_ino, st.st_mtime_ns))
        self.assertEqual(os.stat(probe).st_ino, ino)
        self.assertEqual(tree_hash(img), before)
        # the base layer, shared by another image, is not unpacked again
        other = self.layout(layers=[self.base, [Entry.file("opt/other", b"o\n")]])
        self.assertEqual(self.sh("oci:" + other, "cat /opt/other /opt/keep").stdout,
                         "o\nfrom-base\n")
        self.assertEqual(os.stat(probe).st_ino, ino)

    def test_sandboxes_starting_together_share_one_unpacking(self):
        img = self.layout()
        procs = [subprocess.Popen([BIN, "run", "--workspace", self.ws, "--image", "oci:" + img,
                                   "--", "/bin/sh", "-c", "cat /opt/new"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=self.env) for _ in range(4)]
        for p in procs:
            out, errs = p.communicate(timeout=120)
            self.assertEqual((p.returncode, out), (0, "new\n"), errs)
        self.assertEqual(os.listdir(os.path.join(self.cache, "tmp")), [])
        # each layer's tree, .info, .lock and .seal, once
        self.assertEqual(len(os.listdir(os.path.join(self.cache, "layers"))), 8)

    def images(self, *args):
        return subprocess.run([BIN, "images"] + list(args), capture_output=True, text=True,
                              env=self.env, timeout=60)

    def test_images_lists_and_prune_keeps_what_a_sandbox_uses(self):
        img = self.layout()
        self.assertEqual(self.sh("oci:" + img, ":").returncode, 0)
        # a sandbox that runs while the cache is listed and pruned
        p = subprocess.Popen([BIN, "run", "--workspace", self.ws, "--image", "oci:" + img, "--",
                              "/bin/sh", "-c", "echo up; read x; cat /opt/keep"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=self.env)
        try:
            self.assertEqual(p.stdout.readline(), "up\n")
            j = json.loads(self.images("--json").stdout)
            self.assertEqual(j["cache"], self.cache)
            self.assertEqual(sorted(l["digest"] for l in j["layers"]), sorted(self.digests))
            self.assertTrue(all(l["in_use"] for l in j["layers"]), j)
            self.assertGreater(j["images"][0]["bytes"], 100000)
            self.assertEqual(j["images"][0]["source"], img)
            r = self.images("prune")
            self.assertEqual(r.returncode, 0, r)
            self.assertIn("removed 0 layers", r.stdout)
            self.assertIn("2 layers in use kept", r.stdout)
            out, _ = p.communicate("go\n", timeout=60)
            self.assertEqual(out, "from-base\n")
            self.assertEqual(p.returncode, 0)
        finally:
            p.kill()
            p.wait()
        self.assertIn("oci:" + img, self.images().stdout)
        r = self.images("prune")
        self.assertIn("removed 2 layers", r.stdout)
        self.assertEqual(sorted(os.listdir(os.path.join(self.cache, "layers"))), [])
        self.assertEqual(os.listdir(os.path.join(self.cache, "images")), [])
        # and unpacked again when asked for
        self.assertEqual(self.sh("oci:" + img, "cat /opt/new").stdout, "new\n")

    # ---- hostile layouts ----

    def test_dotdot_escape_is_refused(self):
        outside = os.path.join(self.tmp, "escaped")
        evil = [Entry.file("../../../../../../.." + outside, b"x")]
        self.refused(self.layout(layers=[self.base, evil]), "has a '..' component: refused")
        self.assertFalse(os.path.exists(outside))

    def test_absolute_path_is_refused(self):
        target = os.path.join(self.tmp, "abs-target")
        evil = [Entry.file(target, b"x")]
        self.refused(self.layout(layers=[self.base, evil]), "is an absolute path: refused")
        self.assertFalse(os.path.exists(target))

    def test_a_file_through_a_symlink_is_refused(self):
        target = os.path.join(self.tmp, "link-target")
        os.mkdir(target)
        evil = [Entry.symlink("opt/evil", target), Entry.file("opt/evil/planted", b"x")]
        self.refused(self.layout(layers=[self.base, evil]),
                     "goes through 'evil', which is not a directory of this layer")
        self.assertEqual(os.listdir(target), [])

    def test_a_hard_link_out_of_the_layer_is_refused(self):
        evil = [Entry.hardlink("opt/passwd", "../../../../etc/passwd")]
        self.refused(self.layout(layers=[self.base, evil]), "'..' component")
        evil = [Entry.hardlink("opt/passwd", "etc/not-in-this-layer")]
        self.refused(self.layout(layers=[self.base, evil]),
                     "is a hard link to what this layer does not have")

    def test_a_bad_digest_is_refused(self):
        img = self.layout()
        blob = os.path.join(img, "blobs", "sha256", self.digests[1])
        with open(blob, "rb") as f:
            data = f.read()
        # same size, other bytes: only the hash can tell
        os.chmod(blob, 0o644)
        with open(blob, "wb") as f:
            f.write(data[:-9] + bytes(b ^ 1 for b in data[-9:-8]) + data[-8:])
        r = self.refused(img, "does not match its digest")
        self.assertIn(self.digests[1], r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.cache, "layers", self.digests[1])))

    def test_a_missing_blob_is_refused(self):
        img = self.layout()
        os.unlink(os.path.join(img, "blobs", "sha256", self.digests[1]))
        self.refused(img, "layer 2 (sha256:%s): cannot open its blob" % self.digests[1][:12])

    def test_a_layout_without_index_or_marker_is_refused(self):
        empty = tempfile.mkdtemp(dir=self.tmp)
        self.refused(empty, "not an OCI image layout (no oci-layout file)")

    def test_device_nodes_are_left_out(self):
        img = self.layout(layers=[self.base, [Entry.chardev("opt/mem", 1, 1)] + TOP])
        r = self.sh("oci:" + img, "test -e /opt/mem && echo there || echo absent; cat /opt/new")
        self.assertEqual(r.stdout, "absent\nnew\n", r)
        with open(os.path.join(self.cache, "layers", self.digests[1] + ".info")) as f:
            info = f.read()
        self.assertIn("devices=1\n", info)

    def test_not_a_tar_is_refused(self):
        self.refused(self.layout(layers=[self.base, b"\x01" * 1024], compress=False),
                     "not a tar")

    @unittest.skipUnless(NO_LIBARCHIVE, "AGENTBOX_NO_LIBARCHIVE is not set, or ASan")
    def test_without_libarchive_unpacking_names_its_package_and_the_cache_needs_none(self):
        img = self.layout()
        env = dict(self.env, LD_PRELOAD=NO_LIBARCHIVE)
        argv = [BIN, "run", "--workspace", self.ws, "--image", "oci:" + img, "--", "/bin/sh",
                "-c", "cat /opt/new"]
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(r.returncode, 125, r)
        self.assertIn("layer 1 (sha256:%s): cannot load libarchive.so.13" % self.digests[0][:12],
                      r.stderr)
        self.assertIn("(install libarchive13, or the distribution's libarchive package)",
                      r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertEqual(os.listdir(os.path.join(self.cache, "tmp")), [])
        # unpacked once with it, the cached layers are used without it
        self.assertEqual(self.sh("oci:" + img, "cat /opt/new").stdout, "new\n")
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual((r.returncode, r.stdout), (0, "new\n"), r)

    # ---- confinement on an image ----

    @unittest.skipUnless(PROBE, "AGENTBOX_PROBE is not set")
    def test_every_layer_of_confinement_holds_on_an_image(self):
        img = self.layout()
        r = self.sh("oci:" + img, "while read k v rest; do case $k in "
                    "NoNewPrivs:|Seccomp:|CapEff:) echo $k$v;; esac; done < /proc/self/status; "
                    "/probe escapes", "--ro-bind", PROBE + ":/probe")
        self.assertEqual(r.returncode, 0, r)
        for want in ("NoNewPrivs:1\n", "Seccomp:2\n", "CapEff:0000000000000000\n",
                     "mount=EPERM\n", "unshare=EPERM\n"):
            self.assertIn(want, r.stdout)


if __name__ == "__main__":
    unittest.main()
