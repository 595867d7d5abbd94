"""One `agentbox runtime` on a loopback port of its own, for the tests of
tests/runtime. AGENTBOX_BIN names the binary. Its token is the one it made
and named on stderr (or --token-file's), which request() sends."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

BIN = os.environ.get("AGENTBOX_BIN", "agentbox")
# a request's bound: longer for a sanitizer build, several times slower
TIMEOUT = 120 if os.environ.get("AGENTBOX_SANITIZED") == "1" else 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Runtime:
    """`agentbox runtime --workspace WS` on 127.0.0.1; stderr collected.
    token: the token it asks for (None with --no-auth); token_file: the
    file it named on stderr."""

    def __init__(self, *extra, env=None, ws=None):
        self.ws = ws or tempfile.mkdtemp(prefix="agentbox-rt-")
        self.own_ws = ws is None
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        args = [BIN, "runtime", "--workspace", self.ws, "--http-port", str(self.port), *extra]
        self.p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, env=env)
        self.err = []
        ready = threading.Event()

        def read():
            for line in self.p.stderr:
                self.err.append(line.decode(errors="replace"))
                if b"listening on" in line:
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not ready.wait(30) or self.p.poll() is not None:
            self.close()
            raise AssertionError("agentbox runtime did not start: " + "".join(self.err))
        self.token = self.token_file = None
        m = re.search(r"token in (\S+) \(send it", "".join(self.err))
        if m:
            self.token_file = m.group(1)
        if "--token-file" in extra:
            with open(extra[extra.index("--token-file") + 1]) as f:
                self.token = f.read().strip()
        elif self.token_file:
            with open(self.token_file) as f:
                self.token = f.read().strip()

    def auth_header(self):
        """The Authorization line a raw request sends (b"" without a token)."""
        return b"Authorization: Bearer %s\r\n" % self.token.encode() if self.token else b""

    def request(self, method, path, body=None, headers=None, timeout=None, auth=True):
        """(status, headers, body bytes) of one request, with the token
        (unless auth is False or headers has an Authorization) and, for a
        body to a JSON route, Content-Type: application/json unless headers
        says another; never raises on a status."""
        timeout = timeout or TIMEOUT
        headers = dict(headers or {})
        names = {k.lower() for k in headers}
        if auth and self.token and "authorization" not in names:
            headers["Authorization"] = "Bearer " + self.token
        if body is not None and "content-type" not in names and (
                path == "/execute" or path.startswith("/agentbox/")):
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        return self.p.wait(timeout)

    def close(self):
        if self.p.poll() is None:  # SIGTERM: it removes its sandbox's cgroups
            self.p.terminate()
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
        self.p.wait(30)
        self.reader.join(10)
        self.p.stderr.close()
        # a runtime ended by SIGKILL (a test's) could not remove its token file
        if self.token_file:
            try:
                os.unlink(self.token_file)
            except FileNotFoundError:
                pass
        if self.own_ws:
            shutil.rmtree(self.ws, ignore_errors=True)
        text = "".join(self.err)
        if "Sanitizer" in text or "runtime error:" in text:  # a sanitizer build's report
            raise AssertionError("agentbox runtime: " + text)


def multipart(filename, data, field="file"):
    """(body, content type) of a form with one file part."""
    b = "agentbox-test-boundary"
    body = (("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n") % (b, field, filename)).encode()
    body += data + ("\r\n--%s--\r\n" % b).encode()
    return body, "multipart/form-data; boundary=" + b


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for tid in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    kids = [int(k) for k in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


def wait_for(pred, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()
