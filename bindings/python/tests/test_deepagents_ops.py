"""The file operations deepagents-code's sandbox suite asks of a backend
(its test_sandbox_operations.py), in our own words: the wordings it looks
for ("not found", "multiple times", the empty-file reminder) and pages that
hold exactly the lines asked for, as deepagents' own BaseSandbox gives
them."""

import os
import shutil
import unittest

from support import ROOT, UID, sandbox, workspace

D = "/tmp/ops"


class DeepagentsOperations(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = workspace()
        os.chmod(cls.tmp, 0o755)
        if ROOT:
            os.chown(cls.tmp, UID, UID)
        try:
            cls.sb = sandbox(cls.tmp)
        except unittest.SkipTest:
            shutil.rmtree(cls.tmp)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.sb.close()
        shutil.rmtree(cls.tmp, True)

    def path(self, name):
        return "%s/%s/%s" % (D, self._testMethodName, name)

    def written(self, name, content):
        p = self.path(name)
        self.assertIsNone(self.sb.write(p, content).error)
        return p

    def content(self, p, *window):
        r = self.sb.read(p, *window)
        self.assertIsNone(r.error, r)
        return r.file_data["content"]

    def test_missing_file_is_not_found(self):
        r = self.sb.read(self.path("nowhere.txt"))
        self.assertIn("not found", r.error.lower())
        self.assertIsNone(r.file_data)
        r = self.sb.edit(self.path("nowhere.txt"), "a", "b")
        self.assertIn("not found", r.error.lower())

    def test_empty_file_reads_as_the_reminder(self):
        p = self.written("empty.txt", "")
        self.assertIn("empty", self.content(p).lower())
        self.assertIn("empty", self.sb.read_text(p).lower())

    def test_pages_hold_the_lines_asked_for(self):
        p = self.written("rows.txt", "".join("Row_%d_content\n" % i for i in range(1, 21)))
        self.assertEqual(self.content(p, 0, 5),
                         "\n".join("Row_%d_content" % i for i in range(1, 6)))
        self.assertEqual(self.content(p, 10, 5),
                         "\n".join("Row_%d_content" % i for i in range(11, 16)))
        whole = "".join(self.content(p, o, 5) + "\n" for o in range(0, 20, 5))
        self.assertEqual(whole, "".join("Row_%d_content\n" % i for i in range(1, 21)))
        big = self.written("big.txt", "".join("Line_%04d_content\n" % i for i in range(1000)))
        page = self.content(big, 500, 100)
        self.assertTrue(page.startswith("Line_0500_content"), page[:40])
        self.assertTrue(page.endswith("Line_0599_content"), page[-40:])
        self.assertNotIn("Line_0499", page)

    def test_edit_wordings(self):
        p = self.written("fruit.txt", "apple apple apple\n")
        r = self.sb.edit(p, "apple", "pear")
        self.assertIn("multiple times", r.error.lower())
        self.assertEqual(self.content(p), "apple apple apple")
        self.assertIn("not found", self.sb.edit(p, "banana", "x").error.lower())
        r = self.sb.edit(p, "apple", "pear", replace_all=True)
        self.assertEqual((r.error, r.occurrences), (None, 3))
        self.assertEqual(self.content(p), "pear pear pear")


if __name__ == "__main__":
    unittest.main()
