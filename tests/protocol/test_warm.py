"""A session's warm shell (src/warm/warm.h): an idle shim execs `/bin/sh -c --
PLACEHOLDER` with agentbox-warm.so preloaded, and a shell request becomes
that process. Every test compares what a command sees with the warm shell
against a server without it (AGENTBOX_NO_WARM=1), where each command is a
fresh exec, and checks that the warm shell was really used (its object is
mapped in the command: /proc/$$/maps). Runs as root and as an unprivileged
user. AGENTBOX_BIN names the binary."""

import os
import shutil
import time
import unittest

from test_fileops import Server, make_dir

WARM_MAPPED = "grep -c agentbox-warm /proc/$$/maps || true"
# a command layer without Landlock's signal scope, as before Linux 6.12: a
# command can then signal an idle warm shell (src/view/landlock.h)
NO_SCOPE = {"AGENTBOX_TEST_NO_SIGNAL_SCOPE": "1"}


def signal_scope():
    """Whether this kernel has Landlock's signal scope (ABI 6)."""
    import ctypes
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1) >= 6


def warm_env(**extra):
    env = dict(os.environ)
    env.pop("AGENTBOX_NO_WARM", None)
    env.pop("AGENTBOX_WARM_TEST_BROKEN", None)
    env.update(extra)
    return env


def host_descendants(root):
    """Host pids below root (itself included), by walking /proc."""
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, grew = {root}, True
    while grew:
        grew = False
        for pid, pp in parent.items():
            if pp in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return None


def open_server(test, ws, *args, env):
    """A server on ws, closed at the test's end; the test skips where
    agentbox cannot run at all (unless AGENTBOX_MUST_WORK=1)."""
    try:
        sv = Server(ws, *args, env=env)
    except AssertionError as e:
        if os.environ.get("AGENTBOX_MUST_WORK") == "1":
            raise
        test.skipTest("agentbox cannot run here: %s" % e)
    test.addCleanup(sv.close)
    return sv


class Warm(unittest.TestCase):
    def server(self, env):
        return open_server(self, self.ws, env=env)

    def setUp(self):
        self.ws = make_dir()
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.warm = self.server(warm_env())
        self.cold = self.server(warm_env(AGENTBOX_NO_WARM="1"))

    def exec(self, sv, command, **kw):
        time.sleep(0.02)  # the idle shim's warm shell is under way or ready
        m = sv.call(op="exec", command=command, **kw)
        self.assertEqual(m["type"], "result", m)
        return m

    def assert_warm(self, sv, expect=True):
        n = int(self.exec(sv, WARM_MAPPED)["stdout"].strip() or 0)
        self.assertEqual(n > 0, expect, "agentbox-warm.so mapped %d times" % n)

    def same(self, command, **kw):
        """command's result with the warm shell and without: equal."""
        w = self.exec(self.warm, command, **kw)
        c = self.exec(self.cold, command, **kw)
        for k in ("exit_code", "signal", "stdout", "stderr", "timed_out"):
            self.assertEqual(w.get(k), c.get(k), "%s of %r: %r" % (k, command, (w, c)))
        return w

    def test_the_warm_shell_is_used_and_the_cold_path_is_not(self):
        self.assert_warm(self.warm)
        self.assert_warm(self.cold, False)

    def test_pid_is_the_command_and_the_last_command_is_execd(self):
        # $$ is the process itself: its child's parent
        for sv in (self.warm, self.cold):
            a, b = self.exec(sv, "echo $$; cut -d' ' -f4 /proc/self/stat; :")["stdout"].split()
            self.assertEqual(a, b)
        # a simple command is exec'd by the shell itself: it has the pid $$
        self.assertEqual(self.same("exec ps -o comm= -p $$")["stdout"], "ps\n")
        self.same("ps -o comm= -p $$")

    def test_argv0_status_signal(self):
        self.assertEqual(self.same("echo $0 \"$#\" \"$*\"")["stdout"], "/bin/sh 0 \n")
        self.assertEqual(self.same("exit 7")["exit_code"], 7)
        m = self.same("kill -TERM $$")
        self.assertEqual((m["exit_code"], m["signal"]), (143, "SIGTERM"))
        self.assertTrue(self.same("sleep 5", timeout=0.3)["timed_out"])

    def test_cmdline_shows_the_command(self):
        cmd = "tr '\\0' '\\n' < /proc/$$/cmdline | grep -v '^$'"
        self.assertEqual(self.same(cmd)["stdout"], "/bin/sh\n-c\n--\n%s\n" % cmd)
        # ps in the sandbox: the command, not the placeholder
        out = self.exec(self.warm, "ps -o args= -p $$")["stdout"]
        self.assertEqual(out.rstrip(), "/bin/sh -c -- ps -o args= -p $$")

    def test_environment_cwd_stdin_fds(self):
        env = {"FOO": "bar baz", "EMPTY": "", "PATH": "/usr/bin:/bin"}
        m = self.same("env | sort", env=env)
        self.assertIn("FOO=bar baz\n", m["stdout"])
        self.assertNotIn("LD_PRELOAD", m["stdout"])
        self.same("pwd; cd ..; pwd", cwd="/tmp")
        self.assertEqual(self.same("cat", stdin="data\n")["stdout"], "data\n")
        # the shell has 0-2 only: no socket, no memfd
        self.assertEqual(self.same("ls /proc/$$/fd")["stdout"], "0\n1\n2\n")
        # the shell's own view (a child reading it races with dash's
        # vfork, which blocks every signal until the child has exec'd)
        self.same("while read k v; do case $k in Sig*|Cap*|NoNewPrivs*|Seccomp*) echo $k $v;"
                  " esac; done < /proc/$$/status; ulimit -a; umask")
        self.same("cat /proc/$$/oom_score_adj; ps -o pgid=,sid= -p $$ | tr -s ' '"
                  " | sed 's/[0-9][0-9]*/n/g'")
        self.same("[ $(ps -o pgid= -p $$) -eq $$ ] && [ $(ps -o sid= -p $$) -eq $$ ]")

    def test_bad_cwd_answers_as_before(self):
        w = self.warm.call(op="exec", command="true", cwd="/nonexistent")
        c = self.cold.call(op="exec", command="true", cwd="/nonexistent")
        self.assertEqual(w, c)
        self.assert_warm(self.warm)  # the warm shell is still there for the next

    def test_long_commands(self):
        # past the argument area (4 KiB), past one packet (32 KiB): the
        # whole command runs; ps shows its start
        for n in (4000, 5000, 40000, 120000):
            cmd = "echo " + "x" * n + " | wc -c; tr '\\0' '\\n' < /proc/$$/cmdline | sed -n 4p"
            w = self.exec(self.warm, cmd)
            c = self.exec(self.cold, cmd)
            self.assertEqual(w["stdout"].split()[0], str(n + 1))
            self.assertEqual(c["stdout"].split()[0], str(n + 1))
            self.assertEqual(w["stdout"].split("\n")[1], cmd[:4095])
        # over ARG_MAX: an exec decides, as without the warm shell
        for sv in (self.warm, self.cold):
            m = self.exec(sv, "echo " + "x" * 300000)
            self.assertEqual(m["exit_code"], 126)
            self.assertIn("Argument list too long", m["stderr"])

    def test_variables_read_before_main_take_the_cold_path(self):
        for var, val in (("LD_PRELOAD", "/nonexistent.so"), ("GLIBC_TUNABLES", "x=1"),
                         ("MALLOC_ARENA_MAX", "1"), ("LD_BIND_NOW", "1")):
            m = self.exec(self.warm, "echo \"$%s\"; %s" % (var, WARM_MAPPED), env={var: val})
            self.assertEqual(m["stdout"], "%s\n0\n" % val, var)
        self.assert_warm(self.warm)

    def test_argv_requests_and_file_operations_between(self):
        m = self.warm.call(op="exec", argv=["sh", "-c", WARM_MAPPED])
        self.assertEqual(m["stdout"], "0\n")
        self.assert_warm(self.warm)
        self.assertEqual(self.warm.call(op="write", path="/workspace/f", content="hi")["type"],
                         "result")
        out = self.exec(self.warm, "cat f; echo; " + WARM_MAPPED)["stdout"].split()
        self.assertEqual(out[0], "hi")
        self.assertNotEqual(out[1], "0")

    def test_many_in_a_row_and_in_parallel(self):
        for i in range(30):
            self.assertEqual(self.warm.call(op="exec", command="echo %d" % i)["stdout"],
                             "%d\n" % i)
        ids = [self.warm.send(op="exec", command="sleep 0.2; echo %d; %s" % (i, WARM_MAPPED))
               for i in range(6)]
        got = {}
        while len(got) < len(ids):
            m = self.warm.recv()
            if m.get("id") in ids and m["type"] != "output":
                got[m["id"]] = m
        for i, rid in enumerate(ids):
            self.assertEqual(got[rid]["stdout"].split()[0], str(i))
        # the later ones went to shims that were idle: warm ones
        self.assertGreater(sum(got[r]["stdout"].split()[1] != "0" for r in ids), 0)

    def test_keep_background_and_kill(self):
        m = self.exec(self.warm, "sleep 30 & sleep 0.3; echo started", keep_background=True)
        self.assertEqual([b["command"] for b in m.get("background", [])], ["sleep"])
        # a later command is in a signal scope of its own (Landlock ABI 6):
        # what an earlier one left is out of its kill, as of its ptrace
        m = self.exec(self.warm, "pkill -x sleep; echo $?")
        self.assertEqual(m["stdout"], "1\n" if signal_scope() else "0\n", m)
        # the way docs/detached.md gives: a wrapper in the first command
        # that kills its child when a later one asks (with a file)
        self.exec(self.warm, "nohup sh -c 'sleep 301 & p=$!; until [ -e /tmp/stop ]; do "
                  "sleep 0.1; done; kill $p' >/dev/null 2>&1 &", keep_background=True)
        self.assertEqual(self.exec(self.warm, "pgrep -cf '^sleep 30[1]'")["stdout"], "1\n")
        m = self.exec(self.warm, "touch /tmp/stop; i=0; while pgrep -f '^sleep 30[1]' "
                      ">/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; "
                      "pgrep -cf '^sleep 30[1]'")
        self.assertEqual(m["stdout"], "0\n", m)

    def idle_shims(self, **env):
        """A server whose shims (two for its two commands at once, and a
        spare) are idle, each with its warm shell; a command goes to the
        one idle longest."""
        sv = open_server(self, self.ws, "--max-concurrent", "2", env=warm_env(**env))
        parallel(sv, ["sleep 0.3"] * 2)
        time.sleep(0.1)
        return sv

    def test_back_to_back_commands_take_turns_on_the_ready_shells(self):
        # the shim of the command just ended is still making its warm
        # shell; the others' wait ready: commands sent back to back, each
        # as soon as the last result came, never go to the same shim twice
        # in a row
        sv = self.idle_shims()
        shims = [sv.call(op="exec", command="echo $PPID; " + WARM_MAPPED)["stdout"].split()
                 for _ in range(6)]
        self.assertTrue(all(n != "0" for _, n in shims), shims)
        pids = [p for p, _ in shims]
        for a, b in zip(pids, pids[1:]):
            self.assertNotEqual(a, b, pids)

    def test_killed_warm_shells_are_made_again(self):
        # where no signal scope keeps a command's kill from them
        sv = self.idle_shims(**NO_SCOPE)
        # a command on one shim kills the others' idle warm shells
        self.assertEqual(self.exec(sv, "pkill -9 -f 'agentbox-war[m]'; echo $?")["stdout"], "0\n")
        time.sleep(0.1)
        probe = "echo $PPID; " + WARM_MAPPED
        # another shim, idle longest, takes the probe: spawned, its warm
        # shell is gone; then, once idle, it makes a new one: a killed
        # shell is no reason to give up on them (only one that never said
        # ready is)
        victim, mapped = self.exec(sv, probe)["stdout"].split()
        self.assertEqual(mapped, "0")
        for _ in range(4):  # the shims take turns: the victim's comes again
            again, mapped = self.exec(sv, probe)["stdout"].split()
            if again == victim:
                break
        self.assertEqual(again, victim)
        self.assertNotEqual(mapped, "0")

    def test_a_closed_session_leaves_no_process(self):
        self.assert_warm(self.warm)
        time.sleep(0.2)
        pids = host_descendants(self.warm.p.pid)
        warm = [p for p in pids if b"agentbox-warm" in (cmdline(p) or b"")]
        self.assertTrue(warm, "no warm shell below the server")
        self.warm.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = [p for p in pids if cmdline(p) is not None and os.path.exists("/proc/%d" % p)]
            if not left:
                break
            time.sleep(0.05)
        self.assertEqual(left, [])


class Profiles(unittest.TestCase):
    """The object's and the shim's system calls pass every shipped seccomp
    profile (strict has no socket calls but agentbox's own plumbing), and
    nothing is denied on the way: a denial would be the session's."""

    def test_each_profile(self):
        for profile in ("strict", "default", "permissive"):
            ws = make_dir()
            self.addCleanup(shutil.rmtree, ws, True)
            sv = open_server(self, ws, "--seccomp", profile, env=warm_env())
            for _ in range(2):
                time.sleep(0.05)
                m = sv.call(op="exec", command=WARM_MAPPED + "; echo $0")
                self.assertEqual(m["exit_code"], 0, m)
                self.assertNotEqual(m["stdout"].split()[0], "0", profile)
                self.assertEqual(m["denied_syscalls"], [], profile)
            self.assertEqual(sv.call(op="stats").get("denied_syscalls", []), [], profile)


class Fallback(unittest.TestCase):
    """An object ld.so cannot load: the shell runs the placeholder, which
    does nothing, and every command is spawned as before."""

    def test_broken_object(self):
        ws = make_dir()
        self.addCleanup(shutil.rmtree, ws, True)
        sv = open_server(self, ws, env=warm_env(AGENTBOX_WARM_TEST_BROKEN="1"))
        for i in range(3):
            time.sleep(0.05)
            m = sv.call(op="exec", command="echo $0 %d; %s" % (i, WARM_MAPPED))
            self.assertEqual((m["exit_code"], m["stdout"]), (0, "/bin/sh %d\n0\n" % i))
        # the placeholder ran nothing: the workspace is as it was
        self.assertEqual(os.listdir(ws), [])


def parallel(sv, commands, **kw):
    ids = [sv.send(op="exec", command=c, **kw) for c in commands]
    got = {}
    while len(got) < len(ids):
        m = sv.recv()
        if m.get("id") in ids and m["type"] != "output":
            got[m["id"]] = m
    return [got[i] for i in ids]


# PTRACE_SEIZE (no stop left behind when it works): "ptrace RESULT ERRNO"
SEIZE = ("python3 -c 'import ctypes, sys; l = ctypes.CDLL(None, use_errno=True);"
         " r = l.ptrace(0x4206, int(sys.argv[1]), 0, 0); print(\"ptrace\", r, ctypes.get_errno())'")

# hijack: a command rewrites the idle warm shell's argv[3] pointer (through
# /proc/PID/mem) so that the next command's shell runs its script first
HIJACK = r"""cat > /tmp/h.py <<'P'
import struct, subprocess
pids = subprocess.run(["pgrep", "-f", "agentbox-war[m]"], capture_output=True,
                      text=True).stdout.split()
for p in pids:
    st = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
    arg_start, env_start = int(st[45]), int(st[47])
    lo, hi = [int(x, 16) for x in [l for l in open("/proc/%s/maps" % p)
                                   if "[stack]" in l][0].split()[0].split("-")]
    m = open("/proc/%s/mem" % p, "r+b", buffering=0)
    m.seek(lo)
    i = m.read(hi - lo).rfind(struct.pack("<Q", arg_start))
    m.seek(env_start)
    m.write(b'env>/workspace/s;eval "$0"\0')
    m.seek(lo + i + 16)
    m.write(struct.pack("<Q", env_start))
    print("patched", p)
P
python3 /tmp/h.py"""


class Domains(unittest.TestCase):
    """Each session command, and each warm shell, is in a Landlock domain
    of its own (landlock_command_layer): no command can ptrace, or open
    /proc/PID/mem of, another command or an idle warm shell (which would
    become the next command), whatever the seccomp profile; within a
    command it can. Where Landlock is off there is no warm shell."""

    def server(self, *args, **env):
        ws = make_dir()
        self.addCleanup(shutil.rmtree, ws, True)
        return open_server(self, ws, *args, env=warm_env(**env)), ws

    def test_commands_cannot_reach_each_other_nor_a_warm_shell(self):
        # no seccomp filter: only Landlock stands between them
        sv, _ = self.server("--max-concurrent", "3", "--seccomp", "none")
        if self.exec_out(sv, WARM_MAPPED) == "0":  # only where Landlock is
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                self.fail("no warm shell")
            self.skipTest("no warm shell here (no Landlock)")
        has_py = self.exec_out(sv, "command -v python3 >/dev/null && echo y") == "y"
        seize = SEIZE if has_py else "echo ptrace -1 1"
        parallel(sv, ["sleep 0.3"] * 3, timeout=10)
        time.sleep(0.2)
        probe = ("sleep 0.2; P=$(pgrep -x -o sleep); echo other $P;"
                 " (exec 3</proc/$P/mem) 2>/dev/null && echo open; %s $P;"
                 " for w in $(pgrep -f 'agentbox-war[m]'); do echo warm $w;"
                 " (exec 3</proc/$w/mem) 2>/dev/null && echo open; %s $w; done;"
                 " sleep 5 & echo own $!; (exec 3</proc/$!/mem) && echo open;"
                 " cat /proc/$!/environ > /dev/null && echo environ; %s $!; kill $!"
                 % (seize, seize, seize))
        # the other command outlives the probe even when python3 starts slowly
        r = parallel(sv, ["sleep 5", probe], timeout=15)
        out = r[1]["stdout"].split("\n")
        self.assertEqual(r[0]["exit_code"], 0, r)
        kinds = [line.split()[0] for line in out if line.split()[:1] in (["other"], ["warm"])]
        self.assertIn("warm", kinds, out)  # an idle shim's warm shell was there
        self.assertIn("other", kinds, out)
        i = 0
        while i < len(out) and not out[i].startswith("own"):
            if out[i].startswith(("other", "warm")):
                who = out[i]
                self.assertEqual(out[i + 1], "ptrace -1 1", (who, out))  # EPERM
                i += 2
            else:
                self.fail("reached: %r" % out)
        # its own child: gdb-style access works
        self.assertEqual(out[i + 1:i + 3], ["open", "environ"], out)
        if has_py:
            self.assertEqual(out[i + 3], "ptrace 0 0", out)

    def exec_out(self, sv, command):
        time.sleep(0.05)
        return sv.call(op="exec", command=command)["stdout"].strip()

    def test_no_warm_shell_without_landlock_and_no_hijack(self):
        sv, ws = self.server("--max-concurrent", "2", "--landlock", "off")
        for _ in range(2):
            self.assertEqual(self.exec_out(sv, WARM_MAPPED), "0")
        if self.exec_out(sv, "command -v python3 >/dev/null && echo y") != "y":
            return
        parallel(sv, ["sleep 0.3"] * 2, timeout=10)
        time.sleep(0.2)
        self.assertEqual(sv.call(op="exec", command=HIJACK, timeout=10)["stdout"], "")
        time.sleep(0.2)
        r = parallel(sv, ["sleep 0.5", "echo B ran"], env={"MYVAR": "x"}, timeout=10)
        self.assertEqual(r[1].get("stdout"), "B ran\n", r[1])
        self.assertFalse(os.path.exists(os.path.join(ws, "s")), "B ran A's script")

    def test_a_stopped_warm_shell_still_runs_the_next_command(self):
        # where no signal scope keeps a command's kill from it
        sv, _ = self.server("--max-concurrent", "2", **NO_SCOPE)
        parallel(sv, ["sleep 0.3"] * 2, timeout=10)
        time.sleep(0.2)
        m = sv.call(op="exec", command="pkill -STOP -f 'agentbox-war[m]'; echo $?", timeout=10)
        self.assertEqual(m["stdout"], "0\n", m)
        time.sleep(0.2)
        # A is busy, B's stopped warm shell takes the command
        r = parallel(sv, ["sleep 0.5", "echo hi; " + WARM_MAPPED], timeout=5)
        self.assertFalse(r[1]["timed_out"], r[1])
        self.assertEqual(r[1]["stdout"].split()[0], "hi", r[1])
        self.assertNotEqual(r[1]["stdout"].split()[1], "0", r[1])

    def test_a_command_cannot_signal_a_warm_shell(self):
        if not signal_scope():
            if os.environ.get("AGENTBOX_MUST_WORK") == "1":
                self.fail("this kernel has no Landlock signal scope (ABI 6)")
            self.skipTest("no Landlock signal scope (ABI 6, Linux 6.12) here")
        sv, _ = self.server("--max-concurrent", "2")
        parallel(sv, ["sleep 0.3"] * 2, timeout=10)
        time.sleep(0.2)
        for sig in ("STOP", "KILL", "TERM"):
            m = sv.call(op="exec", timeout=10,
                        command="pkill -%s -f 'agentbox-war[m]'; echo $?" % sig)
            self.assertEqual(m["stdout"], "1\n", m)
            self.assertIn("Operation not permitted", m["stderr"], m)


if __name__ == "__main__":
    unittest.main()
