"""cmake --install ships what the binary, its --help and its man pages point
at: every docs/NAME.md they name, the man pages when they were built, the
policy, and the container files `check` names. Installs into a temporary
prefix (DESTDIR), removed after."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.environ["AGENTBOX_SOURCE_DIR"]
BUILD = os.environ["AGENTBOX_BUILD_DIR"]
PREFIX = os.environ["AGENTBOX_INSTALL_PREFIX"]


def named_docs():
    """docs/NAME.md as the C sources (--help, messages) and man pages name them."""
    names = set()
    for top in ("src", "man"):
        for d, _, files in os.walk(os.path.join(SOURCE, top)):
            for f in files:
                if f.endswith((".c", ".h", ".scd")):
                    with open(os.path.join(d, f), encoding="utf-8") as fh:
                        names.update(re.findall(r"docs/([a-z0-9-]+\.md)", fh.read()))
    return names


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dest = tempfile.mkdtemp(prefix="agentbox-install-")
        r = subprocess.run(["cmake", "--install", BUILD],
                           env=dict(os.environ, DESTDIR=cls.dest),
                           capture_output=True, text=True, timeout=120)
        # its last step writes install_manifest.txt into the build tree,
        # which a user running another's build may not write: everything
        # is installed by then
        manifest_only = (not os.access(BUILD, os.W_OK)
                         and "install_manifest.txt" in r.stderr)
        if r.returncode != 0 and not manifest_only:
            shutil.rmtree(cls.dest, True)
            raise AssertionError("cmake --install failed: " + r.stderr)
        cls.root = cls.dest + PREFIX

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dest, True)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def test_every_doc_the_cli_names_is_installed(self):
        names = named_docs()
        self.assertIn("protocol.md", names)  # the scan finds them
        self.assertIn("containers.md", names)
        docdir = self.path("share", "doc", "agentbox")
        missing = sorted(n for n in names if not os.path.isfile(os.path.join(docdir, n)))
        self.assertEqual(missing, [], "named but not installed in " + docdir)
        # and every doc, which link one another and the README
        shipped = sorted(f for f in os.listdir(os.path.join(SOURCE, "docs")) if f.endswith(".md"))
        self.assertEqual(sorted(f for f in os.listdir(docdir) if f in shipped), shipped)
        self.assertTrue(os.path.isfile(os.path.join(docdir, "README.md")))

    def test_man_pages_when_built(self):
        built = os.path.isfile(os.path.join(BUILD, "man", "agentbox.1"))
        if not built:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                self.fail("the man pages were not built: scdoc is missing "
                          "(packaging/install-build-deps installs it)")
            self.skipTest("the man pages were not built (no scdoc)")
        self.assertTrue(os.path.isfile(self.path("share", "man", "man1", "agentbox.1")))
        self.assertTrue(os.path.isfile(self.path("share", "man", "man7", "agentbox-protocol.7")))

    def test_policy_and_container_files(self):
        for rel in ("seccomp/default.json", "seccomp/strict.json", "seccomp/permissive.json",
                    "sandbox/agent.json", "sandbox/untrusted.json", "sandbox/offline-build.json"):
            self.assertTrue(os.path.isfile(self.path("share", "agentbox", "policy", rel)), rel)
        for f in ("agentbox-seccomp.json", "kubernetes.yaml", "agent-sandbox.yaml"):
            self.assertTrue(os.path.isfile(self.path("share", "agentbox", "containers", f)), f)


class OtherPrefix(unittest.TestCase):
    def test_installed_elsewhere_the_binary_finds_its_policy(self):
        # cmake --install --prefix DIR: the binary reads the profiles put
        # beside it, not the configured prefix's (which may hold none)
        d = tempfile.mkdtemp(prefix="agentbox-prefix-")
        self.addCleanup(shutil.rmtree, d, True)
        r = subprocess.run(["cmake", "--install", BUILD, "--prefix", d],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 and not (not os.access(BUILD, os.W_OK)
                                      and "install_manifest.txt" in r.stderr):
            self.fail("cmake --install --prefix failed: " + r.stderr)
        sandbox = os.path.join(d, "share", "agentbox", "policy", "sandbox")
        shutil.copy(os.path.join(sandbox, "agent.json"), os.path.join(sandbox, "only-here.json"))
        ws = tempfile.mkdtemp(prefix="agentbox-ws-")
        self.addCleanup(shutil.rmtree, ws, True)
        r = subprocess.run([os.path.join(d, "bin", "agentbox"), "run", "--workspace", ws,
                            "--profile", "only-here", "--", "echo", "found"],
                           capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items()
                                if k != "AGENTBOX_POLICY_DIR"})
        self.assertEqual((r.returncode, r.stdout), (0, "found\n"), r.stderr)


if __name__ == "__main__":
    unittest.main()
