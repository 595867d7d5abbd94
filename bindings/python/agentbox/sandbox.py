"""agentbox.Sandbox: one `agentbox serve` process, spoken to in agentbox/1
(docs/protocol.md) from any number of threads."""

import base64
import collections
import itertools
import json
import os
import shutil
import subprocess
import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .types import (DeleteResult, EditResult, ExecuteResponse, FileDownloadResponse, FileInfo,
                    FileUploadResponse, GlobResult, GrepMatch, GrepResult, LsResult, ReadResult,
                    Result, WriteResult)

PROTOCOL = "agentbox/1"

# error codes that say what was wrong with a file: returned in an `error`
# field, as agent frameworks expect, never raised
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


class _Call:
    __slots__ = ("done", "reply")

    def __init__(self):
        self.done = threading.Event()
        self.reply = None  # the result or error message


def _seconds(value: Optional[float]) -> str:
    if value is None:
        return "none"
    return "%dms" % max(1, int(round(float(value) * 1000)))


class Sandbox:
    """A sandbox for one conversation: commands and file operations in the
    same isolated view of `workspace` (read-write at /workspace)."""

    def __init__(self, workspace: Union[str, os.PathLike], *, skills=None,
                 env: Optional[Dict[str, str]] = None, timeout: Optional[float] = 120,
                 memory: Union[str, int, None] = None, cpus: Optional[float] = None,
                 pids: Optional[int] = None, network: str = "none", seccomp: str = "default",
                 max_output: int = 100_000, binary: Optional[str] = None,
                 extra_args: Sequence[str] = ()):
        binary = binary or os.environ.get("AGENTBOX_BIN") or shutil.which("agentbox")
        if not binary:
            raise SandboxError("agentbox is not installed: no agentbox in PATH, and neither "
                               "binary= nor $AGENTBOX_BIN names one")
        args = [binary, "serve", "--workspace", os.fspath(workspace), "--net", network,
                "--seccomp", seccomp, "--timeout", _seconds(timeout),
                "--max-output", str(int(max_output))]
        if skills is not None:
            args += ["--skills", os.fspath(skills)]
        for name, value in (env or {}).items():
            args += ["--env", "%s=%s" % (name, value)]
        if memory is not None:
            args += ["--memory", str(memory)]
        if cpus is not None:
            args += ["--cpus", str(cpus)]
        if pids is not None:
            args += ["--pids", str(pids)]
        args += list(extra_args)
        self._lock = threading.Lock()  # _calls and _closed
        # writes to stdin, apart: a writer blocked on a full pipe must not
        # stop the reader from taking the replies the server wants to send
        self._wlock = threading.Lock()
        self._calls: Dict[int, _Call] = {}
        self._ids = itertools.count(1)
        self._closed: Optional[str] = None
        self._stderr = collections.deque(maxlen=20)
        try:
            self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, close_fds=True)
        except OSError as e:
            raise SandboxError("cannot start %s: %s" % (binary, e)) from e
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        self._reader = None
        first = self._proc.stdout.readline()
        try:
            hello = json.loads(first) if first else None
        except ValueError:
            hello = None
        if not hello or hello.get("type") != "hello":
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
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # ---- plumbing ----

    @property
    def id(self) -> str:
        """The sandbox's id, as the hello gave it."""
        return self.hello["sandbox_id"]

    def _release(self):
        """The server has exited: close our ends of its pipes."""
        for t in (self._reader, self._stderr_reader):
            if t is not None and t.is_alive() and t is not threading.current_thread():
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

    def _read(self):
        try:
            for line in self._proc.stdout:
                msg = json.loads(line)
                if msg.get("type") == "output":
                    continue  # this client does not ask for streaming
                with self._lock:
                    call = self._calls.pop(msg.get("id"), None) if msg.get("id") is not None \
                        else None
                if call:
                    call.reply = msg
                    call.done.set()
                elif msg.get("type") == "error" and msg.get("id") is None \
                        and msg.get("code") == "internal":
                    self._stderr.append(msg.get("message", ""))
        except (ValueError, OSError):
            pass
        self._proc.wait()
        self._fail_all("the agentbox server ended (exit status %s)%s" % (
            self._proc.returncode,
            ": " + self._stderr_text() if self._stderr else ""))

    def _fail_all(self, why: str):
        with self._lock:
            if self._closed is None:
                self._closed = why
            calls, self._calls = self._calls, {}
        for call in calls.values():
            call.done.set()

    def _send(self, request: Dict[str, Any]) -> _Call:
        call = _Call()
        with self._lock:
            if self._closed is not None:
                raise SandboxClosed(self._closed)
            rid = next(self._ids)
            self._calls[rid] = call
        request["id"] = rid
        line = (json.dumps(request, ensure_ascii=False) + "\n").encode()
        try:
            with self._wlock:
                self._proc.stdin.write(line)
                self._proc.stdin.flush()
        except (OSError, ValueError):
            with self._lock:
                self._calls.pop(rid, None)
            raise SandboxClosed(self._closed or "the agentbox server is gone")
        return call

    def _wait(self, call: _Call) -> Dict[str, Any]:
        call.done.wait()
        if call.reply is None:
            raise SandboxClosed(self._closed or "the agentbox server is gone")
        return call.reply

    def request(self, op: str, **fields) -> Dict[str, Any]:
        """Send one request of agentbox/1 and return its reply (a result,
        or an error message for a file error); protocol errors raise
        ProtocolError."""
        return self._check(self._wait(self._send(dict(op=op, **fields))))

    def _check(self, reply: Dict[str, Any]) -> Dict[str, Any]:
        if reply.get("type") == "error" and reply.get("code") not in FILE_ERRORS:
            raise ProtocolError(reply.get("code", "internal"), reply.get("message", ""))
        return reply

    def _many(self, requests: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Several requests at once, answered in order."""
        calls = [self._send(r) for r in requests]
        return [self._check(self._wait(c)) for c in calls]

    def close(self):
        """End the session: running commands are killed, the sandbox and
        everything agentbox made are removed. Idempotent."""
        with self._lock:
            already = self._closed is not None
            if not already:
                self._closed = "the sandbox was closed"
        with self._wlock:
            try:
                if not already:
                    self._proc.stdin.write(b'{"op":"shutdown","id":"close"}\n')
                    self._proc.stdin.flush()
                self._proc.stdin.close()
            except (OSError, ValueError):
                pass
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._release()
        self._fail_all("the sandbox was closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    # ---- commands ----

    def run(self, command: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
            env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
            stdin: Optional[str] = None, merge_output: bool = False) -> Result:
        """Run command (a shell string, or an argv list run without a
        shell) and return its whole result."""
        req: Dict[str, Any] = {"merge_output": merge_output}
        if isinstance(command, str):
            req["command"] = command
        else:
            req["argv"] = list(command)
        if timeout is not None:
            req["timeout"] = timeout
        if env:
            req["env"] = dict(env)
        if cwd is not None:
            req["cwd"] = cwd
        if stdin is not None:
            req["stdin"] = stdin
        r = self.request("exec", **req)
        known = {k: r.get(k) for k in Result.__dataclass_fields__ if k in r and k != "raw"}
        for k in ("denied_syscalls", "background"):
            if known.get(k) is None:
                known[k] = []
        for k in ("stdout", "stderr"):
            if known.get(k) is None:
                known[k] = ""
        return Result(raw=r, **known)

    def execute(self, command: str, *, timeout: Optional[float] = None) -> ExecuteResponse:
        """deepagents' execute(): stdout and stderr in one output, the exit
        code (124 when the timeout struck, with the output until then) and
        whether the output was cut."""
        r = self.run(command, timeout=timeout, merge_output=True)
        return ExecuteResponse(output=r.output if r.output is not None else r.stdout,
                               exit_code=r.exit_code, truncated=r.truncated)

    # ---- files ----

    @staticmethod
    def _err(reply: Dict[str, Any]) -> Optional[str]:
        return reply.get("message") if reply.get("type") == "error" else None

    def ls(self, path: str = "/workspace") -> LsResult:
        r = self.request("ls", path=path)
        if self._err(r):
            return LsResult(error=self._err(r))
        return LsResult(entries=r["entries"], truncated=r["truncated"])

    def ls_info(self, path: str = "/workspace") -> List[FileInfo]:
        """The older name: the entries, or [] on error."""
        return self.ls(path).entries or []

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        r = self.request("read", path=file_path, offset=offset, limit=limit)
        if self._err(r):
            return ReadResult(error=self._err(r))
        res = ReadResult(total_lines=r["total_lines"], start_line=r["start_line"],
                         end_line=r["end_line"], next_offset=r["next_offset"],
                         truncated=r["truncated"])
        if r["encoding"] == "base64":
            res.data = base64.b64decode(r["content"])
        else:
            res.content = r["content"]
        return res

    def write(self, file_path: str, content: str, *, overwrite: bool = False) -> WriteResult:
        r = self.request("write", path=file_path, content=content, overwrite=overwrite)
        if self._err(r):
            return WriteResult(error=self._err(r))
        return WriteResult(path=r["path"])

    def edit(self, file_path: str, old_string: str, new_string: str,
             replace_all: bool = False) -> EditResult:
        r = self.request("edit", path=file_path, old_string=old_string, new_string=new_string,
                         replace_all=replace_all)
        if self._err(r):
            return EditResult(error=self._err(r))
        return EditResult(path=r["path"], occurrences=r["occurrences"])

    def glob(self, pattern: str, path: str = "/workspace") -> GlobResult:
        r = self.request("glob", pattern=pattern, path=path)
        if self._err(r):
            return GlobResult(error=self._err(r))
        return GlobResult(matches=r["matches"], truncated=r["truncated"])

    def glob_info(self, pattern: str, path: str = "/workspace") -> List[FileInfo]:
        """The older name: the matches, or [] on error."""
        return self.glob(pattern, path).matches or []

    def grep(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None, *,
             regex: bool = False, ignore_case: bool = False,
             max_count: Optional[int] = None) -> GrepResult:
        fields: Dict[str, Any] = {"pattern": pattern, "regex": regex, "ignore_case": ignore_case}
        if path is not None:
            fields["path"] = path
        if glob is not None:
            fields["glob"] = glob
        if max_count is not None:
            fields["max_count"] = max_count
        try:
            r = self.request("grep", **fields)
        except ProtocolError as e:
            if e.code != "invalid_request":
                raise
            return GrepResult(error=e.message)  # an invalid pattern is the model's error
        if self._err(r):
            return GrepResult(error=self._err(r))
        return GrepResult(matches=r["matches"], truncated=r["truncated"])

    def grep_raw(self, pattern: str, path: Optional[str] = None,
                 glob: Optional[str] = None) -> Union[List[GrepMatch], str]:
        """The older name: the matches, or the error as a string."""
        r = self.grep(pattern, path, glob)
        return r.error if r.error else (r.matches or [])

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult:
        r = self.request("delete", path=path, recursive=recursive)
        if self._err(r):
            return DeleteResult(error=self._err(r))
        return DeleteResult(path=r["path"], deleted=r["deleted"])

    def upload_files(self, files: List[Tuple[str, bytes]]) -> List[FileUploadResponse]:
        """Write each (path, bytes); errors are codes (file_not_found,
        permission_denied, is_directory, invalid_path, ...)."""
        replies = self._many({"op": "upload", "path": p, "data": base64.b64encode(b).decode()}
                             for p, b in files)
        return [FileUploadResponse(path=p, error=r.get("code") if r["type"] == "error" else None)
                for (p, _), r in zip(files, replies)]

    def download_files(self, paths: List[str]) -> List[FileDownloadResponse]:
        replies = self._many({"op": "download", "path": p} for p in paths)
        out = []
        for p, r in zip(paths, replies):
            if r["type"] == "error":
                out.append(FileDownloadResponse(path=p, error=r.get("code")))
            else:
                out.append(FileDownloadResponse(path=p, content=base64.b64decode(r["data"])))
        return out
