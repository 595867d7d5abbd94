"""The client installs with pip from its directory alone: the build backend
is in the tree and needs only the standard library, so no package index is
asked (pip with --no-index fails the moment one would be)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PipInstall(unittest.TestCase):
    def setUp(self):
        if subprocess.run([sys.executable, "-m", "pip", "--version"],
                          capture_output=True).returncode != 0:
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                self.fail("no pip for %s (packaging/install-build-deps installs "
                          "python3-pip)" % sys.executable)
            self.skipTest("no pip for %s" % sys.executable)
        self.tmp = tempfile.mkdtemp(prefix="agentbox-pip-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_installs_with_no_package_index(self):
        target = os.path.join(self.tmp, "site")
        env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PYTHONDONTWRITEBYTECODE="1",
                   HOME=self.tmp)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index",
                            "--no-cache-dir", "--disable-pip-version-check", "--quiet",
                            "--target", target, HERE],
                           capture_output=True, text=True, env=env, cwd=self.tmp, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        # the installed copy is what imports, with its metadata
        r = subprocess.run([sys.executable, "-c",
                            "import agentbox, importlib.metadata as m; "
                            "print(agentbox.__file__); print(m.version('agentbox')); "
                            "print(agentbox.Sandbox.__name__)"],
                           capture_output=True, text=True, cwd=self.tmp, timeout=60,
                           env=dict(env, PYTHONPATH=target))
        self.assertEqual(r.returncode, 0, r.stderr)
        path, version, cls = r.stdout.split()
        self.assertEqual(path, os.path.join(target, "agentbox", "__init__.py"))
        self.assertEqual(version, "0.1.0")
        self.assertEqual(cls, "Sandbox")
        installed = sorted(os.listdir(os.path.join(target, "agentbox")))
        shipped = sorted(n for n in os.listdir(os.path.join(HERE, "agentbox"))
                         if n.endswith(".py"))
        self.assertEqual([n for n in installed if n.endswith(".py")], shipped)
        with open(os.path.join(target, "agentbox-0.1.0.dist-info", "METADATA")) as f:
            meta = f.read()
        self.assertIn('Requires-Dist: deepagents>=0.5; extra == "deepagents"', meta)
        self.assertIn("Requires-Python: >=3.9", meta)


if __name__ == "__main__":
    unittest.main()
