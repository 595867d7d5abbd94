"""Terminal: a command cannot type into the terminal agentbox was started
from (TIOCSTI, TIOCLINUX, with or without the upper 32 bits of the request
set), nor find a terminal at all in a session.

`agentbox run` is started on a real pty (python's pty.openpty), which the
command gets as fds 0-2: once as the caller's controlling terminal, once as
nobody's (then the command can make it its own controlling terminal, and
only the seccomp filter stands between it and TIOCSTI). `agentbox serve`
talks JSON over pipes; it is started with the pty as its controlling
terminal and stderr, and the command must find no terminal at all."""

import json
import os
import subprocess
import unittest

import harness
from attacklib_b import (Extra, as_controlling_terminal, open_pty, read_all, recv_until, send)
from harness import Attacks, both_modes

INJECT = "~"  # appears in nothing the probe or agentbox print


def parse(out):
    """The probe's `inject` lines: {target: {key: value}}."""
    res = {}
    for line in out.splitlines():
        words = line.split()
        if not words or not all("=" in w for w in words[1:]):
            continue  # not the probe's (agentbox's own messages)
        if "=" in words[0]:
            res.setdefault("self", {}).update(w.split("=", 1) for w in words)
        else:
            res[words[0]] = dict(w.split("=", 1) for w in words[1:])
    return res


class Terminal(Extra, Attacks):
    def inject(self, ctty):
        """Run /probe inject on a pty; (targets, denied, what the pty's
        master got as output, what the pty holds as input)."""
        master, slave = open_pty(self)
        if self.serve:
            p = self.spawn(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave,
                           preexec_fn=as_controlling_terminal(slave))
            self.assertEqual(json.loads(p.stdout.readline())["type"], "hello")
            send(p, {"op": "exec", "id": 1, "command": "/probe inject '%s'; "
                     "echo pts=$(ls /dev/pts | grep -vx ptmx | wc -l); "
                     "echo links=$(ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -c -e pts -e tty)"
                     % INJECT})
            m = recv_until(p, 1)
            self.assertEqual(m["type"], "result", m)
            out, denied = m["stdout"], harness._denied(m["denied_syscalls"])
            send(p, {"op": "exec", "id": 2, "command": "echo ok"})
            self.assertEqual(recv_until(p, 2)["stdout"], "ok\n")
            p.stdin.close()
            self.assertEqual(p.wait(timeout=harness.TIMEOUT), 0)
            tty_out = read_all(master).decode(errors="replace")
        else:
            r, w = os.pipe()
            p = self.spawn(("--report", "fd:%d" % w), "/probe inject '%s'" % INJECT,
                           stdin=slave, stdout=slave, stderr=slave, pass_fds=(w,),
                           preexec_fn=as_controlling_terminal(slave) if ctty else None)
            os.close(w)
            with os.fdopen(r) as f:
                report = json.load(f)
            p.wait(timeout=harness.TIMEOUT)
            self.assertIsNone(report["error"], report)
            self.assertEqual(report["exit_code"], 0, report)
            denied = harness._denied(report["denied_syscalls"])
            out = tty_out = read_all(master).decode(errors="replace")
        typed = read_all(slave).decode(errors="replace")
        targets = parse(out)
        self.assertIn("fd0", targets, out)
        return targets, denied, tty_out, typed

    def assert_nothing_typed(self, targets, denied, tty_out, typed, keys):
        for name, t in targets.items():
            if name == "self":
                continue
            for k in keys:
                self.assertEqual(t[k], "EPERM", "%s %s: %s" % (name, k, targets))
        self.assertNotIn(INJECT, typed, "the injected input reached the terminal")
        self.assertNotIn(INJECT, tty_out, "the injected input was echoed by the terminal")
        self.assertGreaterEqual(denied.get("ioctl", 0), len(keys) * (len(targets) - 1),
                                denied)

    def test_tiocsti_into_the_terminal(self):
        for ctty in (False, True):
            res = self.inject(ctty)
            self.assert_nothing_typed(*res, keys=("sti",))

    def test_tioclinux_paste_into_the_terminal(self):
        for ctty in (False, True):
            res = self.inject(ctty)
            self.assert_nothing_typed(*res, keys=("linux",))

    def test_tiocsti_with_a_crafted_64bit_request(self):
        # 0x100005412: the kernel uses the low 32 bits, a filter comparing
        # all 64 would let it through (CVE-2019-10063)
        for ctty in (False, True):
            res = self.inject(ctty)
            self.assert_nothing_typed(*res, keys=("sti64", "linux64"))

    def test_take_the_callers_terminal(self):
        targets = self.inject(ctty=True)[0]
        if self.serve:
            # no terminal at all: stdin /dev/null, output pipes, no ctty
            for fd in ("fd0", "fd1", "fd2"):
                self.assertEqual(targets[fd]["tty"], "none", targets)
            self.assertNotIn("sctty0", targets["self"], targets)
            # no pty in its /dev/pts, no fd of its processes on a terminal
            self.assertEqual(targets["self"]["pts"], "0", targets)
            self.assertEqual(targets["self"]["links"], "0", targets)
        else:
            # the caller's terminal is the command's stdin, but it cannot
            # become the command's controlling terminal: it is agentbox's
            self.assertEqual(targets["self"]["sctty0"], "EPERM", targets)
        self.assertEqual(targets["self"]["devtty"], "ENXIO", targets)
        self.assertNotIn("devtty-fd3", targets, targets)


both_modes(globals(), Terminal)

if __name__ == "__main__":
    unittest.main()
