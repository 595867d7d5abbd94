"""A session command's path through the launcher and its shim
(docs/architecture.md, "One lifecycle"; docs/performance.md, "Session round
trip"): a shim takes the next command right after a final exit, without a
READY of its own; STARTED may come with EXITED; the shim holds the output
pipes until it has said EXITED; a small spec goes through a pipe, a large
one through a memfd. Each test asserts the results a caller sees. Runs as
root and as an unprivileged user. AGENTBOX_BIN names the binary."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_serve import Base  # noqa: E402
from test_fileops import Server  # noqa: E402


class Path(Base):
    def test_back_to_back_commands_keep_every_field(self):
        """Commands one after another, each right after the last one's
        result: every field is the command's own, never a neighbour's."""
        for i in range(10):
            m = self.exec("echo out%d; echo err%d >&2; exit %d" % (i, i, i % 4))
            self.assertEqual((m["exit_code"], m["signal"], m["stdout"], m["stderr"]),
                             (i % 4, None, "out%d\n" % i, "err%d\n" % i), m)
            self.assertEqual((m["stdout_bytes"], m["stderr_bytes"], m["truncated"]),
                             (5, 5, False), m)
            m = self.exec("kill -9 $$")
            self.assertEqual((m["exit_code"], m["signal"], m["stdout"]), (137, "SIGKILL", ""))
            m = self.exec("cat; echo $V", stdin="in%d\n" % i, env={"V": "v%d" % i})
            self.assertEqual(m["stdout"], "in%d\nv%d\n" % (i, i))

    def test_a_free_shim_takes_the_next_command(self):
        """Commands one after another, each right after the last one's
        result, take turns on the first shim and the spare asked for while
        the first ran (the one idle longest takes the next), not each on a
        new one."""
        parents = {self.exec("echo $PPID")["stdout"] for _ in range(8)}
        self.assertLessEqual(len(parents), 2, parents)

    def test_commands_that_leave_processes_still_free_their_shim(self):
        """A command that leaves a process behind (killed after the grace)
        or keeps one (keep_background): its shim says READY when it is
        done, and the commands after it run."""
        m = self.exec("sleep 30 & echo left")
        self.assertEqual((m["exit_code"], m["stdout"]), (0, "left\n"))
        m = self.exec("sleep 30 & echo kept", keep_background=True)
        self.assertEqual((m["exit_code"], m["stdout"]), (0, "kept\n"))
        self.assertEqual(len(m["background"]), 1, m)
        for i in range(5):
            self.assertEqual(self.exec("echo %d" % i)["stdout"], "%d\n" % i)

    def test_output_closed_early_and_output_after_the_main_process(self):
        """The shim holds the output pipes until it has said EXITED: a
        command that closes its stdout early still ends when it exits, and
        what a process it left writes before the grace ends is kept."""
        m = self.exec("exec >&- 2>&-; sleep 0.2; exit 5")
        self.assertEqual((m["exit_code"], m["stdout"], m["stderr"]), (5, "", ""))
        m = self.exec("(sleep 0.05; echo late) & echo early")
        self.assertEqual(m["stdout"], "early\nlate\n")

    def test_sh_c_semantics(self):
        m = self.exec('echo "$0"; echo $$; exec cut -d" " -f1,5 /proc/self/stat')
        zero, pid, stat = m["stdout"].splitlines()
        self.assertEqual(zero, "/bin/sh")
        # $$ is the process that ran, and it leads its own process group
        self.assertEqual(stat, "%s %s" % (pid, pid))
        self.assertEqual(self.exec("pwd", cwd="/tmp")["stdout"], "/tmp\n")
        self.assertEqual(self.exec("exit 42")["exit_code"], 42)
        m = self.exec("kill -TERM 0; sleep 5")  # its whole group
        self.assertEqual((m["exit_code"], m["signal"]), (143, "SIGTERM"))

    def test_a_large_spec_and_a_small_one(self):
        """A spec over a page (argv, environment) goes through a memfd, a
        small one through a pipe: both arrive whole."""
        big = "x" * 20000
        m = self.exec('printf %s "$BIG" | wc -c; echo ' + "y" * 5000 + " | wc -c",
                      env={"BIG": big})
        self.assertEqual(m["stdout"].split(), ["20000", "5001"])
        env = {"V%d" % i: str(i) for i in range(300)}
        m = self.exec("echo $V0 $V299", env=env)
        self.assertEqual(m["stdout"], "0 299\n")
        self.assertEqual(self.exec("echo small")["stdout"], "small\n")

    def test_the_supervisor_killed_before_it_said_started(self):
        """The command kills its shim at once, before the shim told the
        launcher anything: the command gets a clear error, and the session
        goes on with a new shim. (Without Landlock's signal scope, as
        before Linux 6.12: with it, the kill gets EPERM.)"""
        self.sv.close()
        self.sv = Server(self.ws, env=dict(os.environ, AGENTBOX_TEST_NO_SIGNAL_SCOPE="1"))
        self.addCleanup(self.sv.close)
        m = self.call(op="exec", command="kill -9 $PPID; sleep 30")
        self.assertEqual(m["type"], "error", m)
        self.assertIn("supervisor", m["message"])
        t = time.monotonic()
        self.assertEqual(self.exec("echo next")["stdout"], "next\n")
        self.assertLess(time.monotonic() - t, 30)  # not after the first one's sleep

    def test_cancel_and_timeout_at_once(self):
        """A cancel or a timeout that comes before the shim said STARTED."""
        rid = self.sv.send(op="exec", command="sleep 30")
        self.sv.send(op="cancel", target=rid)
        got, _ = self.collect({rid})
        self.assertTrue(got[rid].get("cancelled"), got[rid])
        m = self.exec("sleep 30", timeout=0.001)
        self.assertEqual((m["exit_code"], m["timed_out"]), (124, True))
        self.assertEqual(self.exec("echo on")["stdout"], "on\n")

    def pidfds(self):
        n = 0
        fds = "/proc/%d/fd" % self.sv.p.pid
        for fd in os.listdir(fds):
            try:
                n += os.readlink(os.path.join(fds, fd)) == "anon_inode:[pidfd]"
            except OSError:
                pass  # closed meanwhile
        return n

    def test_started_comes_while_orphans_end_every_few_ms(self):
        """The shim says STARTED (with pidfds of itself and the command)
        once the command has run 5 ms, however often the processes it
        reaps end meanwhile: here an orphan every millisecond or so."""
        # the init's; the least of a few counts: the launcher holds each
        # new shim's pidfd for a moment as it arrives (the first one comes
        # after the hello), and a count in that moment would ask for one
        # pidfd more than STARTED brings
        before = []
        for _ in range(4):
            before.append(self.pidfds())
            time.sleep(0.02)
        before = min(before)
        rid = self.sv.send(op="exec", command="while :; do (true &); done")
        deadline = time.monotonic() + 10
        while self.pidfds() < before + 2:
            self.assertLess(time.monotonic(), deadline, "no STARTED in 10 s")
            time.sleep(0.05)
        self.sv.send(op="cancel", target=rid)
        got, _ = self.collect({rid})
        self.assertTrue(got[rid].get("cancelled"), got[rid])


if __name__ == "__main__":
    unittest.main()
