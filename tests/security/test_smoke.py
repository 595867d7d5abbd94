"""Checks of the harness itself: a guarded script runs inside, and the
guard would stop a script that ran on the host."""

import os
import subprocess
import unittest

from harness import GUARD, NOT_SANDBOXED, Attacks, both_modes


class Harness(Attacks):
    def test_guard_passes_inside_a_sandbox(self):
        r = self.guarded("echo inside")
        self.assertEqual((r.code, r.out), (0, "inside\n"), r)

    def test_guard_stops_on_the_host(self):
        p = subprocess.run(["/bin/sh", "-c", GUARD + "echo ran"], capture_output=True,
                           text=True, cwd="/")
        self.assertEqual((p.returncode, p.stdout), (99, NOT_SANDBOXED + "\n"))


both_modes(globals(), Harness)

if __name__ == "__main__":
    unittest.main()
