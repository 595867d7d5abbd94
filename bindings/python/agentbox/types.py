"""Result shapes. When deepagents is importable, agentbox.Sandbox derives
from its SandboxBackendProtocol and returns its own result classes, as its
middleware checks types (isinstance). Without it, the classes below stand
in: the same names, fields and defaults as deepagents 0.7
(deepagents/backends/protocol.py), so code written for its backends takes
them as they are. Result is agentbox's full result of a command."""

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional

try:  # a TypedDict with optional keys (NotRequired is Python 3.11)
    from typing import TypedDict
except ImportError:  # pragma: no cover
    TypedDict = dict  # type: ignore


class FileInfo(TypedDict, total=False):
    path: str
    is_dir: bool
    size: int
    modified_at: str


class GrepMatch(TypedDict):
    path: str
    line: int
    text: str


class FileData(TypedDict):
    content: str  # the text, or base64 for binary data
    encoding: str  # "utf-8" or "base64"


class TokenPort(NamedTuple):
    """A port published with a token (Sandbox.port(..., token=...)): its URL
    ("tcp://ADDR:PORT") and the token each connection sends first, with a
    newline (docs/network.md, "Beyond loopback"). A new token (token=True)
    is told once: the launcher keeps no copy."""
    url: str
    token: str


@dataclass
class ExecuteResponse:
    """output is stdout and stderr interleaved as they came; exit_code 124
    means the timeout struck."""

    output: str
    exit_code: Optional[int] = None
    truncated: bool = False


@dataclass
class ReadResult:
    """file_data holds the raw lines asked for (no line numbers); start_line
    and end_line are 1-based, next_offset the 0-based line that follows, or
    None at the end; all None for an empty file or binary data."""

    error: Optional[str] = None
    file_data: Optional[FileData] = None
    total_lines: Optional[int] = None
    start_line: Optional[int] = None
    end_line: Optional[int] = None
    next_offset: Optional[int] = None
    no_lines_requested: bool = False


@dataclass
class WriteResult:
    error: Optional[str] = None
    path: Optional[str] = None


@dataclass
class EditResult:
    error: Optional[str] = None
    path: Optional[str] = None
    occurrences: Optional[int] = None


@dataclass
class DeleteResult:
    error: Optional[str] = None
    path: Optional[str] = None


@dataclass
class LsResult:
    error: Optional[str] = None
    entries: Optional[List[FileInfo]] = None


@dataclass
class GrepResult:
    error: Optional[str] = None
    matches: Optional[List[GrepMatch]] = None
    truncated: bool = False


@dataclass
class GlobResult:
    error: Optional[str] = None
    matches: Optional[List[FileInfo]] = None
    truncated: bool = False


@dataclass
class FileUploadResponse:
    path: str
    error: Optional[str] = None


@dataclass
class FileDownloadResponse:
    path: str
    content: Optional[bytes] = None
    error: Optional[str] = None


class SandboxBackendProtocol:
    """Stands in for deepagents' base class when deepagents is not
    installed."""


@dataclass
class Result:
    """Every field of a command's result (docs/protocol.md, exec)."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    output: Optional[str] = None  # with merge_output: both streams interleaved
    signal: Optional[str] = None
    timed_out: bool = False
    cancelled: bool = False
    oom_killed: bool = False
    truncated: bool = False
    duration_ms: int = 0
    cpu_user_ms: int = 0
    cpu_system_ms: int = 0
    max_rss_kb: int = 0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    output_bytes: int = 0
    denied_syscalls: List[Dict[str, Any]] = field(default_factory=list)
    background: List[Dict[str, Any]] = field(default_factory=list)
    background_log: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Change:
    """One path the overlay layer changes (docs/workspace.md): status is
    added, modified, deleted or renamed (then from_path is the old path);
    conflict says the host file changed since the session started; diff is
    a unified diff of a text file when asked for, else None; ignored says
    the workspace's .gitignore files ignore the path (listed only when
    asked for)."""

    path: str
    status: str
    type: str = "file"
    size: Optional[int] = None
    old_size: Optional[int] = None
    from_path: Optional[str] = None
    conflict: bool = False
    diff: Optional[str] = None
    diff_truncated: bool = False
    ignored: bool = False


@dataclass
class CommitResult:
    """What commit wrote to the host workspace."""

    committed: List[str] = field(default_factory=list)
    conflicts: List[str] = field(default_factory=list)


# deepagents' own classes where it is installed: releases before 0.5 lack
# the *Result classes of ls, read, glob, grep; before 0.7, DeleteResult
DEEPAGENTS = False
try:
    from deepagents.backends import protocol as _da
except ImportError:  # not installed, or broken: the stand-ins serve
    _da = None
if _da is not None and hasattr(_da, "SandboxBackendProtocol"):
    DEEPAGENTS = True
    SandboxBackendProtocol = _da.SandboxBackendProtocol  # type: ignore # noqa: F811
    for _name in ("ExecuteResponse", "ReadResult", "WriteResult", "EditResult", "DeleteResult",
                  "LsResult", "GrepResult", "GlobResult", "FileUploadResponse",
                  "FileDownloadResponse"):
        if isinstance(getattr(_da, _name, None), type):
            globals()[_name] = getattr(_da, _name)


def make(cls, **fields):
    """An instance of cls with the fields it has (older deepagents
    releases have fewer, or an extra one such as files_update)."""
    if dataclasses.is_dataclass(cls):
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in fields.items() if k in names}
    return cls(**fields)
