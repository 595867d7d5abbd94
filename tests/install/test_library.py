"""The installed libagentbox.a (docs/c-api.md): it exports its public API
only, every ab_ function include/agentbox/ declares and nothing else, so a
program linking it may name its own functions as it likes; and docs/c-api.md's
example builds against it with the installed agentbox.pc and runs. Installs
into a temporary DESTDIR, removed after."""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.environ["AGENTBOX_SOURCE_DIR"]
BUILD = os.environ["AGENTBOX_BUILD_DIR"]
PREFIX = os.environ["AGENTBOX_INSTALL_PREFIX"]
NM = os.environ.get("NM") or "nm"
CC = os.environ.get("CC") or "cc"
# the sanitizers the library was built with, which a program linking it needs
SANITIZE = os.environ.get("AGENTBOX_SANITIZE", "")


def declared():
    """The functions include/agentbox/*.h declare (comments left out)."""
    names = set()
    for header in glob.glob(os.path.join(SOURCE, "include", "agentbox", "*.h")):
        with open(header, encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        names.update(re.findall(r"\b(ab_\w+)\s*\(", text))
    return names


def defined_globals(archive):
    """The global symbols an archive defines (nm: every class but U)."""
    out = subprocess.run([NM, "-g", "--defined-only", archive], capture_output=True,
                         text=True, check=True).stdout
    return {f[2] for f in (line.split() for line in out.splitlines()) if len(f) == 3}


def example_source():
    """docs/c-api.md's complete program."""
    with open(os.path.join(SOURCE, "docs", "c-api.md"), encoding="utf-8") as f:
        blocks = re.findall(r"```c\n(.*?)```", f.read(), flags=re.S)
    programs = [b for b in blocks if "int main(" in b]
    assert len(programs) == 1, "docs/c-api.md has one complete program"
    return programs[0]


class Library(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dest = tempfile.mkdtemp(prefix="agentbox-lib-")
        r = subprocess.run(["cmake", "--install", BUILD],
                           env=dict(os.environ, DESTDIR=cls.dest),
                           capture_output=True, text=True, timeout=120)
        # as test_install.py: a user running another's build may not write
        # install_manifest.txt, the last step
        manifest_only = (not os.access(BUILD, os.W_OK)
                         and "install_manifest.txt" in r.stderr)
        if r.returncode != 0 and not manifest_only:
            shutil.rmtree(cls.dest, True)
            raise AssertionError("cmake --install failed: " + r.stderr)
        root = cls.dest + PREFIX
        found = glob.glob(os.path.join(root, "lib*", "**", "libagentbox.a"), recursive=True)
        pcs = glob.glob(os.path.join(root, "lib*", "**", "pkgconfig", "agentbox.pc"),
                        recursive=True)
        if len(found) != 1 or len(pcs) != 1:
            shutil.rmtree(cls.dest, True)
            raise AssertionError(f"installed: {found} and {pcs}, one of each expected")
        cls.archive, cls.pc = found[0], pcs[0]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dest, True)

    def test_exports_only_its_public_api(self):
        api = declared()
        self.assertIn("ab_session_open", api)  # the scan finds them
        exported = defined_globals(self.archive)
        unprefixed = sorted(n for n in exported if not n.startswith("ab_"))
        self.assertEqual(unprefixed, [], "exported without the ab_ prefix")
        undeclared = sorted(exported - api)
        self.assertEqual(undeclared, [], "exported but not declared in include/agentbox/")
        missing = sorted(api - exported)
        self.assertEqual(missing, [], "declared in include/agentbox/ but not exported")

    def build_example(self, extra_sources=()):
        d = tempfile.mkdtemp(prefix="agentbox-example-")
        self.addCleanup(shutil.rmtree, d, True)
        src = os.path.join(d, "example.c")
        with open(src, "w", encoding="utf-8") as f:
            f.write(example_source())
        # the installed .pc as a program's build reads it, under DESTDIR
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(self.pc),
                   PKG_CONFIG_SYSROOT_DIR=self.dest)
        flags = subprocess.run(["pkg-config", "--cflags", "--static", "--libs", "agentbox"],
                               env=env, capture_output=True, text=True, check=True).stdout.split()
        self.assertIn("-lagentbox", flags)
        san = [f"-fsanitize={SANITIZE}"] if SANITIZE else []
        exe = os.path.join(d, "example")
        r = subprocess.run([CC, *san, "-o", exe, src, *extra_sources, *flags],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return exe, d

    def test_the_example_builds_and_runs_against_the_installed_library(self):
        exe, d = self.build_example()
        ws = os.path.join(d, "ws")
        os.mkdir(ws)
        r = subprocess.run([exe, "--workspace", ws], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = sorted(r.stdout.splitlines())
        self.assertEqual(lines[:2], ["command 1: exit 0, slow", "command 2: exit 0, fast"],
                         r.stderr)
        self.assertRegex(lines[2], r"^command 3: exit 0, \S+$")  # the sandbox's host name
        self.assertEqual(len(lines), 3)

    def test_a_program_may_use_the_librarys_internal_names(self):
        # every global name of the library's own files (the internal archive
        # the binary links), defined again by the program: with those names
        # exported, the link fails with "multiple definition"
        # (C identifiers not reserved: not the sanitizers' own)
        internal = sorted(n for n in defined_globals(os.path.join(BUILD, "libagentbox-internal.a"))
                          if re.fullmatch(r"[a-z]\w*", n) and not n.startswith("ab_"))
        self.assertGreater(len(internal), 100)
        d = tempfile.mkdtemp(prefix="agentbox-names-")
        self.addCleanup(shutil.rmtree, d, True)
        mine = os.path.join(d, "mine.c")
        with open(mine, "w", encoding="utf-8") as f:
            f.write("".join(f"void {n}(void);\nvoid {n}(void) {{}}\n" for n in internal))
        self.build_example([mine])


if __name__ == "__main__":
    unittest.main()
