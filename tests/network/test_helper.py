"""The network helper (src/net/netproc.h, docs/security.md): --net allow='s
proxy runs in a child of the launcher with no capability, no_new_privs, a
seccomp filter and no fd but its own, and the upstream connection of a
TLS-terminated request (--net secret=) is the helper's, not the launcher's.
When the helper dies mid-request (SIGSEGV, SIGKILL), the session answers,
the sandbox's network is closed (connections refused, not hung) and the
reason is in the results and on stderr. HTTPS servers on the host's
127.0.0.1 with a test CA made here. Runs as root and as an unprivileged
user; AGENTBOX_BIN names the binary."""

import http.server
import os
import signal
import ssl
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "protocol"))
sys.path.insert(0, HERE)
from test_fileops import Server, end_server  # noqa: E402
from test_secrets import WithCA  # noqa: E402

MUST_WORK = os.environ.get("AGENTBOX_MUST_WORK") == "1"
# ASan catches a SIGSEGV, reports it and exits 1
SANITIZED = os.environ.get("AGENTBOX_SANITIZED") == "1"
THROUGH = {"no_proxy": "", "NO_PROXY": ""}
VALUE = "helper-Secret-0c1d-value"


class _Hold(http.server.BaseHTTPRequestHandler):
    """GET /hold answers only once the test releases it: the request is in
    flight, its upstream connection open, until then."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.startswith("/hold"):
            self.server.held.append(self.client_address[1])
            self.server.release.wait(30)
        out = b"ok\n"
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        except OSError:  # the helper died with the connection
            self.close_connection = True


class HoldServer:
    def __init__(self, d):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hold)
        self.httpd.daemon_threads = True
        self.httpd.held = []
        self.httpd.release = threading.Event()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(d, "testca-srv.pem"), os.path.join(d, "testca-srv.key"))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.t = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.httpd.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.t.join()


def read(path):
    with open(path) as f:
        return f.read()


def socket_inode(local_port, remote_port):
    """The inode of the host's TCP socket from local_port to remote_port."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = read(table).splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == local_port and \
                    int(f[2].rsplit(":", 1)[1], 16) == remote_port:
                return f[9]
    return None


def holders(inode):
    """The pids with an fd on socket:[inode]."""
    want, found = "socket:[%s]" % inode, []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == want:
                    found.append(int(pid))
                    break
            except OSError:
                pass
    return found


def status(pid):
    out = {}
    for line in read("/proc/%d/status" % pid).splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


class Helper(WithCA):
    def setUp(self):
        super().setUp()
        self.srv = HoldServer(self.d)
        self.addCleanup(self.srv.close)

    def serve(self):
        env = dict(os.environ, TOKEN=VALUE)
        try:
            sv = Server(self.ws, "--net", "secret=TOKEN@127.0.0.1:%d" % self.srv.port,
                        "--net", "ca=" + self.ca, env=env)
        except AssertionError as e:
            if MUST_WORK:
                raise
            self.skipTest("agentbox cannot run here: %s" % e)
        self.addCleanup(sv.close)
        return sv

    def curl(self, path):
        return ("curl -sS -m 20 -H \"Authorization: Bearer $TOKEN\" "
                "https://127.0.0.1:%d/%s" % (self.srv.port, path))

    def in_flight(self, sv):
        """Start a command whose request to the secret's host is held; the
        request's id and the pid holding its upstream connection."""
        rid = sv.send(op="exec", command=self.curl("hold"), env=THROUGH, timeout=60)
        deadline = time.monotonic() + 30
        while not self.srv.httpd.held and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(self.srv.httpd.held, "the request never reached the server")
        inode = socket_inode(self.srv.httpd.held[0], self.srv.port)
        self.assertIsNotNone(inode, "no upstream socket on the host")
        pids = holders(inode)
        self.assertEqual(len(pids), 1, pids)
        return rid, pids[0]

    def result(self, sv, rid):
        while True:
            m = sv.recv()
            if m.get("id") == rid and m["type"] != "output":
                return m

    def test_the_upstream_connection_is_held_by_a_confined_helper(self):
        sv = self.serve()
        rid, holder = self.in_flight(sv)
        launcher = sv.p.pid
        self.assertNotEqual(holder, launcher, "the launcher holds the upstream connection")
        st = status(holder)
        self.assertEqual(int(st["PPid"]), launcher, "the holder is not the launcher's helper")
        for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
            self.assertEqual(int(st[cap], 16), 0, "%s %s" % (cap, st[cap]))
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")
        if os.geteuid() == 0:
            self.assertNotIn("0", st["Uid"].split(), "the helper runs as root")
        # no fd but its own: its sockets, epoll, timers and /dev/null
        for fd in os.listdir("/proc/%d/fd" % holder):
            target = os.readlink("/proc/%d/fd/%s" % (holder, fd))
            self.assertTrue(target.startswith(("socket:", "anon_inode:", "/dev/null")),
                            "the helper holds fd %s: %s" % (fd, target))
        # the launcher maps no OpenSSL; the helper does
        self.assertNotIn("libssl", read("/proc/%d/maps" % launcher))
        self.assertIn("libssl", read("/proc/%d/maps" % holder))
        self.srv.httpd.release.set()
        r = self.result(sv, rid)
        self.assertEqual(r["stdout"], "ok\n", r)
        self.assertNotIn("error", r["network"], r)

    def helper_dies(self, sig):
        sv = self.serve()
        rid, helper = self.in_flight(sv)
        os.kill(helper, sig)
        r = self.result(sv, rid)
        why = "network helper died (signal %d)" % sig
        if SANITIZED and sig == signal.SIGSEGV and r["network"].get("error") != why:
            # ASan's handler may catch it and exit 1 (as root it does; as a
            # plain user it was seen to die of the signal itself)
            why = "network helper died (exit status 1)"
        self.assertNotEqual(r["exit_code"], 0, r)
        self.assertEqual(r["network"].get("error"), why, r)
        self.srv.httpd.release.set()
        # the session answers; its network is closed: refused, not hung
        t = time.monotonic()
        r = sv.call(op="exec", command=self.curl("again") + "; echo exit=$?", env=THROUGH,
                    timeout=60)
        self.assertLess(time.monotonic() - t, 15, r)
        self.assertIn("exit=7", r["stdout"], r)  # curl: could not connect
        self.assertEqual(r["network"].get("error"), why, r)
        self.assertEqual(sv.call(op="exec", command="echo alive")["stdout"], "alive\n")
        # {"op":"net"} says so too, and cannot change what is gone
        self.assertEqual(sv.call(op="net")["network"].get("error"), why)
        r = sv.call(op="net", allow=["127.0.0.1"])
        self.assertEqual(r["type"], "error", r)
        self.assertIn(why, r["message"])
        end_server(sv.p)
        self.assertIn("agentbox: " + why, sv.p.stderr.read().decode())

    def test_a_helper_that_crashes_closes_the_network(self):
        self.helper_dies(signal.SIGSEGV)

    def test_a_helper_that_is_killed_closes_the_network(self):
        self.helper_dies(signal.SIGKILL)


if __name__ == "__main__":
    unittest.main()
