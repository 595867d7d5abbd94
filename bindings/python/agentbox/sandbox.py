"""agentbox.Sandbox: a deepagents sandbox backend (SandboxBackendProtocol,
0.7 semantics) whose commands and file operations run in one agentbox
sandbox, over agentbox/1 (docs/protocol.md). docs/python.md says what each
method does and which deepagents releases each name serves."""

import asyncio
import base64
import collections
import io
import json
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
from pathlib import PurePosixPath
from typing import (Any, BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple, Union,
                    overload)

from . import types as T
from ._session import FILE_ERRORS, PROTOCOL, ProtocolError, SandboxClosed, SandboxError, Session
from ._process import Process
from ._watch import Watch
from .types import FileInfo, GrepMatch, Result, make

__all__ = ["Sandbox", "LegacySandbox", "SandboxError", "ProtocolError", "SandboxClosed",
           "FileError", "PROTOCOL", "FILE_ERRORS", "DEEPAGENTS_DIRS"]

# where deepagents' middleware writes through the backend (artifacts root
# "/"): offloaded tool results and conversation history
DEEPAGENTS_DIRS = ("/large_tool_results", "/conversation_history")

# what a file error is called in upload_files/download_files: deepagents'
# four codes where one fits, else agentbox's own code
_UPLOAD_CODES = {"read_only": "permission_denied", "not_directory": "invalid_path"}
_DOWNLOAD_CODES = {"read_only": "permission_denied", "not_directory": "file_not_found"}

# extensions deepagents reads as binary whatever the bytes (images, audio,
# video, documents: utils._EXTENSION_TO_FILE_TYPE and .mkv)
_BINARY_EXTENSIONS = frozenset(
    ".png .jpeg .jpg .webp .gif .heic .heif .mp4 .mpeg .mov .avi .flv .mpg .webm .wmv "
    ".3gpp .mkv .wav .mp3 .aiff .aac .ogg .flac .pdf .ppt .pptx".split())

EMPTY_CONTENT_WARNING = "System reminder: File exists but has empty contents"
_GREP_PAGE = 5000  # matches per grep request: a page of long lines stays a few MiB
_WRITE_INLINE_MAX = 1 << 20  # larger write contents move as chunked uploads
# files over this many bytes go through a private temporary file and the
# server's host_files path in upload_files and download_files (measured:
# docs/performance.md)
_BULK_MIN = 1 << 20


def _private_dir() -> "tempfile.TemporaryDirectory":
    """A 0700 directory for a batch file's bytes on their way, removed
    after: in memory (/dev/shm) where there is one, so that the bytes,
    already in memory, do not go through the disk too."""
    shm = "/dev/shm"
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None
    return tempfile.TemporaryDirectory(prefix="agentbox-", dir=where)

_DOWNLOAD_AHEAD = 2  # download chunks asked for before the first has come
_BINARY_READ_MAX = 6 << 20  # as the server's read of binary data


def _seconds(value: Optional[float]) -> str:
    if value is None:
        return "none"
    return "%dms" % max(1, int(round(float(value) * 1000)))


def _brace_expand(pattern: str, limit: int = 256) -> List[str]:
    """{a,b} alternatives of a glob, expanded (nested groups too)."""
    depth, start = 0, -1
    for i, c in enumerate(pattern):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                body, alts, d, last = pattern[start + 1:i], [], 0, 0
                for j, b in enumerate(body):
                    d += b == "{"
                    d -= b == "}"
                    if b == "," and d == 0:
                        alts.append(body[last:j])
                        last = j + 1
                alts.append(body[last:])
                if len(alts) < 2:
                    continue
                out: List[str] = []
                for a in alts:
                    out += _brace_expand(pattern[:start] + a + pattern[i + 1:], limit)
                    if len(out) > limit:
                        raise ValueError("the glob %r expands to over %d patterns"
                                         % (pattern, limit))
                return out
    return [pattern]


def _view_pattern(pattern: str) -> str:
    """deepagents' glob contract in the server's terms: no '/', the name at
    any depth; a leading '/', anchored at the search root."""
    if pattern.startswith("/"):
        return pattern.lstrip("/")
    return pattern if "/" in pattern else "**/" + pattern


def _dots_allowed(pattern: str, rel: str) -> bool:
    """deepagents' rule for names starting with a dot: a name matches only
    a pattern segment that starts with a dot, and "**" does not go into
    dot-directories; a pattern without '/' looks at the name alone."""
    segments = [p for p in pattern.split("/") if p]
    parts = rel.split("/")
    if "/" not in pattern:
        return not parts[-1].startswith(".") or segments[-1].startswith(".")
    if any(p.startswith(".") for p in segments):
        return True  # an explicit dot: as the pattern says
    return not any(p.startswith(".") for p in parts)


def _binary(binary: Optional[str], remote: bool = False) -> str:
    if remote:  # the name on the other side of the transport
        return binary or "agentbox"
    binary = binary or os.environ.get("AGENTBOX_BIN") or shutil.which("agentbox")
    if not binary:
        raise SandboxError("agentbox is not installed: no agentbox in PATH, and neither "
                           "binary= nor $AGENTBOX_BIN names one")
    return binary


def _cli(args: Sequence[str]) -> "subprocess.CompletedProcess":
    """An agentbox command that answers at once; SandboxError with its
    message when it fails."""
    try:
        r = subprocess.run(list(args), capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxError("%s: %s" % (" ".join(args[:3]), e)) from e
    if r.returncode != 0:
        raise SandboxError(r.stderr.strip() or "%s failed (exit status %d)" % (
            " ".join(args[:3]), r.returncode))
    return r


def _serve_args(workspace: Union[str, os.PathLike], *, skills=None,
                rootfs: Union[str, os.PathLike, None] = None, image: Optional[str] = None,
                env: Optional[Dict[str, str]] = None, timeout: Optional[float] = 120,
                memory: Union[str, int, None] = None, cpus: Optional[float] = None,
                pids: Optional[int] = None, network: str = "none", seccomp: str = "default",
                max_output: int = 100_000, binary: Optional[str] = None,
                writable_dirs: Sequence[str] = DEEPAGENTS_DIRS,
                workspace_mode: str = "direct",
                keep_changes: Union[str, os.PathLike, None] = None,
                extra_args: Sequence[str] = (), isolation: str = "full",
                limits: Optional[str] = None,
                secrets: Optional[Dict[str, Union[str, Sequence[str]]]] = None,
                net_ca: Union[str, os.PathLike, None] = None) -> List[str]:
    """The command line of agentbox serve for Sandbox's options."""
    binary = _binary(binary)
    args = [binary, "serve", "--workspace", os.fspath(workspace), "--net", network,
            "--seccomp", seccomp, "--timeout", _seconds(timeout),
            "--max-output", str(int(max_output)),
            # containers: "full" refuses a weaker sandbox; "best" accepts
            # one and self.isolation says what is missing
            "--isolation", isolation]
    if skills is not None:
        args += ["--skills", os.fspath(skills)]
    # the view's system from this root tree, not the host's (docs/rootfs.md)
    if rootfs is not None:
        args += ["--rootfs", os.fspath(rootfs)]
    # or from an OCI image layout, "oci:DIR[:TAG]" (docs/images.md)
    if image is not None:
        args += ["--image", image]
    if workspace_mode != "direct":
        args += ["--workspace-mode", workspace_mode]
    if keep_changes is not None:
        args += ["--keep-changes", os.fspath(keep_changes)]
    for name, value in (env or {}).items():
        args += ["--env", "%s=%s" % (name, value)]
    if memory is not None:
        args += ["--memory", str(memory)]
    if cpus is not None:
        args += ["--cpus", str(cpus)]
    if pids is not None:
        args += ["--pids", str(pids)]
    # "full" (agentbox's default) refuses a limit that cannot hold as
    # asked (no cgroup for memory or cpus); "best" starts without it
    if limits is not None:
        args += ["--limits", limits]
    # --net secret=NAME@HOST,...: NAME's value stays in agentbox's (this
    # process's) environment; the sandbox gets a placeholder
    for name, hosts in (secrets or {}).items():
        hosts = [hosts] if isinstance(hosts, str) else list(hosts)
        args += ["--net", "secret=%s@%s" % (name, ",".join(hosts))]
    if net_ca is not None:
        args += ["--net", "ca=" + os.fspath(net_ca)]
    for d in writable_dirs:
        args += ["--tmpfs", d]
    args += list(extra_args)
    return args


class Sandbox(T.SandboxBackendProtocol):
    """A sandbox for one conversation: commands and file operations in the
    same isolated view of `workspace` (read-write at /workspace)."""

    def __init__(self, workspace: Union[str, os.PathLike], *, skills=None,
                 rootfs: Union[str, os.PathLike, None] = None, image: Optional[str] = None,
                 env: Optional[Dict[str, str]] = None, timeout: Optional[float] = 120,
                 memory: Union[str, int, None] = None, cpus: Optional[float] = None,
                 pids: Optional[int] = None, network: str = "none", seccomp: str = "default",
                 max_output: int = 100_000, binary: Optional[str] = None,
                 writable_dirs: Sequence[str] = DEEPAGENTS_DIRS,
                 workspace_mode: str = "direct",
                 keep_changes: Union[str, os.PathLike, None] = None,
                 extra_args: Sequence[str] = (), isolation: str = "full",
                 limits: Optional[str] = None,
                 secrets: Optional[Dict[str, Union[str, Sequence[str]]]] = None,
                 net_ca: Union[str, os.PathLike, None] = None):
        args = _serve_args(**{k: v for k, v in locals().items() if k != "self"})
        self._s = Session(args)
        self.hello: Dict[str, Any] = self._s.hello
        self._detached: Optional[Tuple[str, List[str], str]] = None  # id, via, binary

    # ---- detached sandboxes (docs/detached.md) ----

    @classmethod
    def create(cls, workspace: Union[str, os.PathLike], *, detach: bool = False,
               name: Optional[str] = None, idle_timeout: Optional[float] = None,
               ttl: Optional[float] = None, **options) -> "Sandbox":
        """A sandbox: as Sandbox(workspace, **options), or with detach=True
        one that outlives this client (agentbox create), named name when
        given, reachable by id with Sandbox.connect; idle_timeout and ttl
        in seconds end it (after so long idle, or after so long)."""
        if not detach:
            if name is not None or idle_timeout is not None or ttl is not None:
                raise ValueError("name, idle_timeout and ttl are for detach=True")
            return cls(workspace, **options)
        args = _serve_args(workspace, **options)
        args[1] = "create"
        if name is not None:
            args += ["--name", name]
        if idle_timeout is not None:
            args += ["--idle-timeout", _seconds(idle_timeout)]
        if ttl is not None:
            args += ["--ttl", _seconds(ttl)]
        r = _cli(args)
        return cls.connect(r.stdout.strip(), binary=args[0])

    @classmethod
    def connect(cls, id_or_name: str, *, via: Sequence[str] = (),
                binary: Optional[str] = None) -> "Sandbox":
        """Attach to the detached sandbox id_or_name (agentbox connect);
        via: a command that runs it elsewhere, e.g. ["ssh", "host"] or
        ["kubectl", "exec", "-i", "pod", "--"]. Results of requests whose
        client went away are in self.replayed. One client at a time: a
        sandbox with a client attached refuses (SandboxError, busy)."""
        binary = _binary(binary, remote=bool(via))
        self = cls.__new__(cls)
        self._s = Session(list(via) + [binary, "connect", id_or_name], detached=True)
        self.hello = self._s.hello
        self._detached = (id_or_name, list(via), binary)
        return self

    @classmethod
    def list(cls, *, via: Sequence[str] = (),
             binary: Optional[str] = None) -> List[Dict[str, Any]]:
        """The caller's detached sandboxes (agentbox ls --json): id, name,
        state ("running", or "dead"), created, idle_ms, running, attached,
        memory, pid, workspace."""
        r = _cli(list(via) + [_binary(binary, remote=bool(via)), "ls", "--json"])
        return json.loads(r.stdout)

    @property
    def replayed(self) -> List[Dict[str, Any]]:
        """Replies the sandbox kept for this client: results (and errors)
        of requests an earlier client sent and did not see answered, with
        their original ids. Empty for a sandbox of one client."""
        return self._s.replayed

    def _control(self, command: str):
        if not self._detached:
            raise SandboxError("%s: only a detached sandbox (create(detach=True), connect) "
                               "can be paused and resumed" % command)
        sid, via, binary = self._detached
        _cli(via + [binary, command, sid])

    def pause(self):
        """Freeze every process of this detached sandbox (agentbox pause,
        the cgroup v2 freezer); requests wait until resume(). SandboxError
        where the sandbox has no cgroup to freeze, saying why."""
        self._control("pause")

    def resume(self):
        """Thaw a paused sandbox (agentbox resume)."""
        self._control("resume")

    def destroy(self):
        """End the sandbox, detached or not, leaving nothing (agentbox rm -f
        for a detached one, whatever runs in it)."""
        self.close()
        if self._detached:
            sid, via, binary = self._detached
            _cli(via + [binary, "rm", "-f", sid])

    # ---- the session ----

    @property
    def id(self) -> str:
        """The sandbox's id, as the hello gave it."""
        return self.hello["sandbox_id"]

    @property
    def isolation(self) -> Any:
        """"full", or {"level": "partial", "missing": [...]} when started
        with isolation="best" where a layer could not be built
        (docs/containers.md)."""
        return self.hello.get("isolation", "full")

    @property
    def closed(self) -> bool:
        return self._s.closed

    def close(self):
        """End the session: running commands are killed, the sandbox and
        everything agentbox made are removed. Idempotent. For a detached
        sandbox (create(detach=True), connect): disconnect only; the
        sandbox and what runs in it stay (destroy() ends it)."""
        self._s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, op: str, **fields) -> Dict[str, Any]:
        """Send one request of agentbox/1 and return its reply (a result,
        or an error message for a file error); protocol errors raise
        ProtocolError."""
        return self._s.request(op, **fields)

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

    def spawn(self, command: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
              env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
              pty: Optional[Tuple[int, int]] = None, merge_output: bool = False) -> Process:
        """Start command and return it running (a Process): its stdin stays
        open for Process.write, its output comes as it is written. With
        pty=(rows, cols), a new terminal inside the sandbox is its
        controlling terminal and stdio (one output stream)."""
        req: Dict[str, Any] = {"op": "exec"}
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
        if pty is not None:
            req["pty"] = {"rows": int(pty[0]), "cols": int(pty[1])}
        else:
            req["stdin"] = {"stream": True}
            req["merge_output"] = merge_output
        return Process(self._s, req, pty is not None)

    def watch(self, path: str = "/workspace", *, recursive: bool = True) -> Watch:
        """File events of directory path (in the view; relative: to
        /workspace) and, recursive, every directory under it, as they
        happen: iterate the Watch returned (ready when this returns) until
        its cancel() or the sandbox's end. It takes one of the session's
        concurrent commands (max_concurrent) while it runs."""
        return Watch(self._s, path, recursive)

    def pty(self, command: Union[str, Sequence[str]], rows: int = 24, cols: int = 80,
            **kw) -> Process:
        """spawn(command, pty=(rows, cols)): an interactive program (a REPL,
        an editor, a prompt) driven through its own terminal."""
        return self.spawn(command, pty=(rows, cols), **kw)

    def execute(self, command: str, *, timeout: Optional[int] = None) -> "T.ExecuteResponse":
        """stdout and stderr in one output, the exit code (124 when the
        timeout struck, with the output until then) and whether the output
        was cut. timeout in seconds; None or 0: the session's default."""
        r = self.run(command, timeout=timeout or None, merge_output=True)
        return make(T.ExecuteResponse, output=r.output if r.output is not None else r.stdout,
                    exit_code=r.exit_code, truncated=r.truncated)

    # ---- the overlay workspace: review, then commit or discard ----

    def changes(self, *, diff: bool = False, max_diff_bytes: Optional[int] = None,
                include_ignored: bool = False) -> "List[T.Change]":
        """What the session's commands changed in the workspace, against the
        host's files as they are now (workspace_mode="overlay" only); with
        diff, a unified diff of each text file, at most max_diff_bytes. What
        the workspace's .gitignore files ignore is left out unless
        include_ignored (then those changes have ignored=True)."""
        req: Dict[str, Any] = {"diff": diff}
        if max_diff_bytes is not None:
            req["max_diff_bytes"] = int(max_diff_bytes)
        if include_ignored:
            req["include_ignored"] = True
        r = self.request("changes", **req)
        return [T.Change(path=c["path"], status=c["status"], type=c.get("type", "file"),
                         size=c.get("size"), old_size=c.get("old_size"),
                         from_path=c.get("from"), conflict=bool(c.get("conflict")),
                         diff=c.get("diff"), diff_truncated=bool(c.get("diff_truncated")),
                         ignored=bool(c.get("ignored")))
                for c in r.get("changes", [])]

    def commit(self, paths: Optional[Sequence[str]] = None, *,
               force: bool = False) -> "T.CommitResult":
        """Apply the changes (all, or those at paths and beneath them) to the
        host workspace, each file atomically. When the host changed one of
        them since the session started, nothing is written and CommitConflict
        is raised, unless force."""
        req: Dict[str, Any] = {"force": force}
        if paths is not None:
            req["paths"] = [os.fspath(p) for p in paths]
        r = self.request("commit", **req)
        res = T.CommitResult(committed=list(r.get("committed", [])),
                             conflicts=list(r.get("conflicts", [])))
        if res.conflicts and not force:
            raise CommitConflict(res.conflicts)
        return res

    def discard(self) -> None:
        """Throw the changes away: the session ends (its processes are
        killed) and its layer is removed; the host workspace was never
        touched. Open a new Sandbox to go on."""
        try:
            self.request("discard")
        finally:
            self.close()

    # ---- published ports ----

    @overload
    def port(self, port: int, *, host: Optional[str] = None,
             public: Optional[bool] = None, token: None = None) -> str: ...

    @overload
    def port(self, port: int, *, host: Optional[str] = None,
             public: Optional[bool] = None, token: Union[str, bool]) -> T.TokenPort: ...

    def port(self, port: int, *, host: Optional[str] = None,
             public: Optional[bool] = None,
             token: Union[str, bool, None] = None) -> Union[str, T.TokenPort]:
        """Publish TCP port `port` of the sandbox on this host and return its
        URL ("http://127.0.0.1:41234"): a listener on the host's loopback
        (host "ADDR:PORT" to choose it) relayed to 127.0.0.1:port inside,
        also under net="none". Only this user can connect unless public.
        Asked again, the same URL (docs/network.md, "Published ports").

        token (a string of 16 to 128 printable bytes, or True for a new
        random one) makes each connection send it and a newline first, and
        lets host be an address that is not loopback's; then the result is
        a TokenPort (url "tcp://ADDR:PORT", token: the one given or made,
        which is told only this once)."""
        req: Dict[str, Any] = {"port": int(port)}
        if host is not None:
            req["host"] = host
        if public is not None:
            req["public"] = bool(public)
        if token is not None and token is not False:
            if token is not True and not isinstance(token, str):
                raise TypeError("token: a string, or True for a new one")
            req["token"] = token
        r = self.request("port", **req)
        if "token" not in req:
            return r["url"]
        return T.TokenPort(r["url"], r["token"] if token is True else str(token))

    def ports(self) -> List[Dict[str, Any]]:
        """The ports published: each {"port", "address", "host_port", "url",
        "public", "token"} (token: whether it needs one)."""
        return list(self.request("port").get("ports", []))

    def close_port(self, port: int) -> None:
        """Stop publishing port."""
        self.request("port", port=int(port), close=True)

    # ---- checkpoints (docs/checkpoints.md) ----

    def checkpoint(self, name: Optional[str] = None) -> str:
        """Make what /workspace holds now a read-only layer and go on in a
        fresh one (workspace_mode="overlay" only; no file is copied); returns
        the checkpoint's name (name, or c1, c2...). Refused (ProtocolError,
        code busy) while a command runs. /tmp and home are part of it;
        processes left in the background keep the tree they had."""
        req: Dict[str, Any] = {}
        if name is not None:
            req["name"] = name
        return self.request("checkpoint", **req)["checkpoint"]

    def restore(self, checkpoint: str) -> None:
        """Bring /workspace, /tmp and home back to checkpoint (later
        checkpoints stay)."""
        self.request("restore", checkpoint=checkpoint)

    def checkpoints(self) -> "List[Dict[str, Any]]":
        """The checkpoints: name, layers, bytes of its own layer of
        /workspace, own_bytes of its own layers of /tmp and home."""
        return list(self.request("checkpoints").get("checkpoints", []))

    def fork(self, count: int = 1, *, checkpoint: Optional[str] = None,
             name: Optional[str] = None) -> List[str]:
        """New detached sandboxes (count, 1 to 100) whose /workspace starts
        at checkpoint (None: as it is now, checkpointed first; refused,
        code busy, while a command runs), with this one's options, standing
        on its layers (no file copied); returns their ids, for
        Sandbox.connect (each connection is a process: connect those you
        use). name: NAME, or NAME-1 ... NAME-count. Only a detached
        sandbox (create(detach=True), connect) can be forked; what each
        writes is its own; this one goes on undisturbed."""
        req: Dict[str, Any] = {"count": int(count)}
        if checkpoint is not None:
            req["from"] = checkpoint
        if name is not None:
            req["name"] = name
        return list(self.request("fork", **req)["ids"])

    def changes_since(self, checkpoint: str) -> "List[Dict[str, Any]]":
        """What was written or deleted after checkpoint: path, status
        (written|deleted), type, size."""
        return list(self.request("changes", since=checkpoint).get("changes", []))

    # ---- files: listing and searching ----

    @staticmethod
    def _err(reply: Dict[str, Any]) -> Optional[str]:
        return reply.get("message") if reply.get("type") == "error" else None

    def ls(self, path: str = "/workspace") -> "T.LsResult":
        """The entries of a directory, sorted by name: path, is_dir, size,
        modified_at."""
        r = self.request("ls", path=path)
        if self._err(r):
            return make(T.LsResult, error=self._err(r))
        return make(T.LsResult, entries=r["entries"])

    def glob(self, pattern: str, path: Optional[str] = None) -> "T.GlobResult":
        """Regular files matching pattern below path (default /workspace),
        sorted by path: without '/', the name at any depth; with '/', the
        path below path ('**' any number of directories); a leading '/'
        anchors at path; {a,b} alternatives. A name starting with a dot
        matches only a pattern segment starting with one."""
        try:
            patterns = _brace_expand(pattern)
        except ValueError as e:
            return make(T.GlobResult, error=str(e))
        files_only = "glob_files_only" in self._s.features
        root = posixpath.normpath(self._absolute(path or "/workspace")).rstrip("/") + "/"
        found: Dict[str, FileInfo] = {}
        truncated = False
        for p in patterns:
            req = {"pattern": _view_pattern(p), "path": path or "/workspace"}
            if files_only:
                req["files_only"] = True
            r = self.request("glob", **req)
            if self._err(r):
                return make(T.GlobResult, error=self._err(r))
            truncated = truncated or r["truncated"]
            for m in r["matches"]:
                rel = m["path"][len(root):] if m["path"].startswith(root) else m["path"]
                if not m["is_dir"] and _dots_allowed(p, rel):
                    found[m["path"]] = m
        return make(T.GlobResult, matches=[found[k] for k in sorted(found)], truncated=truncated)

    def grep(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None, *,
             max_count: Optional[int] = None) -> "T.GrepResult":
        """Lines holding the literal pattern in the files below path
        (default /workspace), those glob admits: every match when max_count
        is None, else at most max_count (truncated when more exist)."""
        return self.search(pattern, path, glob, max_count=max_count)

    def search(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None, *,
               regex: bool = False, ignore_case: bool = False,
               max_count: Optional[int] = None) -> "T.GrepResult":
        """grep with agentbox's options: regex (POSIX extended) and
        ignore_case."""
        if not pattern:
            return make(T.GrepResult, error="grep: the pattern is empty")
        base: Dict[str, Any] = {"pattern": pattern, "regex": regex, "ignore_case": ignore_case}
        if path is not None:
            base["path"] = path
        if glob is not None:
            base["glob"] = glob
        paging = "grep_skip" in self._s.features
        matches: List[GrepMatch] = []
        while True:
            want = _GREP_PAGE if max_count is None else min(_GREP_PAGE, max_count - len(matches))
            req = dict(base, max_count=want if paging else (max_count or 100_000))
            if paging and matches:
                req["skip"] = len(matches)
            try:
                r = self.request("grep", **req)
            except ProtocolError as e:
                if e.code != "invalid_request":
                    raise
                return make(T.GrepResult, error=e.message)  # the model's error: a bad regex
            if self._err(r):
                return make(T.GrepResult, error=self._err(r))
            matches += r["matches"]
            if not r["truncated"]:
                return make(T.GrepResult, matches=matches)
            if not paging or (max_count is not None and len(matches) >= max_count):
                return make(T.GrepResult, matches=matches, truncated=True)

    # ---- files: reading ----

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> "T.ReadResult":
        """Up to limit raw lines from line offset (0-based), joined by LF
        with none after the last: file_data is {content, encoding}; a
        negative offset reads from the start, a limit of 0 or less reads
        nothing (no_lines_requested); binary data (and images, audio,
        video, documents by extension) comes whole as base64 without line
        fields; an empty file has deepagents' empty-file reminder as its
        content, a missing one the error "File 'PATH' not found"."""
        offset, limit = max(int(offset), 0), int(limit)
        if PurePosixPath(file_path).suffix.lower() in _BINARY_EXTENSIONS:
            return self._read_binary(file_path)
        r = self.request("read", path=file_path, offset=offset if limit > 0 else 0,
                         limit=max(limit, 1))
        if r.get("type") == "error" and r.get("code") == "file_not_found":
            return make(T.ReadResult, error="File '%s' not found" % file_path)
        if self._err(r):
            return make(T.ReadResult, error=self._err(r))
        if r["encoding"] == "base64":
            return make(T.ReadResult, file_data={"content": r["content"], "encoding": "base64"})
        if not r["total_lines"]:  # deepagents' BaseSandbox: the reminder as the content
            return make(T.ReadResult,
                        file_data={"content": EMPTY_CONTENT_WARNING, "encoding": "utf-8"})
        if limit <= 0:
            return make(T.ReadResult, file_data={"content": "", "encoding": "utf-8"},
                        no_lines_requested=True)
        if not r["start_line"]:
            return make(T.ReadResult, error="Line offset %d exceeds file length (%d lines)"
                        % (offset, r["total_lines"]))
        text = r["content"].replace("\r\n", "\n").replace("\r", "\n")
        if text.endswith("\n"):  # lines joined by LF, as BaseSandbox pages them
            text = text[:-1]
        data = {"content": text, "encoding": "utf-8"}
        try:
            return make(T.ReadResult, file_data=data, total_lines=r["total_lines"],
                        start_line=r["start_line"], end_line=r["end_line"],
                        next_offset=r["next_offset"])
        except ValueError:  # a window deepagents' ReadResult refuses: no paging fields
            return make(T.ReadResult, file_data=data)

    def _read_binary(self, file_path: str) -> "T.ReadResult":
        """A file read whole as base64, if it is at most the server's own
        limit for a binary read (6 MiB)."""
        data = b""
        try:
            for chunk in self._download_chunks(file_path, limit=_BINARY_READ_MAX):
                data += chunk
        except FileError as e:
            return make(T.ReadResult, error="File '%s': %s" % (file_path, e.message))
        return make(T.ReadResult, file_data={
            "content": base64.b64encode(data).decode("ascii"), "encoding": "base64"})

    def read_text(self, file_path: str, offset: int = 0, limit: int = 2000) -> str:
        """read as deepagents before 0.5 had it: the lines numbered as `cat
        -n` shows them, or a message ("Error: ...", the empty-file
        reminder)."""
        r = Sandbox.read(self, file_path, offset, limit)
        if r.error:
            return "Error: %s" % r.error
        content = r.file_data["content"]
        if r.file_data["encoding"] == "base64":
            return "Error: %s is binary data (%d bytes as base64)" % (file_path, len(content))
        if not content.strip() or (content == EMPTY_CONTENT_WARNING
                                      and not getattr(r, "start_line", None)):
            return EMPTY_CONTENT_WARNING
        lines = content.split("\n")
        first = getattr(r, "start_line", None) or max(int(offset), 0) + 1
        return "\n".join("%6d\t%s" % (first + i, t[:2000]) for i, t in enumerate(lines))

    # ---- files: changing ----

    def write(self, file_path: str, content: str) -> "T.WriteResult":
        """Create or overwrite a file (and the directories above it)."""
        raw = content.encode("utf-8", "surrogatepass")
        if len(raw) > _WRITE_INLINE_MAX and self._s.max_chunk:
            error = self._upload_chunks(file_path, iter_chunks(raw, self._s.max_chunk))
            if error:
                return make(T.WriteResult, error=error[1])
            return make(T.WriteResult, path=self._absolute(file_path))
        try:
            r = self.request("write", path=file_path, content=content, overwrite=True)
        except ProtocolError as e:  # a server without chunks, and a line too long
            if e.code != "too_large":
                raise
            return make(T.WriteResult, error=e.message)
        if self._err(r):
            return make(T.WriteResult, error=self._err(r))
        return make(T.WriteResult, path=r["path"])

    def edit(self, file_path: str, old_string: str, new_string: str,
             replace_all: bool = False) -> "T.EditResult":
        """Replace old_string by new_string: exactly one occurrence, or all
        of them with replace_all."""
        if not old_string:
            return make(T.EditResult, error="Error: old_string is empty")
        r = self.request("edit", path=file_path, old_string=old_string, new_string=new_string,
                         replace_all=replace_all)
        code = r.get("code") if r.get("type") == "error" else None
        if code == "not_found" and "\n" in old_string and "\r" not in old_string:
            # read gives CR LF lines as LF: the text may be there with CR LF
            r = self.request("edit", path=file_path, old_string=old_string.replace("\n", "\r\n"),
                             new_string=new_string.replace("\r\n", "\n").replace("\n", "\r\n"),
                             replace_all=replace_all)
            code = r.get("code") if r.get("type") == "error" else None
        if code == "file_not_found":
            return make(T.EditResult, error="Error: File '%s' not found" % file_path)
        if code == "not_found":
            return make(T.EditResult, error="Error: String not found in file: '%s'" % old_string)
        if code == "not_unique":  # BaseSandbox's words, and the count
            n = re.search(r"occurs (\d+) times", r.get("message", ""))
            return make(T.EditResult, error=(
                "Error: String '%s' appears multiple times%s. Use replace_all=True to replace "
                "all occurrences, or provide a more specific string with surrounding context."
                % (old_string, " (%s)" % n.group(1) if n else "")))
        if code:
            return make(T.EditResult, error=r.get("message"))
        return make(T.EditResult, path=r["path"], occurrences=r["occurrences"])

    def delete(self, file_path: str) -> "T.DeleteResult":
        """Delete a file, a symlink, or a directory with all it holds."""
        r = self.request("delete", path=file_path, recursive=True)
        if self._err(r):
            return make(T.DeleteResult, error=self._err(r))
        return make(T.DeleteResult, path=r["path"])

    @staticmethod
    def _absolute(path: str) -> str:
        return path if path.startswith("/") else "/workspace/" + path

    # ---- files: bytes of any size ----

    def _upload_chunks(self, path: str, chunks: Iterator[bytes]) -> Optional[Tuple[str, str]]:
        """Chunks in turn at their offsets (a chunk waits for the one before:
        the server appends at the file's size exactly); (code, message) of
        an error."""
        offset = 0
        for chunk in chunks:
            req: Dict[str, Any] = {"op": "upload", "path": path}
            if self._s.max_chunk:
                req["offset"] = offset
            elif offset:
                return ("too_large", "the server takes no chunks: a file moves in one line")
            r = self._s.wait(self._s.send(req, base64.b64encode(chunk)))
            if r["type"] == "error":
                return (r.get("code"), r.get("message"))
            offset += len(chunk)
        return None

    def _host_files(self) -> bool:
        """Whether upload "from" and download "to" may name this host's
        files: the server says host_files, and it runs here (started by
        this client, or connected to without via)."""
        return "host_files" in self._s.features and not (self._detached and self._detached[1])

    def _upload_from(self, path: str, source: Union[str, os.PathLike]) -> Optional[Tuple[str, str]]:
        r = self.request("upload", path=path, **{"from": os.path.abspath(source)})
        return (r.get("code"), r.get("message")) if r["type"] == "error" else None

    def _download_to(self, path: str, target: Union[str, os.PathLike]) -> int:
        r = self.request("download", path=path, to=os.path.abspath(target))
        if r["type"] == "error":
            raise FileError(r.get("code"), r.get("message"))
        return r["bytes"]

    def upload_files(self, files: List[Tuple[str, bytes]]) -> "List[T.FileUploadResponse]":
        """Write each (path, bytes), creating the directories above it; one
        response per file, in order, with error None or a code
        (file_not_found, permission_denied, is_directory, invalid_path, or
        agentbox's: too_large, no_space, io_error). Files of any size:
        those over the hello's max_chunk move in chunks, or, over
        _BULK_MIN with a server on this host, through a private temporary
        file and the server's host_files path."""
        chunk = self._s.max_chunk
        bulk = self._host_files()
        small = [(i, p, b) for i, (p, b) in enumerate(files)
                 if (not chunk or len(b) <= chunk) and not (bulk and len(b) > _BULK_MIN)]
        out: List[Optional[Any]] = [None] * len(files)
        # several at once, unless a path comes twice: then in turn, the last wins
        window = 8 if len({p for p, _ in files}) == len(files) else 1
        replies = self._s.many(({"op": "upload", "path": p, "data": base64.b64encode(b).decode()}
                                for _, p, b in small), window)
        for (i, p, _), r in zip(small, replies):
            code = r.get("code") if r["type"] == "error" else None
            out[i] = make(T.FileUploadResponse, path=p, error=_UPLOAD_CODES.get(code, code))
        for i, (p, b) in enumerate(files):
            if out[i] is None and bulk:
                with _private_dir() as d:
                    tmp = os.path.join(d, "upload")
                    with open(tmp, "wb") as f:
                        f.write(b)
                    error = self._upload_from(p, tmp)
                code = error[0] if error else None
                out[i] = make(T.FileUploadResponse, path=p, error=_UPLOAD_CODES.get(code, code))
            elif out[i] is None:
                error = self._upload_chunks(p, iter_chunks(b, chunk))
                code = error[0] if error else None
                out[i] = make(T.FileUploadResponse, path=p, error=_UPLOAD_CODES.get(code, code))
        return out

    def _download_chunks(self, path: str, limit: Optional[int] = None) -> Iterator[bytes]:
        """The file's bytes, a chunk at a time; raises FileError (too_large
        for a file over limit bytes)."""
        if not self._s.max_chunk:
            r = self.request("download", path=path)
            if r["type"] == "error":
                raise FileError(r.get("code"), r.get("message"))
            yield base64.b64decode(r["data"])
            return
        r = self.request("download", path=path, offset=0)
        while True:
            if r["type"] == "error":
                raise FileError(r.get("code"), r.get("message"))
            if limit is not None and r["size"] > limit:
                raise FileError("too_large", "%s has %d bytes: binary data is read up to %d; "
                                "download_files takes any size" % (path, r["size"], limit))
            data = base64.b64decode(r["data"])
            if r["eof"] or not data:
                yield data
                return
            # the rest asked for ahead: chunks are reads at offsets, run by
            # several shims at once; in order, and at most _DOWNLOAD_AHEAD
            # in memory
            offset, size = r["offset"] + len(data), r["size"]
            yield data
            r = yield from self._download_ahead(path, offset, size)
            if r is None:
                return

    def _download_ahead(self, path: str, offset: int, size: int):
        """Chunks from offset to size, _DOWNLOAD_AHEAD requests in flight,
        yielded in order; returns None at the end of the file, or, when the
        file changed size meanwhile (or a chunk failed), the reply of one
        request at the offset reached, for the caller to go on from. Calls
        still in flight when it stops are waited for, never abandoned."""
        chunk = self._s.max_chunk
        pending: collections.deque = collections.deque()
        nxt = offset
        try:
            while True:
                while len(pending) < _DOWNLOAD_AHEAD and nxt < size:
                    pending.append(self._s.send({"op": "download", "path": path,
                                                 "offset": nxt}))
                    nxt += chunk
                if not pending:
                    return self.request("download", path=path, offset=offset)
                r = self._s.wait(pending.popleft())
                if r["type"] == "error" or r["size"] != size or r["offset"] != offset:
                    return self.request("download", path=path, offset=offset)
                data = base64.b64decode(r["data"])
                offset += len(data)
                yield data
                if r["eof"] or not data:
                    return None
        finally:
            for call in pending:
                try:
                    self._s.wait(call)
                except (ProtocolError, SandboxClosed):
                    pass

    def download_files(self, paths: List[str]) -> "List[T.FileDownloadResponse]":
        """The bytes of each path, in order: content, or error as a code
        (file_not_found, permission_denied, is_directory, invalid_path,
        ...). Files of any size."""
        out = []
        bulk = self._host_files()
        for p in paths:
            buf = io.BytesIO()  # its getvalue() shares the buffer: no second copy
            try:
                if bulk and self._s.max_chunk:
                    content = self._download_small(p)
                    if content is None:
                        content = self._download_bulk(p)
                    out.append(make(T.FileDownloadResponse, path=p, content=content))
                    continue
                for data in self._download_chunks(p):
                    buf.write(data)
                content = buf.getvalue()
            except FileError as e:
                out.append(make(T.FileDownloadResponse, path=p,
                                error=_DOWNLOAD_CODES.get(e.code, e.code)))
                continue
            out.append(make(T.FileDownloadResponse, path=p, content=content))
        return out

    def _download_small(self, path: str) -> Optional[bytes]:
        """path's bytes when it has at most _BULK_MIN, in one request; None
        for a larger file (raises FileError)."""
        r = self.request("download", path=path, offset=0, length=_BULK_MIN)
        if r["type"] == "error":
            raise FileError(r.get("code"), r.get("message"))
        return base64.b64decode(r["data"]) if r["eof"] else None

    def _download_bulk(self, path: str) -> bytes:
        """path's bytes through a private temporary file (host_files)."""
        with _private_dir() as d:
            tmp = os.path.join(d, "download")
            self._download_to(path, tmp)
            with open(tmp, "rb") as f:
                return f.read()

    def upload_file(self, path: str, source: Union[str, os.PathLike, BinaryIO]) -> None:
        """Copy a host file (a path, or a binary file object) to path in the
        sandbox: with a server on this host that says host_files, the
        server reads the file itself (no bytes in the protocol; path is
        replaced only once all of them arrived); else a chunk at a time.
        Memory stays bounded whatever its size. Raises FileError for a
        file error."""
        if not hasattr(source, "read") and self._host_files():
            error = self._upload_from(path, source)
        elif hasattr(source, "read"):
            error = self._upload_chunks(path, iter_stream(source, self._s.max_chunk or 6 << 20))
        else:
            with open(source, "rb") as f:
                error = self._upload_chunks(path, iter_stream(f, self._s.max_chunk or 6 << 20))
        if error:
            raise FileError(*error)

    def download_file(self, path: str, target: Union[str, os.PathLike, BinaryIO]) -> int:
        """Copy path in the sandbox to a host file (a path, or a binary file
        object); returns the bytes copied. With a server on this host that
        says host_files, the server writes the file itself, whole or not at
        all; else a chunk at a time. Raises FileError for a file error."""
        if not hasattr(target, "write") and self._host_files():
            return self._download_to(path, target)
        n = 0
        if hasattr(target, "write"):
            for data in self._download_chunks(path):
                target.write(data)
                n += len(data)
            return n
        with open(target, "wb") as f:
            for data in self._download_chunks(path):
                f.write(data)
                n += len(data)
        return n

    # ---- names of deepagents before 0.7 ----

    def ls_info(self, path: str = "/workspace") -> List[FileInfo]:
        """ls's entries, or [] on error (deepagents 0.3 to 0.6)."""
        return self.ls(path).entries or []

    def glob_info(self, pattern: str, path: str = "/workspace") -> List[FileInfo]:
        """glob's matches, or [] on error (deepagents 0.3 to 0.6)."""
        return self.glob(pattern, path).matches or []

    def grep_raw(self, pattern: str, path: Optional[str] = None,
                 glob: Optional[str] = None) -> Union[List[GrepMatch], str]:
        """grep's matches, or its error as a string (deepagents 0.3 to 0.6)."""
        r = self.grep(pattern, path, glob)
        return r.error if r.error else (r.matches or [])

    # ---- async twins: the same calls in a worker thread ----

    async def aexecute(self, command: str, *, timeout: Optional[int] = None):
        return await asyncio.to_thread(self.execute, command, timeout=timeout)

    async def achanges(self, *, diff: bool = False, max_diff_bytes: Optional[int] = None,
                       include_ignored: bool = False):
        return await asyncio.to_thread(self.changes, diff=diff, max_diff_bytes=max_diff_bytes,
                                       include_ignored=include_ignored)

    async def acommit(self, paths: Optional[Sequence[str]] = None, *, force: bool = False):
        return await asyncio.to_thread(self.commit, paths, force=force)

    async def adiscard(self) -> None:
        return await asyncio.to_thread(self.discard)

    async def als(self, path: str = "/workspace"):
        return await asyncio.to_thread(self.ls, path)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000):
        return await asyncio.to_thread(self.read, file_path, offset, limit)

    async def aread_text(self, file_path: str, offset: int = 0, limit: int = 2000) -> str:
        return await asyncio.to_thread(self.read_text, file_path, offset, limit)

    async def awrite(self, file_path: str, content: str):
        return await asyncio.to_thread(self.write, file_path, content)

    async def aedit(self, file_path: str, old_string: str, new_string: str,
                    replace_all: bool = False):
        return await asyncio.to_thread(self.edit, file_path, old_string, new_string,
                                       replace_all)

    async def aglob(self, pattern: str, path: Optional[str] = None):
        return await asyncio.to_thread(self.glob, pattern, path)

    async def agrep(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None,
                    *, max_count: Optional[int] = None):
        return await asyncio.to_thread(self.grep, pattern, path, glob, max_count=max_count)

    async def adelete(self, file_path: str):
        return await asyncio.to_thread(self.delete, file_path)

    async def aupload_files(self, files: List[Tuple[str, bytes]]):
        return await asyncio.to_thread(self.upload_files, files)

    async def adownload_files(self, paths: List[str]):
        return await asyncio.to_thread(self.download_files, paths)

    async def als_info(self, path: str = "/workspace") -> List[FileInfo]:
        return await asyncio.to_thread(self.ls_info, path)

    async def aglob_info(self, pattern: str, path: str = "/workspace") -> List[FileInfo]:
        return await asyncio.to_thread(self.glob_info, pattern, path)

    async def agrep_raw(self, pattern: str, path: Optional[str] = None,
                        glob: Optional[str] = None) -> Union[List[GrepMatch], str]:
        return await asyncio.to_thread(self.grep_raw, pattern, path, glob)


class LegacySandbox(Sandbox):
    """For deepagents 0.3 and 0.4, whose backends' read returns the
    numbered text (read_text); everything else as Sandbox."""

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> str:  # type: ignore
        return self.read_text(file_path, offset, limit)

    async def aread(self, file_path: str, offset: int = 0,  # type: ignore
                    limit: int = 2000) -> str:
        return await self.aread_text(file_path, offset, limit)


class CommitConflict(SandboxError):
    """commit refused: the host changed these workspace paths since the
    session started (nothing was written; commit(force=True) overwrites)."""

    def __init__(self, paths: List[str]):
        super().__init__("changed on the host since the session started: " + ", ".join(paths))
        self.paths = paths


class FileError(SandboxError):
    """A file error of upload_file, download_file: code is the protocol's
    file error code."""

    def __init__(self, code: str, message: str):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


def iter_chunks(data: bytes, size: int) -> Iterator[memoryview]:
    """data in slices of size bytes, not copied (all of it when size is
    0); at least one, empty for empty data."""
    view = memoryview(data)
    if not size or len(view) <= size:
        yield view
        return
    for off in range(0, len(view), size):
        yield view[off:off + size]


def iter_stream(f: BinaryIO, size: int) -> Iterator[bytes]:
    """A binary file's bytes in chunks of size; at least one chunk."""
    first = True
    while True:
        data = f.read(size)
        if not data and not first:
            return
        first = False
        yield data
        if len(data) < size:
            return
