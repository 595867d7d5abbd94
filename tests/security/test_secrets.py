"""The caller's secrets: environment variables that look like secrets, the
environ of agentbox's own processes, and the kernel keyring."""

import ctypes
import os
import unittest

from harness import Attacks, both_modes

SECRET_NAMES = ["AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "GITHUB_TOKEN",
                "GH_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DB_PASSWORD", "PGPASSWORD",
                "MYSQL_PWD", "SSH_AUTH_SOCK", "NPM_TOKEN", "HF_TOKEN", "STRIPE_SECRET_KEY",
                "SLACK_BOT_TOKENS", "AZURE_CLIENT_SECRET", "GOOGLE_APPLICATION_CREDENTIALS",
                "APP_SECRET_VALUE", "SMTP_PASSWD", "LC_SECRET_TOKEN"]

# every environ the command can read: its own, its parent's, pid 1's, all
ENVIRONS = ('for f in /proc/self/environ /proc/$$/environ /proc/1/environ '
            '/proc/[0-9]*/environ /proc/[0-9]*/task/*/environ; do '
            'tr "\\0" "\\n" < $f 2>/dev/null; done; env')


def secret_env():
    tokens = {n: "tok-%s-%s" % (n.lower(), os.urandom(8).hex()) for n in SECRET_NAMES}
    env = dict(os.environ, **tokens)
    env["AGENTBOX_SEC_BENIGN"] = "benign-" + os.urandom(4).hex()
    return env, tokens


class Secrets(Attacks):
    def check(self, r, tokens):
        for name, token in tokens.items():
            self.assertNotIn(token, r.out + r.err, name)
            self.assertNotIn(name + "=", r.out, name)
        self.assertIn("PATH=", r.out, r)  # the environment was printed

    def test_secret_variables_with_the_default_policy(self):
        env, tokens = secret_env()
        r = self.sandbox(env=env).sh(ENVIRONS)
        self.check(r, tokens)

    def test_secret_variables_with_env_policy_all(self):
        env, tokens = secret_env()
        r = self.sandbox(("--env-policy", "all"), env=env).sh(ENVIRONS)
        self.check(r, tokens)
        # `all` did pass the rest
        self.assertIn("AGENTBOX_SEC_BENIGN=" + env["AGENTBOX_SEC_BENIGN"], r.out, r)

    def test_environ_of_agentbox_processes(self):
        env, tokens = secret_env()
        r = self.sandbox(("--env-policy", "all"), env=env).sh(
            'for p in /proc/[0-9]*; do [ "$p" = /proc/$$ ] && continue; '
            'echo "== $p $(cat $p/comm)"; tr "\\0" "\\n" < $p/environ && echo "READ $p"; '
            'done 2>&1; true')
        for name, token in tokens.items():
            self.assertNotIn(token, r.out, name)
        self.assertIn("== /proc/1 ", r.out, r)
        self.assertNotIn("READ /proc/1\n", r.out, r)  # the init's environ is closed

    def test_kernel_keyring(self):
        # a key in a session keyring of this test's own, which agentbox and
        # the sandbox inherit: keyctl, add_key and request_key must be refused
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        sid = libc.syscall(250, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
        self.assertGreater(sid, 0, os.strerror(ctypes.get_errno()))
        token = "keyring-" + os.urandom(8).hex()
        key = libc.syscall(248, b"user", b"agentbox-sec", token.encode(), len(token),
                           ctypes.c_int(-3))  # add_key to KEY_SPEC_SESSION_KEYRING
        self.assertGreater(key, 0, os.strerror(ctypes.get_errno()))
        self.addCleanup(libc.syscall, 250, 9, ctypes.c_long(key), ctypes.c_int(-3))  # UNLINK
        script = (
            "import ctypes, errno\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.syscall.restype = ctypes.c_long\n"
            "def show(name, r):\n"
            "    print(name, r, errno.errorcode.get(ctypes.get_errno(), '-') if r < 0 else '')\n"
            "buf = ctypes.create_string_buffer(256)\n"
            "show('keyctl-read', libc.syscall(250, 11, ctypes.c_long(%d), buf, 256))\n"
            "show('keyctl-get-session', libc.syscall(250, 0, ctypes.c_int(-3), 0))\n"
            "show('request_key', libc.syscall(249, b'user', b'agentbox-sec', None, 0))\n"
            "show('add_key', libc.syscall(248, b'user', b'x', b'y', 1, ctypes.c_int(-3)))\n"
            "print(buf.value)\n" % key)
        r = self.sh('python3 -c "$1"; cat /proc/keys /proc/key-users; keyctl show; true',
                    args=("sh", script))
        self.assertNotIn(token, r.out + r.err, r)
        for call in ("keyctl-read", "keyctl-get-session", "request_key", "add_key"):
            self.assertIn("%s -1 EPERM\n" % call, r.out, r)
        for call in ("keyctl", "request_key", "add_key"):
            self.assertIn(call, r.denied, r)


both_modes(globals(), Secrets)

if __name__ == "__main__":
    unittest.main()
