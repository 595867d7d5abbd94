"""Processes: the host's are out of sight and reach, and nothing a command
starts outlives it (double fork, setsid, nohup, a timeout, a killed
supervisor, a killed agentbox), without hitting anyone else's process."""

import json
import os
import signal
import subprocess
import time
import unittest

import harness
from attacklib_b import Extra, linger, pids_with_arg, recv_until, send, wait_gone
from harness import GUARD, NOT_SANDBOXED, Attacks, both_modes


def started(mark):
    """Shell: wait (at most 5 s) until `sleep 600 MARK` runs, say so."""
    return ('i=0; until ps -eo args | grep -qx "sleep 600 {m}"; do i=$((i+1)); '
            '[ $i -gt 100 ] && break; sleep 0.05; done; '
            'ps -eo args | grep -qx "sleep 600 {m}" && echo started\n').format(m=mark)


class Processes(Extra, Attacks):
    def test_host_processes_are_invisible(self):
        host = self.host_sleep()
        m = self.marks[-1]
        r = self.sh('kill -0 {p} 2>/dev/null && echo signalable; '
                    '[ -e /proc/{p} ] && echo in-proc; '
                    'echo ps=$(ps -eo args | grep -cx "sleep 600 {m}"); '
                    'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " <$f; echo; done '
                    '| grep -cx "sleep 600 {m} "; '
                    'set -- /proc/[0-9]*; echo procs=$#'.format(p=host.pid, m=m))
        lines = r.out.split()
        self.assertNotIn("signalable", lines, r)
        self.assertNotIn("in-proc", lines, r)
        self.assertIn("ps=0", lines, r)
        self.assertEqual(lines[1], "0", r)  # no cmdline in /proc shows it
        # only the sandbox's own few processes are there at all
        self.assertLess(int(lines[2].split("=")[1]), 20, r)
        self.assert_alive(host, "the host's sleep")

    def test_signal_a_host_process(self):
        host = self.host_sleep()
        r = self.sh("for s in TERM KILL STOP HUP; do kill -$s {p} 2>/dev/null; echo $s=$?; done"
                    .format(p=host.pid))
        self.assertEqual(r.out.split(), ["TERM=1", "KILL=1", "STOP=1", "HUP=1"], r)
        self.assert_alive(host, "the host's sleep")

    def test_ptrace_a_host_process(self):
        host = self.host_sleep()
        r = self.probe("ptrace", str(host.pid))
        res = dict(kv.split("=") for kv in r.out.split())
        self.assertIn(res["ptrace"], ("EPERM", "ESRCH"), r)
        self.assertIn(res["process_vm_readv"], ("EPERM", "ESRCH"), r)
        self.assertEqual(res["kill0"], "ESRCH", r)
        # the default profile allows ptrace (debuggers): the pid namespace
        # is what keeps the host's processes out of reach
        self.assert_alive(host, "the host's sleep")

    def test_kill_every_process(self):
        host = self.host_sleep()
        # kill(-1) spares the caller: a sleep of the sandbox shows it hit
        script = "sleep 600 & kill -9 -1; echo rc=$?; wait; echo survived"
        if self.serve:
            self.guarded("true")  # this session is a sandbox: the next exec runs in it
            m = self.exec_raw(GUARD + script)
            if m["type"] == "result":
                self.assertNotIn(NOT_SANDBOXED, m["stdout"], m)
                self.assertEqual(m["stdout"], "rc=0\nsurvived\n", m)
            else:
                # the command killed its own supervisor too: said so
                self.assertEqual(m["type"], "error", m)
                self.assertIn("killed", m["message"], m)
        else:
            r = self.guarded(script)
            self.assertEqual((r.code, r.out), (0, "rc=0\nsurvived\n"), r)
        self.assert_alive(host, "the host's sleep")
        self.assert_answers()

    def _left_behind(self, how):
        m = self.mark()
        r = self.sh(how.format(sleep=linger(m)) + "\n" + started(m) + "echo end")
        self.assertEqual(r.out, "started\nend\n", r)  # the leftover did run
        self.assertEqual(r.code, 0, r)
        self.assert_no_leftover(m)
        self.assert_answers()

    def test_double_fork_outlives_the_command(self):
        self._left_behind("({sleep} &)")

    def test_setsid_outlives_the_command(self):
        self._left_behind("setsid -f {sleep} </dev/null >/dev/null 2>&1")

    def test_nohup_outlives_the_command(self):
        self._left_behind("nohup {sleep} >/dev/null 2>&1 &")

    def test_leftovers_outlive_a_timeout(self):
        m = self.mark()
        # every one ignores SIGTERM: the SIGKILL after the grace must come
        r = self.timed("trap '' TERM; (trap '' TERM; {s} &); setsid -f {s}; nohup {s} "
                       ">/dev/null 2>&1 & {w} sleep 600; echo not-timed-out"
                       .format(s=linger(m), w=started(m)), 3)
        self.assertEqual(r.code, 124, r)
        self.assertEqual(r.out, "started\n", r)
        self.assert_no_leftover(m)
        self.assert_answers()

    def test_leftovers_outlive_a_killed_supervisor(self):
        # the command kills its parent (in run mode the init, which the pid
        # namespace protects; in serve mode its shim) and leaves a process
        m = self.mark()
        script = ("setsid -f {s} </dev/null >/dev/null 2>&1; (trap '' TERM; {s} &); "
                  "{w} kill -9 $PPID; echo killed=$?".format(s=linger(m), w=started(m)))
        if self.serve:
            res = self.exec_raw(script)
            if res["type"] == "result":
                self.assertIn("started", res["stdout"], res)
            # where no Landlock signal scope refuses the kill (before Linux
            # 6.12) it kills the shim: the init kills what it left
            box = self.sandbox(env=dict(os.environ, AGENTBOX_TEST_NO_SIGNAL_SCOPE="1"))
            m2 = self.mark()
            res = box.call({"op": "exec", "command": script.replace(m, m2)})
            self.assertEqual(res["type"], "error", res)
            self.assertIn("supervisor in the sandbox was killed", res["message"], res)
            self.assert_no_leftover(m2)
            self.assertEqual(box.sh("echo ok").out, "ok\n")
        else:
            r = self.sh(script)
            self.assertEqual(r.out, "started\nkilled=0\n", r)  # the init ignores it
        self.assert_no_leftover(m)
        self.assert_answers()

    def test_leftovers_outlive_a_sigkilled_agentbox(self):
        m = self.mark()
        hold = ("setsid -f {s} </dev/null >/dev/null 2>&1; (trap '' TERM; {s} &); "
                "nohup {s} >/dev/null 2>&1 & {w} sleep 600".format(s=linger(m), w=started(m)))
        if self.serve:
            p = self.spawn(stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
            self.assertEqual(json.loads(p.stdout.readline())["type"], "hello")
            # one left on purpose (keep_background), one still running
            m2 = self.mark()
            send(p, {"op": "exec", "id": 1, "keep_background": True,
                     "command": "setsid -f {s}; {w}".format(s=linger(m2), w=started(m2))})
            res = recv_until(p, 1)
            self.assertEqual(res.get("stdout"), "started\n", res)
            self.assertNotEqual(pids_with_arg(m2), [], "keep_background did not keep it")
            send(p, {"op": "exec", "id": 2, "stream": True, "command": hold})
            while True:
                msg = json.loads(p.stdout.readline())
                if msg["type"] == "output" and "started" in msg.get("data", ""):
                    break
                self.assertNotEqual(msg["type"], "result", msg)
        else:
            p = self.spawn(script=hold, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
            self.assertEqual(p.stdout.readline(), b"started\n")
            m2 = m
        self.assertNotEqual(pids_with_arg(m), [])
        p.send_signal(signal.SIGKILL)
        p.wait()
        self.assert_no_leftover(m)
        self.assert_no_leftover(m2)

    def test_pid_reuse_hits_nobody_else(self):
        host = self.host_sleep()
        # another sandbox, with a long sleep of its own
        other = self.mark()
        o = self.spawn(script="exec " + linger(other), mode="run", stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not pids_with_arg(other) and time.monotonic() < deadline:
            time.sleep(0.05)
        victims = pids_with_arg(other)
        self.assertEqual(len(victims), 1, "the other sandbox's sleep did not start")
        # this sandbox: cycle pids as fast as it can, in processes that
        # ignore SIGTERM and leave orphans, until the timeout kills them all
        cycle = "while :; do /bin/true; done"
        r = self.timed("trap '' TERM; ({c}) & setsid -f sh -c \"trap '' TERM; {c}\"; {c}"
                       .format(c=cycle), 3)
        self.assertEqual(r.code, 124, r)
        # and a command that ends with a pid-cycling orphan left behind
        r = self.sh("setsid -f sh -c '{c}' </dev/null >/dev/null 2>&1; sleep 0.5; echo end"
                    .format(c=cycle))
        self.assertEqual(r.out, "end\n", r)
        time.sleep(0.5)  # past the serve mode's kill of leftovers
        self.assert_alive(host, "the host's sleep")
        self.assertEqual(pids_with_arg(other), victims, "the other sandbox's sleep was hit")
        self.assertIsNone(o.poll(), "the other sandbox ended")
        self.assert_answers()


both_modes(globals(), Processes)

if __name__ == "__main__":
    unittest.main()
