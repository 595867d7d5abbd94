"""Local servers for the network tests: an HTTP file server on the host's
127.0.0.1 (never any other address) that records each request's Host
header, and a TCP listener that counts what reaches it."""

import functools
import http.server
import os
import socket
import threading


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        self.server.hosts.append(self.headers.get("Host"))
        super().do_GET()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        self.server.hosts.append(self.headers.get("Host"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HttpServer:
    """Serves directory root on 127.0.0.1:<ephemeral port>."""

    def __init__(self, root):
        handler = functools.partial(_Handler, directory=root)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.hosts = []
        self.port = self.httpd.server_address[1]
        self.t = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.t.start()

    @property
    def hosts(self):
        return self.httpd.hosts

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.t.join()


class Counter:
    """A TCP listener on 127.0.0.1 that counts connections and closes them."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _loop(self):
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.count += 1
            c.close()

    def close(self):
        self.stop.set()
        self.t.join()
        self.sock.close()


def free_port():
    """A loopback port nothing listens on (bound and released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def make_wheel(dest, name="agentbox_netdemo", version="0.1"):
    """A minimal pure-Python wheel of module name, built by hand (no
    setuptools run, nothing from the network). Returns its file name."""
    import base64
    import hashlib
    import zipfile
    dist = "%s-%s.dist-info" % (name, version)
    files = {
        "%s.py" % name: "VALUE = 'from the local index'\n",
        dist + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
        dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: agentbox-test\n"
                         "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
        record.append("%s,sha256=%s,%d" % (path, digest.rstrip(b"=").decode(), len(text)))
    record.append(dist + "/RECORD,,")
    files[dist + "/RECORD"] = "\n".join(record) + "\n"
    fname = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(dest, fname), "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return fname


def make_index(root, name="agentbox_netdemo"):
    """A PEP 503 simple index under root/simple with one wheel."""
    proj = name.replace("_", "-")
    d = os.path.join(root, "simple", proj)
    os.makedirs(d)
    fname = make_wheel(d, name)
    with open(os.path.join(d, "index.html"), "w") as f:
        f.write('<html><body><a href="%s">%s</a></body></html>\n' % (fname, fname))
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write('<html><body><a href="%s/">%s</a></body></html>\n' % (proj, proj))
    return proj
