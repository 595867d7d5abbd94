"""A running command the caller talks to (Sandbox.spawn, Sandbox.pty):
streamed stdin, output as it comes, a pty's size, signals
(docs/protocol.md, "Terminals and streamed stdin")."""

import base64
import collections
import time
from typing import Any, Dict, Iterator, Optional, Union

from ._session import ProtocolError, Session, _Call


class Process:
    """A command started with a streamed stdin or a pty. Its output is
    read with read() or by iterating; write() returns once the command has
    taken the data (one write at a time: the server holds no more); wait()
    gives its result."""

    def __init__(self, session: Session, request: Dict[str, Any], pty: bool):
        self._s = session
        self.pty = pty
        request["stream"] = True
        call = _Call(request["op"])
        call.output = collections.deque()
        if session.detached and "output_offsets" in session.features:
            # a lost connection is resumed from these (Session._resume):
            # base64, so that offsets count the bytes exactly
            request["encoding"] = "base64"
            call.offsets = {}
        self._call = session.send(request, call=call)
        self._rid = self.id = call.rid
        self._result: Optional[Dict[str, Any]] = None
        self._rest = b""  # read by read_until past its text: read first

    # ---- input ----

    def write(self, data: Union[bytes, str], eof: bool = False) -> None:
        """data on the command's stdin (a pty: typed into its terminal);
        with eof, then its end (a pty: Ctrl-D). Returns once the command
        has taken it; ProtocolError when it cannot (it has ended)."""
        if isinstance(data, str):
            data = data.encode()
        fields: Dict[str, Any] = {"target": self._rid}
        if eof:
            fields["eof"] = True
        if data:
            self._s.request("stdin", encoding="base64", data=base64.b64encode(data).decode(),
                            **fields)
        elif eof:
            self._s.request("stdin", **fields)

    def close_stdin(self) -> None:
        self.write(b"", eof=True)

    def resize(self, rows: int, cols: int) -> None:
        """A pty command's terminal size; its foreground group gets SIGWINCH."""
        self._s.request("resize", target=self._rid, rows=rows, cols=cols)

    def signal(self, name: str) -> None:
        """INT, TERM, KILL, HUP, QUIT, USR1, USR2, WINCH, CONT or STOP to the
        command's process group."""
        self._s.request("signal", target=self._rid, signal=name)

    def kill(self) -> None:
        self.signal("KILL")

    # ---- output and end ----

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next chunk of output (a pty's: one stream), waiting up to
        timeout seconds (None: until some comes); b"" at its end, or when
        timeout passed with nothing."""
        if self._rest:
            chunk, self._rest = self._rest, b""
            return chunk
        out = self._call.output
        if not out and not self._call.done.is_set():
            self._s.pump_until(self._call, lambda: bool(out), timeout)
        with self._s._lock:
            return out.popleft() if out else b""

    def __iter__(self) -> Iterator[bytes]:
        while True:
            chunk = self.read()
            if not chunk and self._call.done.is_set():
                return
            if chunk:
                yield chunk

    def read_until(self, text: Union[bytes, str], timeout: float = 30) -> bytes:
        """Output up to and including text (what came after it is left for
        the next read); TimeoutError if it does not come in timeout
        seconds, EOFError if the command ends first."""
        if isinstance(text, str):
            text = text.encode()
        got, end = b"", time.monotonic() + timeout
        while text not in got:
            left = end - time.monotonic()
            if left <= 0:
                self._rest = got
                raise TimeoutError("%r did not come in %s s; got %r" % (text, timeout, got))
            chunk = self.read(left)
            if not chunk and self._call.done.is_set() and not self._call.output:
                self._rest = got
                raise EOFError("the command ended before %r; got %r" % (text, got))
            got += chunk
        end_at = got.index(text) + len(text)
        got, self._rest = got[:end_at], got[end_at:]
        return got

    @property
    def dropped(self) -> list:
        """output_dropped messages (docs/protocol.md): bytes of the output
        the sandbox had to drop while no client was attached."""
        return self._call.dropped

    @property
    def running(self) -> bool:
        return not self._call.done.is_set()

    def wait(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The command's result (docs/protocol.md), once it has ended;
        output not read yet stays readable."""
        if self._result is None:
            if timeout is not None:
                self._s.pump_until(self._call, lambda: False, timeout)
                if not self._call.done.is_set():
                    raise TimeoutError("the command is still running after %s s" % timeout)
            self._result = self._s.wait(self._call)
        return self._result

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.running:
            try:
                self.kill()
                self.wait()
            except ProtocolError:
                pass
