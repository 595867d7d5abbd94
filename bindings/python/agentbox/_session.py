"""The transport of agentbox.Sandbox: one `agentbox serve` process, spoken
to in agentbox/1 (docs/protocol.md) from any number of threads, where no
call can wait forever: every pending call fails when the server ends or
answers something that cannot be put down to a request.

There is no reader thread: a caller waiting for its reply reads the
server's output itself while no other caller does (it holds the reading
turn), and hands every other reply to its caller. A reply so reaches its
caller without a wake-up of a second thread on its way (docs/performance.md,
"Session round trip"). So two others read when they must: a caller writing
a request while the server's stdin is full (the server stops reading it
while its replies pile up unread), and close(), to the output's end (the
server's last writes would block on it)."""

import base64
import collections
import itertools
import json
import os
import random
import select
import subprocess
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence

PROTOCOL = "agentbox/1"
# a read: larger buffers come from mmap each time (some 15 µs a read, on a
# reply that took 1 ms in all); a large reply takes a few more reads
READ_SIZE = 64 << 10
CLOSE_WAIT = 15.0  # seconds close() gives the server to end before it is killed
SHUTDOWN = b'{"op":"shutdown","id":"close"}\n'
RESUME_WAIT = 10.0  # seconds a lost detached connection is tried again while "busy"

# error codes that say what was wrong with a file: returned as values, as
# agent frameworks expect, never raised
FILE_ERRORS = frozenset({
    "file_not_found", "permission_denied", "is_directory", "not_directory", "invalid_path",
    "read_only", "too_large", "exists", "not_found", "not_unique", "no_space", "io_error",
    "timeout", "cancelled",
})


class SandboxError(Exception):
    """agentbox could not do what was asked."""


class ProtocolError(SandboxError):
    """The server refused a request; code is the protocol's error code
    (invalid_request, busy, too_large, ...)."""

    def __init__(self, code: str, message: str):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


class SandboxClosed(SandboxError):
    """The sandbox is gone: closed, or its server died or was killed."""


FILE_OPS = frozenset({"read", "write", "edit", "ls", "glob", "grep", "delete", "upload",
                      "download"})


class _Call:
    __slots__ = ("done", "reply", "failure", "op", "output", "rid", "offsets", "dropped",
                 "resume")

    def __init__(self, op: str):
        self.op = op
        # an exec with "stream": its output chunks (bytes) as they come
        self.output: Optional[collections.deque] = None
        # where each of its streams stands (the offset after the last byte
        # handed out), to go on from after a lost connection; None: not kept
        self.offsets: Optional[Dict[str, int]] = None
        self.dropped: List[Dict[str, Any]] = []  # output_dropped messages
        self.resume: Optional["_Call"] = None  # an output op's: the call it resumes
        self.rid = 0  # the id send() chose
        self.done = threading.Event()
        self.reply = None  # the result or error message
        self.failure: Optional[Exception] = None  # raised instead of a reply


def _place(call: _Call, msg: Dict[str, Any], data: bytes) -> bytes:
    """Of a chunk at msg's offset, what call has not had yet (a chunk a
    detached sandbox sends again after a lost connection)."""
    off = msg.get("offset")
    if call.offsets is None or not isinstance(off, int):
        return data
    stream = msg.get("stream", "stdout")
    have = call.offsets.get(stream, 0)
    if off + len(data) <= have:
        return b""
    if off < have:
        data, off = data[have - off:], have
    call.offsets[stream] = off + len(data)
    return data


class Session:
    """The server process, its hello, and the requests waiting for replies."""

    def __init__(self, args: Sequence[str], detached: bool = False):
        # detached: args bridge to a sandbox that outlives this client
        # (agentbox connect): closing disconnects, and the ids start at a
        # random base, apart from those of earlier clients whose results
        # the server may replay after the hello (self.replayed)
        self.detached = detached
        self.replayed: List[Dict[str, Any]] = []
        self._lock = threading.Lock()  # _calls, _closed and _reading
        # a waiting caller reads while no other one does (_pump); the others
        # wait here for their reply or for their turn to read
        self._turn = threading.Condition(self._lock)
        self._reading = False
        # the server's output read but not yet handed out, and how far a
        # search for the end of its first line has got (only the caller
        # holding the reading turn touches them): bytes read before an
        # interrupt stay here for the next reader
        self._buf = bytearray()
        self._scanned = 0
        # writes to stdin, one line at a time; _unsent is the rest of a
        # line whose write was interrupted, sent before the next one
        self._wlock = threading.Lock()
        self._unsent: Optional[memoryview] = None
        self._calls: Dict[int, _Call] = {}
        self._lost: set = set()  # ids of calls failed by _resume: their replies are replayed
        self._first_id = random.randrange(1 << 40, 1 << 52) if detached else 1
        self._ids = itertools.count(self._first_id)
        self._closed: Optional[str] = None
        self._stderr = collections.deque(maxlen=20)
        self._args = list(args)
        self._start()

    def _start(self):
        """The server (or the bridge to a detached one) started, its hello read."""
        args = self._args
        try:
            self._proc = subprocess.Popen(list(args), stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          close_fds=True)
        except OSError as e:
            raise SandboxError("cannot start %s: %s" % (args[0], e)) from e
        # the pipes' fds, -1 once closed; only read and written by os.read
        # and os.write, never through the Popen's buffered files
        self._in = self._proc.stdin.fileno()
        self._out = self._proc.stdout.fileno()
        os.set_blocking(self._in, False)  # _write: a full pipe must not block a writer
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        first = self._first_line()
        try:
            hello = json.loads(first) if first else None
        except ValueError:
            hello = None
        if isinstance(hello, dict) and hello.get("type") == "error":
            self._proc.kill()
            self._proc.wait()
            self._release()
            self._closed = "the sandbox refused the connection"
            raise SandboxError("%s: %s" % (hello.get("code"), hello.get("message")))
        if not isinstance(hello, dict) or hello.get("type") != "hello":
            self._proc.kill()
            self._proc.wait()
            self._release()
            self._closed = "agentbox serve did not start"
            raise SandboxError("agentbox serve did not start (exit status %s): %s" % (
                self._proc.returncode, self._stderr_text() or "no message"))
        if hello.get("protocol") != PROTOCOL:
            self._proc.kill()
            self._proc.wait()
            self._release()
            raise SandboxError("agentbox speaks %r, this client %r" % (hello.get("protocol"),
                                                                      PROTOCOL))
        self.hello: Dict[str, Any] = hello
        self.max_line = int(hello.get("max_line", 8 << 20))
        self.features = frozenset(hello.get("features") or ())
        self.max_chunk = int(hello["max_chunk"]) if "file_chunks" in self.features else 0

    # ---- the server's output ----

    def _release(self):
        """The server has exited: close our ends of its pipes."""
        self._in = self._out = -1  # an os.read or os.write still to come fails, on no other fd
        t = self._stderr_reader
        if t.is_alive() and t is not threading.current_thread():
            t.join(5)
        for f in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            try:
                f.close()
            except (OSError, ValueError):
                pass

    def _stderr_text(self) -> str:
        return " / ".join(self._stderr)

    def _read_stderr(self):
        for line in self._proc.stderr:
            self._stderr.append(line.decode("utf-8", "replace").rstrip("\n"))

    def _fill(self) -> bool:
        """Read what the server has written, waiting for it unless it is
        there; False at the end of its output. Interrupted while it waits,
        it loses nothing: what was read before stays in the buffer."""
        try:
            chunk = os.read(self._out, READ_SIZE)
        except OSError:  # closed by close()
            return False
        self._buf += chunk
        return bool(chunk)

    def _line_end(self) -> int:
        """Where the buffer's first line ends, or -1 when it has no whole
        line; the next search goes on where this one stopped, so a long
        line read in many pieces is searched once."""
        i = self._buf.find(b"\n", self._scanned)
        if i < 0:
            self._scanned = len(self._buf)
        return i

    def _first_line(self) -> bytes:
        while True:
            i = self._line_end()
            if i >= 0:
                line = bytes(self._buf[:i])
                del self._buf[:i + 1]
                self._scanned = 0
                return line
            if not self._fill():
                return b""

    def _dispatch(self, call: Optional[_Call] = None, until=None):
        """Hand each whole line in the buffer to its call, until call (if
        any) is answered (or until() says so). A line leaves the buffer after it is handled: an
        interrupt in between has it handled again, and a second reply to a
        call is dropped, where a lost one would leave its caller waiting."""
        while (call is None or not call.done.is_set()) and not (until and until()):
            i = self._line_end()
            if i < 0:
                return
            self._handle(self._buf[:i])
            del self._buf[:i + 1]
            self._scanned = 0

    def _handle(self, line: bytes):
        """One line of the server's output: a reply goes to its call."""
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            self._out_of_step(ProtocolError(
                "internal", "the server wrote a line that is not a JSON object: %r"
                % bytes(line[:200])))
            return
        rid = msg.get("id")
        if msg.get("type") == "event":
            with self._lock:  # a watch's file event (Watch), else dropped
                call = self._calls.get(rid) if isinstance(rid, int) else None
                if call is not None and call.output is not None:
                    call.output.append(msg)
                    self._turn.notify_all()
            return
        if msg.get("type") in ("output", "output_dropped"):
            with self._lock:  # to a streaming call (Process), else dropped
                call = self._calls.get(rid) if isinstance(rid, int) else None
                if call is not None and call.output is not None:
                    if msg["type"] == "output_dropped":
                        # said of bytes the sandbox no longer keeps, which an
                        # earlier connection of this call may have had
                        have = (call.offsets or {}).get(msg.get("stream", "stdout"), 0)
                        end = msg.get("end")
                        if not (isinstance(end, int) and end <= have):
                            call.dropped.append(msg)
                        return
                    data = msg.get("data") or ""
                    data = _place(call, msg, base64.b64decode(data)
                                  if msg.get("encoding") == "base64"
                                  else data.encode("utf-8", "surrogatepass"))
                    if data:
                        call.output.append(data)
                        self._turn.notify_all()
            return
        if rid is None and msg.get("type") == "error":
            self._unattributed(msg)
            return
        with self._lock:
            call = self._calls.pop(rid, None) if isinstance(rid, int) else None
            if call:  # a reply to a call failed already is dropped
                call.reply = msg
                call.done.set()
                gone = call.resume
                if gone is not None and msg.get("type") == "error" and not gone.done.is_set():
                    # its result was not replayed (it would have come first): the
                    # sandbox never got the request, or lost it
                    self._calls.pop(gone.rid, None)
                    gone.failure = SandboxClosed(
                        "the connection to the sandbox was lost and it does not know "
                        "request %d: %s" % (gone.rid, msg.get("message")))
                    gone.done.set()
                self._turn.notify_all()
            elif self.detached and (rid in self._lost or not (
                    isinstance(rid, int) and self._first_id <= rid < self._first_id + (1 << 32))):
                self.replayed.append(msg)  # an earlier client's, or one _resume failed

    def _take_turn(self, call: Optional[_Call] = None, timeout: Optional[float] = None) -> bool:
        """The reading turn, once no other caller holds it; False when call
        was answered (or timeout passed) meanwhile."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._reading and not (call and call.done.is_set()):
                if not self._turn.wait(None if end is None else max(0, end - time.monotonic())):
                    return False
            if call and call.done.is_set():
                return False
            self._reading = True
            return True

    def _leave_turn(self):
        with self._lock:
            self._reading = False
            self._turn.notify_all()

    def _pump(self, call: _Call):
        """Until call is answered: read the server's output in this thread
        while no other caller does, else wait for the reader to answer
        call or to leave the reading to us."""
        if not self._take_turn(call):
            return
        try:
            while True:
                self._dispatch(call)
                if call.done.is_set():
                    break
                if not self._fill():
                    if self._ended():
                        continue
                    break
        finally:
            self._leave_turn()

    def pump_until(self, call: _Call, until, timeout: Optional[float]) -> None:
        """Read the server's output until until() holds, call is answered
        or timeout (None: no limit) has passed; another caller's reading
        counts, as its lines are handed out the same way."""
        end = None if timeout is None else time.monotonic() + timeout
        while not call.done.is_set() and not until():
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return
            # another caller may be reading: it hands our lines out too,
            # so until() is looked at again every 50 ms meanwhile
            if not self._take_turn(call, 0.05 if left is None else min(left, 0.05)):
                continue
            try:
                self._dispatch(call, until)
                if call.done.is_set() or until():
                    return
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return
                if not select.select([self._out], [], [], left)[0]:
                    return
                if not self._fill():
                    if not self._ended():
                        return
            finally:
                self._leave_turn()

    def _ended(self) -> bool:
        """The server's output is at its end: it has exited (or is about
        to). Every pending call fails, saying how it ended; unless this is
        a detached sandbox's bridge, lost while streaming calls wait: then
        they go on through a new one (True)."""
        if self._resume():
            return True
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._fail_all(SandboxClosed("the agentbox server ended (exit status %s)%s" % (
            self._proc.returncode, ": " + self._stderr_text() if self._stderr else "")))
        return False

    def _resume(self) -> bool:
        """The bridge to a detached sandbox ended with no close() asked (it
        was killed, its network dropped) while streaming calls wait: connect
        again. The sandbox replays after the hello what it kept of their
        output and results of any that ended; each call then asks for its
        output from where it got to (op output) and places what comes by
        offset, so nothing is lost or doubled (docs/detached.md). Calls
        that do not stream fail: whether their request reached the sandbox
        cannot be told. False when there is nothing to resume or it cannot."""
        with self._lock:
            if not self.detached or self._closed is not None or \
                    "output_offsets" not in self.features:
                return False
            going = {rid: c for rid, c in self._calls.items() if c.offsets is not None}
        if not going:
            return False
        try:
            self._proc.kill()
            self._proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._release()
        self._buf, self._scanned, self._unsent = bytearray(), 0, None
        end = time.monotonic() + RESUME_WAIT
        while True:
            try:
                self._start()
                break
            except SandboxError as e:
                # the sandbox may not have seen the old client go yet: busy
                if "busy" not in str(e) or time.monotonic() > end:
                    self._stderr.append("reconnecting: %s" % e)
                    return False
                self._closed = None  # _start took it as the end
                time.sleep(0.05)
        lost = SandboxClosed("the connection to the sandbox was lost; request sent before "
                             "may or may not have run")
        with self._lock:
            for rid in [r for r in self._calls if r not in going]:
                self._lost.add(rid)
                c = self._calls.pop(rid)
                c.failure = lost
                c.done.set()
            self._turn.notify_all()
        for rid, c in going.items():
            ask = _Call("output")
            ask.resume = c
            try:
                self.send({"op": "output", "target": rid, "offsets": dict(c.offsets)}, call=ask)
            except SandboxError:
                return True  # the new bridge ended too: the next read says so
        return True

    def _unattributed(self, msg: Dict[str, Any]):
        """An error with id null. This client never sends a line without
        a valid id, so the stream is out of step (or the sandbox died):
        every pending call fails now instead of waiting for a reply that
        may never come."""
        code, text = msg.get("code", "internal"), msg.get("message", "")
        if code == "internal":
            self._stderr.append(text)
        self._out_of_step(ProtocolError(
            code, "%s (an error the server could not put down to a request: every call "
            "waiting for a reply fails)" % text))

    def _out_of_step(self, failure: Exception):
        with self._lock:
            calls, self._calls = self._calls, {}
            for call in calls.values():
                call.failure = failure
                call.done.set()
            self._turn.notify_all()

    def _fail_all(self, failure: SandboxClosed):
        with self._lock:
            if self._closed is None:
                self._closed = str(failure)
            calls, self._calls = self._calls, {}
            for call in calls.values():
                call.failure = SandboxClosed(self._closed)
                call.done.set()
            self._turn.notify_all()

    # ---- the server's input ----

    def _write(self, line: bytes, deadline: Optional[float] = None):
        """line on the server's stdin, whole, after the rest of a line an
        interrupt stopped. OSError when the server is gone, TimeoutError
        (an OSError) past deadline (time.monotonic())."""
        if not self._wlock.acquire(timeout=-1 if deadline is None
                                   else max(0, deadline - time.monotonic())):
            raise TimeoutError("the server's stdin is busy")
        try:
            rest, self._unsent = self._unsent, None
            if rest is not None:
                self._write_all(rest, deadline, True)
            self._write_all(memoryview(line), deadline, False)
        finally:
            self._wlock.release()

    def _write_all(self, view: memoryview, deadline: Optional[float], started: bool):
        total = len(view)
        try:
            while view:
                if self._in < 0:
                    raise BrokenPipeError("the server's stdin is closed")
                try:
                    view = view[os.write(self._in, view):]
                except BlockingIOError:
                    self._await_room(deadline)
        except BaseException:
            if started or len(view) < total:
                self._unsent = view  # the line goes on with the next write
            raise

    def _await_room(self, deadline: Optional[float]):
        """Wait until the server's stdin has room. A server with too many
        replies unread stops reading its stdin, so unless another caller
        reads them, read them here meanwhile and hand them out."""
        mine = self._take_turn(timeout=0)
        try:
            poll = select.poll()
            poll.register(self._in, select.POLLOUT)
            wait = None  # ms; a reader may leave its turn to nobody: look again soon
            if mine:
                poll.register(self._out, select.POLLIN)
            else:
                wait = 50
            if deadline is not None:
                left = int((deadline - time.monotonic()) * 1000)
                if left <= 0:
                    raise TimeoutError("the server does not read its stdin")
                wait = left if wait is None else min(wait, left)
            for fd, _ in poll.poll(wait):
                if fd == self._out and mine:
                    if not self._fill():
                        self._ended()
                        raise BrokenPipeError("the server's output ended")
                    self._dispatch()
        finally:
            if mine:
                self._leave_turn()

    # ---- requests ----

    def send(self, request: Dict[str, Any], data: Optional[bytes] = None,
             call: Optional[_Call] = None) -> _Call:
        """Send one request (op first, then the id this chooses: the
        server finds them at the start of a line it cannot parse); data,
        base64 text, goes last as the field "data" without a copy through
        the JSON encoder."""
        op = request.pop("op")
        call = call or _Call(op)
        with self._lock:
            if self._closed is not None:
                raise SandboxClosed(self._closed)
            rid = next(self._ids)
        call.rid = rid
        line = json.dumps(dict(op=op, id=rid, **request), ensure_ascii=False).encode()
        line = line[:-1] + b',"data":"' + data + b'"}\n' if data is not None else line + b"\n"
        if len(line) - 1 > self.max_line:
            raise ProtocolError("too_large", "the %s request line of %d bytes is over the "
                                "server's max_line of %d bytes" % (
                                    op, len(line) - 1, self.max_line))
        with self._lock:
            if self._closed is not None:
                raise SandboxClosed(self._closed)
            self._calls[rid] = call
        try:
            self._write(line)
        except OSError:
            with self._lock:
                self._calls.pop(rid, None)
            if self._closed is None:
                self._ended()  # no reader saw it go: say how it ended
            raise SandboxClosed(self._closed or "the agentbox server is gone")
        return call

    def wait(self, call: _Call) -> Dict[str, Any]:
        """The reply to call: a result, or the error of a file operation
        with a file error code (FILE_ERRORS); anything else raises."""
        self._pump(call)
        if call.failure is not None:
            raise call.failure
        reply = call.reply
        if reply.get("type") == "error" and (call.op not in FILE_OPS or
                                             reply.get("code") not in FILE_ERRORS):
            raise ProtocolError(reply.get("code", "internal"), reply.get("message", ""))
        return reply

    def request(self, op: str, **fields) -> Dict[str, Any]:
        return self.wait(self.send(dict(op=op, **fields)))

    def many(self, requests: Iterable[Dict[str, Any]], window: int = 8) -> List[Dict[str, Any]]:
        """Several requests, at most window in flight, answered in order."""
        pending: collections.deque = collections.deque()
        out: List[Dict[str, Any]] = []
        for r in requests:
            if len(pending) >= window:
                out.append(self.wait(pending.popleft()))
            pending.append(self.send(r))
        while pending:
            out.append(self.wait(pending.popleft()))
        return out

    def write_raw(self, data: bytes):
        """Bytes as they are on the server's stdin (tests of the protocol)."""
        try:
            self._write(data)
        except OSError:
            raise SandboxClosed(self._closed or "the agentbox server is gone") from None

    # ---- the end ----

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def close(self):
        """End the server: shutdown, then end of file on its stdin, and its
        output read to the end meanwhile: replies still awaited go to their
        callers, the others (an abandoned call's) are dropped; unread, they
        would keep the server from its last writes and from reading its
        stdin. At most CLOSE_WAIT seconds, then the server is killed."""
        deadline = time.monotonic() + CLOSE_WAIT
        with self._lock:
            already = self._closed is not None
            if not already:
                self._closed = "the sandbox was closed"
        if self.detached:
            self._disconnect()
            return
        try:
            if not already:
                self._write(SHUTDOWN, deadline)
        except OSError:
            pass
        if not self._wlock.acquire(timeout=max(0, deadline - time.monotonic())):
            self._proc.kill()  # a writer stuck on a server that reads nothing fails now
            self._wlock.acquire()
        try:
            self._in = -1
            self._proc.stdin.close()
        except (OSError, ValueError):
            pass
        finally:
            self._wlock.release()
        if not self._take_turn(timeout=max(0, deadline - time.monotonic())):
            self._proc.kill()
            self._take_turn()
        try:  # the turn is kept until the fds are closed: nobody reads them after
            if not self._read_to_end(deadline):
                self._proc.kill()
                self._read_to_end(time.monotonic() + 5)
            try:
                self._proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._release()
            self._fail_all(SandboxClosed("the sandbox was closed"))
        finally:
            self._leave_turn()

    def _disconnect(self):
        """A detached sandbox's client goes: the bridge ends, the sandbox
        and what runs in it stay; replies not yet read are kept by the
        sandbox for its next client."""
        self._proc.terminate()
        try:
            self._proc.wait(timeout=CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._take_turn(timeout=5):
            try:
                self._release()
            finally:
                self._leave_turn()
        self._fail_all(SandboxClosed("the client disconnected from the sandbox"))

    def _read_to_end(self, deadline: float) -> bool:
        """The server's output read to its end, holding the reading turn,
        replies handed out; False when deadline passes first."""
        poll = select.poll()
        if self._out >= 0:
            poll.register(self._out, select.POLLIN)
        while self._out >= 0:
            self._dispatch()
            left = int((deadline - time.monotonic()) * 1000)
            if left <= 0 or not poll.poll(left):
                return False
            if not self._fill():
                break
        return True

    @property
    def pid(self) -> int:
        return self._proc.pid
