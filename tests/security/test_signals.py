"""Signals: a command cannot stop or kill agentbox's own processes in the
sandbox (the init, the command shims, their warm shells), and a session
goes on answering whatever a command signals.

Issue 46 ("Locked doors"), item 3: a command looping `kill -STOP` over every
pid it could see stopped each idle shim as it appeared, and every later
command and file operation waited for its timeout. Where the kernel has
Landlock's signal scope (ABI 6, Linux 6.12) each session command's layer
scopes signals, and those kills fail with EPERM; elsewhere the init kills a
shim that stops and the launcher takes another (tested here with
AGENTBOX_TEST_NO_SIGNAL_SCOPE=1, as an older kernel would be).

`Signals` is serve mode only: `agentbox run`'s one command has no shims, and
its init is pid 1, which no process of its namespace can stop or kill
(`InitSignals`, run mode only, shows it)."""

import os
import time
import unittest

import harness
from attacklib_b import Extra, send
from harness import GUARD, NOT_SANDBOXED, MUST_WORK, Attacks, ServeMode, one_mode

PROMPT = 5.0  # seconds in which a request must be answered after the attack

# shell functions: sid PID (its session), kind PID (init, shim, warm or other)
FUNCS = r'''
sid() { s=$(cat /proc/$1/stat 2>/dev/null) || return 1; s=${s##*) }; set -- $s; echo $4; }
kind() {
  [ "$1" = 1 ] && { echo init; return; }
  k=$1; s=$(cat /proc/$k/stat 2>/dev/null) || return 1; s=${s##*) }; set -- $s
  [ "$2" = 1 ] && { echo shim; return; }
  case "$(tr '\0' ' ' 2>/dev/null </proc/$k/cmdline)" in
  *agentbox-warm*) echo warm ;; *) echo other ;; esac
}
hit() {  # hit SIG PID: what the kill did, as "KIND SIG ok|EPERM|ESRCH"
  k=$(kind $2) || return 0
  if e=$(kill -$1 $2 2>&1); then r=ok; else
    case $e in *"not permitted"*) r=EPERM ;; *"No such"*) r=ESRCH ;; *) r="?$e" ;; esac
  fi
  echo "$k $1 $r"
}
'''


def attack(sigs, seconds, spare_parent=False):
    """Shell: for `seconds`, send each of sigs to every process the
    command can see outside its own session (its own shim too, unless
    spare_parent), as they appear; then, unless spare_parent, `kill -SIG
    -1` for each. Prints one line per distinct "KIND SIG RESULT", then
    "done"."""
    return GUARD + FUNCS + r'''
mine=$(sid self); parent=$PPID
now() {{ read u _ </proc/uptime; echo ${{u%.*}}; }}  # no date(1) in every image
end=$(( $(now) + {secs} ))
while [ $(now) -lt $end ]; do
  for d in /proc/[0-9]*; do
    p=${{d#/proc/}}
    [ "$(sid $p)" = "$mine" ] && continue
    {spare}
    for s in {sigs}; do hit $s $p; done
  done
done | sort -u
{all}
echo done
'''.format(secs=seconds, sigs=" ".join(sigs),
           spare='[ "$p" = "$parent" ] && continue' if spare_parent else "",
           all="" if spare_parent else
           "for s in %s; do kill -$s -1 2>/dev/null; done" % " ".join(sigs))


def has_signal_scope():
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
        abi = libc.syscall(444, None, 0, 1)
        return abi >= 6
    except (OSError, AttributeError):
        return False


class Signals(Extra, Attacks):
    def setUp(self):
        super().setUp()
        self.assertIs(self.mode, ServeMode)

    def warmed(self, box):
        """Three commands at once, so that idle shims with warm shells are
        there for the attack to find."""
        self.assertNotIn(NOT_SANDBOXED, box.call({"op": "exec", "command": GUARD + "true"})
                         ["stdout"])
        ids = []
        for _ in range(3):
            box.n += 1
            ids.append(box.n)
            send(box.p, {"op": "exec", "id": box.n, "command": "sleep 0.3"})
        timer = harness._Watchdog(harness.TIMEOUT, box.p)
        try:
            got = {}
            while len(got) < len(ids):  # in the order they end
                m = box._recv()
                self.assertIsNotNone(m, "agentbox serve ended")
                if m.get("id") in ids and m["type"] != "output":
                    got[m["id"]] = m
        finally:
            timer.cancel()
        self.assertEqual([got[i]["type"] for i in ids], ["result"] * 3, got)
        time.sleep(0.2)  # their warm shells start

    def prompt(self, box, req):
        """One request, answered within PROMPT seconds."""
        t = time.monotonic()
        m = box.call(dict(req), timeout=4 * PROMPT)
        took = time.monotonic() - t
        self.assertLess(took, PROMPT, "%s answered after %.1fs: %s" % (req, took, m))
        return m

    def assert_session_answers(self, box, rounds=6):
        """Commands and file operations, each answered promptly and right."""
        for i in range(rounds):
            m = self.prompt(box, {"op": "exec", "command": "echo run %d" % i, "timeout": 30})
            self.assertEqual((m["type"], m.get("stdout")), ("result", "run %d\n" % i), m)
            m = self.prompt(box, {"op": "write", "path": "f%d.txt" % i, "content": "x%d" % i,
                                        "overwrite": True})
            self.assertEqual(m["type"], "result", m)
            m = self.prompt(box, {"op": "read", "path": "f%d.txt" % i})
            self.assertIn("x%d" % i, str(m), m)
            m = self.prompt(box, {"op": "ls", "path": "/workspace"})
            self.assertNotEqual(m["type"], "error", m)

    def test_agentbox_processes_are_out_of_a_commands_kill(self):
        if not has_signal_scope():
            if MUST_WORK:
                self.fail("this kernel has no Landlock signal scope (ABI 6)")
            self.skipTest("no Landlock signal scope (ABI 6, Linux 6.12) here")
        box = self.box()
        self.warmed(box)
        # the attack goes on in the background while the session works
        m = box.call({"op": "exec", "keep_background": True, "timeout": 30,
                      "command": "(%s) >/tmp/attack.log 2>&1 </dev/null &" %
                                 attack(["STOP", "KILL"], 4, False)})
        self.assertEqual(m["type"], "result", m)
        t0 = time.monotonic()
        self.assert_session_answers(box)
        # its own processes it may stop: a `kill -STOP -1` hits only those
        m = self.prompt(box, {"op": "exec", "timeout": 30, "command":
                              "sleep 30 & kill -STOP -1; echo stop=$?; kill -KILL -1; "
                              "echo kill=$?; wait"})
        self.assertEqual(m.get("stdout"), "stop=0\nkill=0\n", m)
        log = ""
        while "done" not in log.split("\n") and time.monotonic() - t0 < 30:
            time.sleep(0.2)
            log = self.prompt(box, {"op": "exec", "command": "cat /tmp/attack.log"})["stdout"]
        self.assertNotIn(NOT_SANDBOXED, log)
        self.assertIn("done", log.split("\n"), log)
        lines = set(log.split("\n"))
        for kind in ("init", "shim", "warm"):
            for sig in ("STOP", "KILL"):
                self.assertNotIn("%s %s ok" % (kind, sig), lines, log)
        # it did find them, and was refused
        for kind in ("init", "shim", "warm"):
            self.assertIn("%s STOP EPERM" % kind, lines, log)
            self.assertIn("%s KILL EPERM" % kind, lines, log)
        self.assert_session_answers(box, 2)

    def fallback(self, sigs):
        """The attack without the signal scope, sparing its own shim: it
        hits the others, and the session answers right after."""
        box = self.sandbox(env=dict(os.environ, AGENTBOX_TEST_NO_SIGNAL_SCOPE="1"))
        self.warmed(box)
        m = box.call({"op": "exec", "timeout": 30,
                      "command": attack(sigs, 2, spare_parent=True)})
        self.assertEqual(m["type"], "result", m)
        self.assertNotIn(NOT_SANDBOXED, m["stdout"], m)
        lines = set(m["stdout"].split("\n"))
        for sig in sigs:  # no scope: the idle shims were hit
            self.assertIn("shim %s ok" % sig, lines, m)
        self.assert_session_answers(box)

    def test_without_the_scope_a_stopped_shim_is_replaced(self):
        self.fallback(["STOP"])

    def test_without_the_scope_a_killed_shim_is_replaced(self):
        self.fallback(["KILL"])

    def test_without_the_scope_stop_all_ends_only_its_own_command(self):
        # kill -STOP -1 stops the command's own shim as well as the idle
        # ones: the command is answered (killed, said so) at once, not at
        # its timeout, and the session goes on
        box = self.sandbox(env=dict(os.environ, AGENTBOX_TEST_NO_SIGNAL_SCOPE="1"))
        self.warmed(box)
        m = self.prompt(box, {"op": "exec", "timeout": 30,
                              "command": GUARD + "kill -STOP -1; sleep 20; echo survived"})
        self.assertEqual(m["type"], "error", m)
        self.assertIn("supervisor in the sandbox was killed", m["message"], m)
        self.assert_session_answers(box)


class InitSignals(Extra, Attacks):
    """`agentbox run`: its one command's supervisor is the init, pid 1 of the
    sandbox's pid namespace. The kernel drops a signal sent from inside that
    pid 1 has no handler for (it installs none), SIGSTOP and SIGKILL
    included; those it blocks (SIGCHLD, the forwarded ones) it reads from a
    signalfd or leaves pending: no signal of the command disturbs it."""

    def test_every_signal_to_the_init(self):
        # a sanitizer's runtime (tests/CMakeLists.txt, AGENTBOX_SANITIZED)
        # gives the init a handler for SIGSEGV (and SIGBUS, SIGFPE), so one
        # sent from inside reaches it there: not what a release build runs
        sigs = "STOP TSTP TERM INT HUP QUIT USR1 USR2 ALRM PIPE CHLD KILL"
        if os.environ.get("AGENTBOX_SANITIZED") != "1":
            sigs += " SEGV"
        t = time.monotonic()
        r = self.guarded("for s in %s; do kill -$s 1; done; sleep 0.2; echo alive" % sigs)
        self.assertEqual((r.code, r.out), (0, "alive\n"), r)
        self.assertLess(time.monotonic() - t, PROMPT, r)


one_mode(globals(), Signals, ServeMode)
one_mode(globals(), InitSignals, harness.RunMode)

if __name__ == "__main__":
    unittest.main()
