"""Published ports (docs/network.md, "Published ports"): agentbox port ID
PORT and {"op":"port"} on a detached sandbox with --net none. A Python
http.server inside on port 8000 is reached from the host by its owner and
refused for another local user (tester2, as root and for a sandbox of
tester's); the sandbox still reaches nothing outside; the relay is a
confined helper that ends with its sandbox; beyond loopback only with a
token each connection sends first (on 0.0.0.0, reached through
127.0.0.1: no other host is involved). Each test has its own
sandboxes' directory (AGENTBOX_RUNTIME_DIR). AGENTBOX_BIN names the
binary."""

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_detach import Client, DetachedBase, alive, wait_until  # noqa: E402
from test_fileops import any_user_bin, make_dir  # noqa: E402

ROOT = os.getuid() == 0
SERVE = ("nohup python3 -m http.server {port} --bind 127.0.0.1 "
         ">/tmp/http-{port}.log 2>&1 &")
# what another user's client does: a fetch, printing the body or the error
FETCH = """
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
except Exception as e:
    print("REFUSED", type(e).__name__, e)
"""


def users():
    try:
        return pwd.getpwnam("tester"), pwd.getpwnam("tester2")
    except KeyError:
        return None


def fetch(url, timeout=10):
    return urllib.request.urlopen(url, timeout=timeout).read().decode()


class Ports(DetachedBase):
    def setUp(self):
        super().setUp()
        with open(os.path.join(self.ws, "index.html"), "w") as f:
            f.write("hello from inside\n")

    def create(self, *args):
        return super().create("--net", "none", *args)

    def relays(self, sid):
        """The pids of the sandbox's port relays (agentbox-port)."""
        def comm(p):
            try:
                with open("/proc/%d/comm" % p) as f:
                    return f.read().strip()
            except OSError:
                return None
        return [p for p in self.sandbox_pids(sid) if comm(p) == "agentbox-port" and alive(p)]

    def serve_inside(self, sid, port=8000):
        r = self.ab("exec", sid, "-c", SERVE.format(port=port))
        self.assertEqual(r.returncode, 0, r.stderr)

    def published(self, sid, *args):
        r = self.ab("port", sid, "8000", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        url = r.stdout.strip()
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+$")
        return url

    def wait_page(self, url):
        def up():
            try:
                return "hello from inside" in fetch(url + "/index.html", 2)
            except OSError:
                return False
        self.assertTrue(wait_until(up, 20), "the server inside never answered at " + url)

    def test_owner_reaches_a_server_inside_net_none(self):
        sid = self.create()
        self.serve_inside(sid)
        url = self.published(sid)
        self.wait_page(url)
        # asked again: the same URL, listed once
        self.assertEqual(self.published(sid), url)
        r = self.ab("port", sid)
        self.assertEqual(r.stdout, "8000 %s\n" % url)
        # many requests, each a connection of its own
        for _ in range(50):
            self.assertIn("hello from inside", fetch(url + "/index.html"))
        # closed: nothing listens there any more
        r = self.ab("port", sid, "8000", "--close")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ab("port", sid).stdout, "")
        with self.assertRaises(OSError):
            fetch(url + "/index.html", 2)

    def test_nothing_outside_is_reached(self):
        # a server on the host's loopback: under --net none the sandbox's
        # 127.0.0.1 is its own, and the relay never connects outward
        host = socket.socket()
        host.bind(("127.0.0.1", 0))
        host.listen(4)
        self.addCleanup(host.close)
        hport = host.getsockname()[1]
        sid = self.create()
        url = self.published(sid)
        relay_port = int(url.rsplit(":", 1)[1])
        probe = ("import socket,sys\n"
                 "for p in sys.argv[1:]:\n"
                 "    s=socket.socket(); s.settimeout(3)\n"
                 "    try: s.connect(('127.0.0.1', int(p))); print('OPEN', p)\n"
                 "    except OSError as e: print('SHUT', p, e.errno)\n")
        r = self.ab("exec", sid, "--", "python3", "-c", probe, str(hport), str(relay_port))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("OPEN", r.stdout)
        self.assertEqual(r.stdout.count("SHUT"), 2, r.stdout)
        # and nothing inside listens on 8000: the owner's connection ends
        with self.assertRaises(OSError):
            fetch(url, 3)

    def test_many_clients_are_bounded(self):
        """100 idle clients: 64 relayed at once, the rest wait in the
        backlog; the relay's fds stay bounded; once they leave, a request
        goes through."""
        sid = self.create()
        self.serve_inside(sid)
        url = self.published(sid)
        self.wait_page(url)
        port = int(url.rsplit(":", 1)[1])
        held = []
        self.addCleanup(lambda: [c.close() for c in held])
        for _ in range(100):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        (relay,) = self.relays(sid)
        if ROOT:
            def fds():
                return len(os.listdir("/proc/%d/fd" % relay))
            self.assertTrue(wait_until(lambda: fds() >= 64 * 6, 10), fds())
            self.assertLessEqual(fds(), 64 * 6 + 16 + 8)
        for c in held:
            c.close()
        held.clear()
        self.wait_page(url)
        self.assertEqual(self.relays(sid), [relay])

    def test_refusals(self):
        sid = self.create()
        cases = [(("port", sid, "0"), "not a port"),
                 (("port", sid, "8000", "--host", "10.1.2.3:80"), "not a loopback address"),
                 (("port", sid, "8000", "--host", "127.0.0.1"), "ADDR:PORT"),
                 (("port", sid, "--public"), "need a PORT"),
                 (("port", sid, "8001", "--close"), "8001 is not published")]
        for args, want in cases:
            r = self.ab(*args)
            self.assertEqual(r.returncode, 125, args)
            self.assertIn(want, r.stderr, args)
        c = Client(os.path.join(self.rt, sid, "sock"))
        self.addCleanup(c.close)
        hello = c.recv()
        self.assertEqual(hello["type"], "hello")
        self.assertIn("ports", hello["features"])
        c.send(op="port", id="a", port="8000")
        m = c.recv()
        self.assertEqual((m["type"], m["id"]), ("error", "a"))
        self.assertIn("integer", m["message"])
        c.send(op="port", id="b", port=8000, what=1)
        self.assertEqual(c.recv()["type"], "error")
        c.send(op="port", id="c", port=8000)
        m = c.recv()
        self.assertEqual((m["type"], m["id"]), ("port", "c"))
        self.assertEqual([p["port"] for p in m["ports"]], [8000])
        self.assertEqual(m["ports"][0]["url"], m["url"])
        self.assertFalse(m["ports"][0]["public"])

    def test_relay_is_confined_and_ends_with_its_sandbox(self):
        r = self.ab("create", "--workspace", self.ws, "--net", "none", "--port", "8000")
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.strip()
        self.made.append(sid)
        self.assertRegex(r.stderr, r"port 8000 at http://127\.0\.0\.1:\d+")
        url = r.stderr.split(" at ")[1].split()[0]
        relays = self.relays(sid)
        self.assertEqual(len(relays), 1)
        pid = relays[0]
        with open("/proc/%d/status" % pid) as f:
            status = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        self.assertEqual(status["CapEff"].strip(), "0" * 16)
        self.assertEqual(status["NoNewPrivs"].strip(), "1")
        self.assertEqual(status["Seccomp"].strip(), "2")
        if ROOT:
            self.assertEqual(status["Uid"].split()[0], "65534")
        if ROOT:  # in the sandbox's network namespace, not the host's
            self.assertNotEqual(os.readlink("/proc/self/ns/net"),
                                os.readlink("/proc/%d/ns/net" % pid))
        else:  # not dumpable: its owner cannot open its namespaces either
            with self.assertRaises(PermissionError):
                os.readlink("/proc/%d/ns/net" % pid)
        r = self.ab("rm", "-f", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_until(lambda: not alive(pid), 10))
        with self.assertRaises(OSError):
            fetch(url, 2)

    def test_a_dead_relay_closes_its_ports_and_says_so(self):
        sid = self.create()
        self.serve_inside(sid)
        url = self.published(sid)
        self.wait_page(url)
        (relay,) = self.relays(sid)
        if ROOT:
            os.kill(relay, signal.SIGKILL)
        else:  # not dumpable, but its own uid's: a signal reaches it
            subprocess.run(["kill", "-9", str(relay)], check=True)
        self.assertTrue(wait_until(lambda: not self.relays(sid), 10))
        with self.assertRaises(OSError):  # the listener died with it
            fetch(url + "/index.html", 3)
        r = self.ab("port", sid)
        self.assertEqual(r.returncode, 125)
        self.assertIn("the port relay had died (signal 9)", r.stderr)
        url = self.published(sid)  # a new relay
        self.wait_page(url)

    def another_user(self, url):
        r = subprocess.run(["runuser", "-u", "tester2", "--", "/usr/bin/python3", "-c", FETCH,
                            url + "/index.html"], capture_output=True, text=True, timeout=60)
        return r.stdout

    @unittest.skipUnless(ROOT and users(), "needs root and the users tester and tester2")
    def test_another_user_is_refused(self):
        sid = self.create()
        self.serve_inside(sid)
        url = self.published(sid)
        self.wait_page(url)
        self.assertIn("REFUSED", self.another_user(url))
        # public: anyone on this host
        r = self.ab("port", sid, "8000", "--close")
        self.assertEqual(r.returncode, 0, r.stderr)
        url = self.published(sid, "--public")
        self.wait_page(url)
        self.assertIn("hello from inside", self.another_user(url))

    def raw(self, port, first, timeout=10):
        """What the relay answers a connection to 127.0.0.1:port that sends
        first, then waits for the end (b"" or "RESET": refused)."""
        got = b""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
                s.sendall(first)
                while True:
                    b = s.recv(65536)
                    if not b:
                        return got
                    got += b
        except (ConnectionResetError, BrokenPipeError):
            return got or "RESET"

    def test_beyond_loopback_only_with_a_token(self):
        sid = self.create()
        self.serve_inside(sid)
        for extra in ((), ("--public",)):
            r = self.ab("port", sid, "8000", "--host", "0.0.0.0:0", *extra)
            self.assertEqual(r.returncode, 125, r.stdout)
            self.assertIn("not a loopback address", r.stderr)
            self.assertIn("token", r.stderr)
        self.assertEqual(self.ab("port", sid).stdout, "")  # nothing was opened
        r = self.ab("port", sid, "8000", "--host", "0.0.0.0:0", "--new-token")
        self.assertEqual(r.returncode, 0, r.stderr)
        url = r.stdout.strip()
        self.assertRegex(url, r"^tcp://0\.0\.0\.0:\d+$")
        token = re.search(r"token ([0-9a-f]{64}) ", r.stderr).group(1)
        port = int(url.rsplit(":", 1)[1])
        get = b"GET /index.html HTTP/1.0\r\n\r\n"

        def page():
            got = self.raw(port, token.encode() + b"\n" + get, 5)
            return isinstance(got, bytes) and b"hello from inside" in got
        self.assertTrue(wait_until(page, 20))
        # the token's line never reaches the server: it answers the GET, 200
        got = self.raw(port, token.encode() + b"\r\n" + get)
        self.assertTrue(got.startswith(b"HTTP/1.0 200"), got)
        # no token, a wrong one, one a byte short: nothing from inside
        for first in (get, b"x" * 64 + b"\n" + get, token[:-1].encode() + b"\n" + get,
                      token.encode() + b"x\n" + get):
            self.assertIn(self.raw(port, first), (b"", "RESET"), first[:80])
        # the token is said once: the list shows only that one is asked
        self.assertEqual(self.ab("port", sid).stdout, "8000 %s\n" % url)
        if ROOT and users():  # the token, not the uid: another user with it gets in
            script = ("import socket,sys\n"
                      "s=socket.create_connection(('127.0.0.1',int(sys.argv[1])),timeout=10)\n"
                      "s.sendall(sys.argv[2].encode()+b'\\nGET /index.html HTTP/1.0\\r\\n\\r\\n')\n"
                      "print(s.recv(65536).decode(errors='replace'))\n")
            r = subprocess.run(["runuser", "-u", "tester2", "--", "/usr/bin/python3", "-c",
                                script, str(port), token], capture_output=True, text=True,
                               timeout=30)
            self.assertIn("200", r.stdout, r.stderr)
        # a token of one's own, from a file
        self.assertEqual(self.ab("port", sid, "8000", "--close").returncode, 0)
        tf = os.path.join(self.ws, "..", "tok-%d" % os.getpid())
        self.addCleanup(lambda: os.path.exists(tf) and os.unlink(tf))
        with open(os.open(tf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("my-own-token-0123456789\n")
        r = self.ab("port", sid, "8000", "--host", "0.0.0.0:0", "--token-file", tf)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("my-own-token", r.stderr + r.stdout)
        port = int(r.stdout.strip().rsplit(":", 1)[1])
        got = self.raw(port, b"my-own-token-0123456789\n" + get)
        self.assertIn(b"hello from inside", got)
        self.assertIn(self.raw(port, get), (b"", "RESET"))
        with open(tf, "w") as f:
            f.write("short\n")
        r = self.ab("port", sid, "8001", "--host", "0.0.0.0:0", "--token-file", tf)
        self.assertEqual(r.returncode, 125)
        self.assertIn("16 to 128", r.stderr)

    def test_a_token_that_does_not_come_is_reset(self):
        sid = self.create()
        r = self.ab("port", sid, "8000", "--host", "0.0.0.0:0", "--new-token")
        self.assertEqual(r.returncode, 0, r.stderr)
        port = int(r.stdout.strip().rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"abc")  # no line end: the relay waits 10 s, then resets
            t0 = time.monotonic()
            try:
                self.assertEqual(s.recv(10), b"")
            except ConnectionResetError:
                pass
            self.assertLess(time.monotonic() - t0, 20)

    def test_ipv6_loopback(self):
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
        except OSError as e:
            self.skipTest("no IPv6 loopback here: %s" % e)
        sid = self.create()
        self.serve_inside(sid)
        r = self.ab("port", sid, "8000", "--host", "[::1]:0")
        self.assertEqual(r.returncode, 0, r.stderr)
        url = r.stdout.strip()
        self.assertRegex(url, r"^http://\[::1\]:\d+$")
        self.wait_page(url)
        if ROOT and users():
            self.assertIn("REFUSED", self.another_user(url))
        r = self.ab("port", sid, "8001", "--host", "[2001:db8::1]:80")
        self.assertEqual(r.returncode, 125)
        self.assertIn("not a loopback address", r.stderr)

    @unittest.skipUnless(ROOT and users(), "needs root and the users tester and tester2")
    def test_plain_users_sandbox(self):
        """A sandbox of tester's: tester reaches its server, tester2 not."""
        rt = tempfile.mkdtemp(prefix="ab-rt-tester-")
        ws = make_dir()
        self.addCleanup(shutil.rmtree, ws, True)
        self.addCleanup(shutil.rmtree, rt, True)
        for d in (rt, ws):
            os.chown(d, pwd.getpwnam("tester").pw_uid, pwd.getpwnam("tester").pw_gid)
        os.chmod(rt, 0o700)
        with open(os.path.join(ws, "index.html"), "w") as f:
            f.write("hello from inside\n")
        os.chown(os.path.join(ws, "index.html"), pwd.getpwnam("tester").pw_uid, -1)
        env = ["env", "AGENTBOX_RUNTIME_DIR=" + rt, "PATH=/usr/bin:/bin"]

        def as_tester(*args):
            return subprocess.run(["runuser", "-u", "tester", "--", *env, any_user_bin(),
                                   *args], capture_output=True, text=True, timeout=60)
        r = as_tester("create", "--workspace", ws, "--net", "none")
        if r.returncode != 0:
            self.skipTest("tester cannot make a sandbox here: " + r.stderr)
        sid = r.stdout.strip()
        self.addCleanup(as_tester, "rm", "-f", sid)
        r = as_tester("exec", sid, "-c", SERVE.format(port=8000))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = as_tester("port", sid, "8000")
        self.assertEqual(r.returncode, 0, r.stderr)
        url = r.stdout.strip()

        def tester_fetch():
            r = subprocess.run(["runuser", "-u", "tester", "--", "/usr/bin/python3", "-c",
                                FETCH, url + "/index.html"], capture_output=True, text=True,
                               timeout=60)
            return "hello from inside" in r.stdout
        self.assertTrue(wait_until(tester_fetch, 20))
        self.assertIn("REFUSED", self.another_user(url))
        # root is another user too
        with self.assertRaises(OSError):
            fetch(url + "/index.html", 3)


if __name__ == "__main__":
    unittest.main()
