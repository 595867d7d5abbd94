"""File events of a directory of the sandbox as they happen (Sandbox.watch;
docs/protocol.md, "watch")."""

import collections
from typing import Any, Dict, Iterator, Optional

from ._session import ProtocolError, Session, _Call


class Watch:
    """A running watch: iterate it for its events, each a dict with
    "event" (created, written, removed, renamed, attributes, overflow),
    "path" (in the view), "dir" and, for renamed, "from"; an "overflow"
    event says events were dropped there. It runs until cancel() (or the
    end of a with block, or the sandbox's end): then the iteration ends.
    Started, it is ready: every change from then on is reported."""

    def __init__(self, session: Session, path: str, recursive: bool):
        self._s = session
        call = _Call("watch")
        call.output = collections.deque()
        self._call = session.send({"op": "watch", "path": path, "recursive": recursive},
                                  call=call)
        self.id = call.rid
        self._result: Optional[Dict[str, Any]] = None
        ready = self.next(timeout=None)
        if ready is None or ready.get("event") != "ready":
            self._s.wait(self._call)  # raises the error it failed with
            raise ProtocolError("internal", "the watch ended before it was ready")
        self.path = ready.get("path")

    def next(self, timeout: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """The next event, waiting up to timeout seconds (None: until one
        comes); None at the watch's end or when timeout passed."""
        out = self._call.output
        if not out and not self._call.done.is_set():
            self._s.pump_until(self._call, lambda: bool(out), timeout)
        with self._s._lock:
            if not out:
                return None
            m = out.popleft()
        return {k: v for k, v in m.items() if k not in ("type", "id")}

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        while True:
            ev = self.next()
            if ev is None:
                return
            yield ev

    @property
    def running(self) -> bool:
        return not self._call.done.is_set()

    def cancel(self) -> Dict[str, Any]:
        """End the watch; its result ({"events": N, "cancelled": true, ...}).
        Events not read yet stay readable."""
        if self._result is None:
            if self.running:
                try:
                    self._s.request("cancel", target=self.id)
                except ProtocolError:
                    pass  # it ended meanwhile
            self._result = self._s.wait(self._call)
        return self._result

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()
