"""Network escapes with `--net none` (the default) and through the
`--net allow=` proxy: the host's loopback, its abstract and path-named unix
sockets, any route out, and names, ports and address spellings the proxy's
policy does not allow."""

import os
import shutil
import socket
import tempfile
import threading
import unittest

from harness import HOST, Attacks, both_modes

# connect from inside with python: prints the errno name or CONNECTED
CONNECT = """
import errno, socket, sys
family, addr = sys.argv[1], sys.argv[2]
if family == "inet":
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    host, port = addr.rsplit(":", 1)
    addr = (host, int(port))
else:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if addr.startswith("@"):
        addr = "\\0" + addr[1:]
s.settimeout(5)
try:
    s.connect(addr)
    s.sendall(b"escaped\\n")
    print("CONNECTED", sys.argv[2])
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno), sys.argv[2])
"""


class Listener:
    """A host socket that counts the connections it accepts."""

    def __init__(self, sock):
        self.sock = sock
        self.accepted = []
        sock.listen(8)
        sock.settimeout(0.2)
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted.append(c.recv(64))
            c.close()

    def close(self):
        self.stop.set()
        self.t.join()
        self.sock.close()


class Network(Attacks):
    def listen(self, family, addr):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.bind(addr)
        lst = Listener(s)
        self.addCleanup(lst.close)
        return lst

    def connect(self, *targets):
        script = 'for t in "$@"; do python3 -c "$0" ${t%%=*} ${t#*=}; done'
        return self.sh(script, args=(CONNECT, *targets))

    def test_host_loopback_tcp(self):
        lst = self.listen(socket.AF_INET, ("127.0.0.1", 0))
        port = lst.sock.getsockname()[1]
        r = self.connect("inet=127.0.0.1:%d" % port, "inet=127.0.0.2:%d" % port,
                         "inet=localhost:%d" % port)
        self.assertEqual(lst.accepted, [])
        self.assertNotIn("CONNECTED", r.out, r)
        self.assertEqual(r.out.count("ECONNREFUSED"), 3, r)  # the sandbox's own loopback
        # the listener works: a host client gets through
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"hello\n")
        c.close()
        for _ in range(100):
            if lst.accepted:
                break
            threading.Event().wait(0.05)
        self.assertEqual(lst.accepted, [b"hello\n"])

    def test_host_addresses_and_routes_out(self):
        # the host's own addresses and the outside world are not routable
        addrs = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
        # 127/8 is the sandbox's own loopback (Debian maps the host name to
        # 127.0.1.1): test_host_loopback_tcp covers it
        addrs = {a for a in addrs if not a.startswith("127.")}
        addrs |= {"1.1.1.1", "8.8.8.8", "10.0.0.1", "192.168.1.1"}
        lst = self.listen(socket.AF_INET, ("0.0.0.0", 0))
        port = lst.sock.getsockname()[1]
        r = self.connect(*["inet=%s:%d" % (a, port) for a in sorted(addrs)])
        self.assertNotIn("CONNECTED", r.out, r)
        self.assertEqual(r.out.count("ENETUNREACH"), len(addrs), r)
        self.assertEqual(lst.accepted, [])
        r = self.sh("tail -n +3 /proc/net/dev | cut -d: -f1; "
                    "echo net=$(stat -L -c %i /proc/self/ns/net)")
        ifaces = [line.strip() for line in r.out.splitlines() if not line.startswith("net=")]
        self.assertEqual(ifaces, ["lo"], r)
        self.assertNotIn("net=%d\n" % HOST["net"], r.out, r)

    def test_host_abstract_unix_socket(self):
        name = "agentbox-sec-" + os.urandom(6).hex()
        lst = self.listen(socket.AF_UNIX, "\0" + name)
        r = self.connect("unix=@" + name)
        self.assertEqual(lst.accepted, [])
        self.assertEqual(r.out, "ECONNREFUSED @%s\n" % name, r)
        c = socket.socket(socket.AF_UNIX)
        c.connect("\0" + name)  # the host can: the socket is there
        c.close()

    def test_host_unix_sockets_by_path(self):
        d = tempfile.mkdtemp(prefix="agentbox-sec-sock-")
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        path = os.path.join(d, "agent.sock")
        lst = self.listen(socket.AF_UNIX, path)
        os.chmod(path, 0o777)
        daemons = ["/run/dbus/system_bus_socket", "/var/run/docker.sock", "/run/docker.sock",
                   "/run/systemd/private", "/run/systemd/journal/stdout",
                   "/var/run/nscd/socket", "/run/user/%d/bus" % os.getuid()]
        r = self.connect("unix=" + path, *["unix=" + p for p in daemons])
        self.assertEqual(lst.accepted, [])
        self.assertNotIn("CONNECTED", r.out, r)
        self.assertEqual(r.out.count("ENOENT"), 1 + len(daemons), r)
        r = self.sh("ls -d /run /var /tmp/.X11-unix 2>&1; true")
        self.assertEqual(r.out.count("No such file or directory"), 3, r)


both_modes(globals(), Network)

if __name__ == "__main__":
    unittest.main()


# one request to the --net allow= proxy from inside: prints the first line
# of its HTTP reply, or the errno name when the proxy cannot be reached
PROXY_REQUEST = """
import errno, socket, sys
try:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(sys.argv[1].encode().decode("unicode_escape").encode("latin-1"))
    print(s.recv(4096).split(b"\\r\\n")[0].decode())
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
"""


class ProxyNetwork(Attacks):
    """With --net allow=, the proxy is the only way out: the names, ports
    and addresses it is not told to allow stay out of reach, however they
    are spelled."""

    def setUp(self):
        super().setUp()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        self.allowed = Listener(s)
        self.addCleanup(self.allowed.close)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        self.other = Listener(s)
        self.addCleanup(self.other.close)
        self.a = self.allowed.sock.getsockname()[1]
        self.b = self.other.sock.getsockname()[1]

    def ask(self, allow, *requests):
        script = 'for r in "$@"; do python3 -c "$0" "$r"; done'
        r = self.sh(script, options=("--net", "allow=" + allow), args=(PROXY_REQUEST, *requests))
        return r.out.splitlines()

    def test_names_that_resolve_to_loopback(self):
        # DNS rebinding's goal: an allowed name pointing at the host itself
        out = self.ask("localhost:%d,*:%d" % (self.a, self.b),
                       "CONNECT localhost:%d HTTP/1.1\\r\\n\\r\\n" % self.a,
                       "CONNECT 0x7f.1:%d HTTP/1.1\\r\\n\\r\\n" % self.b,
                       "CONNECT 2130706433:%d HTTP/1.1\\r\\n\\r\\n" % self.b)
        self.assertEqual(out, ["HTTP/1.1 403 Forbidden"] * 2 + ["HTTP/1.1 400 Bad Request"])
        self.assertEqual((self.allowed.accepted, self.other.accepted), ([], []))

    def test_ports_and_address_spellings_not_allowed(self):
        a, b = self.a, self.b
        out = self.ask("127.0.0.1:%d" % a,
                       "CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n" % b,
                       "CONNECT 127.0.0.2:%d HTTP/1.1\\r\\n\\r\\n" % a,
                       "CONNECT [::1]:%d HTTP/1.1\\r\\n\\r\\n" % a,
                       "CONNECT [::ffff:127.0.0.1]:%d HTTP/1.1\\r\\n\\r\\n" % b,
                       "CONNECT [64:ff9b::7f00:1]:%d HTTP/1.1\\r\\n\\r\\n" % a,
                       "CONNECT [2002:7f00:1::]:%d HTTP/1.1\\r\\n\\r\\n" % a,
                       "CONNECT 0.0.0.0:%d HTTP/1.1\\r\\n\\r\\n" % a,
                       "GET http://127.0.0.1:%d@127.0.0.1:%d/ HTTP/1.1\\r\\n\\r\\n" % (a, b),
                       "GET http://127.0.0.1:%d/ HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n"
                       % (b, a))
        self.assertEqual(out, ["HTTP/1.1 403 Forbidden"] * 7 + ["HTTP/1.1 400 Bad Request",
                                                                "HTTP/1.1 403 Forbidden"])
        self.assertEqual((self.allowed.accepted, self.other.accepted), ([], []))
        # the allowed one is reachable, so the refusals above are the policy's
        out = self.ask("127.0.0.1:%d" % a, "CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n" % a)
        self.assertEqual(out, ["HTTP/1.1 200 Connection established"])

    def test_around_the_proxy(self):
        # direct connections, the host's abstract sockets: the proxy changes nothing
        name = "agentbox-sec-" + os.urandom(6).hex()
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        u.bind("\0" + name)
        abstract = Listener(u)
        self.addCleanup(abstract.close)
        r = self.sh('for t in "$@"; do python3 -c "$0" ${t%%=*} ${t#*=}; done',
                    options=("--net", "allow=127.0.0.1:%d" % self.a),
                    args=(CONNECT, "inet=127.0.0.1:%d" % self.a, "unix=@" + name,
                          "inet=10.0.0.1:%d" % self.a))
        self.assertEqual(r.out, "ECONNREFUSED 127.0.0.1:%d\nECONNREFUSED @%s\n"
                                "ENETUNREACH 10.0.0.1:%d\n" % (self.a, name, self.a), r)
        self.assertEqual((self.allowed.accepted, abstract.accepted), ([], []))


both_modes(globals(), ProxyNetwork)
