"""One `agentbox runtime` on a loopback port of its own, for the tests of
tests/runtime. AGENTBOX_BIN names the binary."""

import os
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
    """`agentbox runtime --workspace WS` on 127.0.0.1; stderr collected."""

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

    def request(self, method, path, body=None, headers=None, timeout=None):
        """(status, headers, body bytes) of one request; never raises on a
        status."""
        timeout = timeout or TIMEOUT
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers or {})
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
