"""Result shapes. Those a sandbox backend of deepagents returns
(ExecuteResponse, FileInfo, GrepMatch, WriteResult, EditResult,
FileUploadResponse, FileDownloadResponse and the LsResult, ReadResult,
GlobResult, GrepResult family) keep its field names, so code written for
those backends takes them as they are; Result is agentbox's full result of
a command."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, TypedDict


class FileInfo(TypedDict, total=False):
    path: str
    is_dir: bool
    size: int
    modified_at: str


class GrepMatch(TypedDict):
    path: str
    line: int
    text: str


@dataclass
class ExecuteResponse:
    """What deepagents' execute() returns: output is stdout and stderr
    interleaved as they came; exit_code 124 means the timeout struck."""

    output: str
    exit_code: Optional[int] = None
    truncated: bool = False


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
class LsResult:
    error: Optional[str] = None
    entries: Optional[List[FileInfo]] = None
    truncated: bool = False


@dataclass
class ReadResult:
    """content is the lines asked for; binary files come whole as bytes in
    data (and content is None)."""

    error: Optional[str] = None
    content: Optional[str] = None
    data: Optional[bytes] = None
    total_lines: Optional[int] = None
    start_line: Optional[int] = None
    end_line: Optional[int] = None
    next_offset: Optional[int] = None
    truncated: bool = False

    def numbered(self) -> str:
        """The lines as `cat -n` shows them, the form agent tools show a
        model."""
        if self.content is None or not self.start_line:
            return ""
        lines = self.content.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return "\n".join("%6d\t%s" % (self.start_line + i, t) for i, t in enumerate(lines))


@dataclass
class WriteResult:
    error: Optional[str] = None
    path: Optional[str] = None
    files_update: Optional[Dict[str, Any]] = None  # always None: the files live in the sandbox


@dataclass
class EditResult:
    error: Optional[str] = None
    path: Optional[str] = None
    files_update: Optional[Dict[str, Any]] = None
    occurrences: Optional[int] = None


@dataclass
class GlobResult:
    error: Optional[str] = None
    matches: Optional[List[FileInfo]] = None
    truncated: bool = False


@dataclass
class GrepResult:
    error: Optional[str] = None
    matches: Optional[List[GrepMatch]] = None
    truncated: bool = False


@dataclass
class DeleteResult:
    error: Optional[str] = None
    path: Optional[str] = None
    deleted: int = 0


@dataclass
class FileUploadResponse:
    path: str
    error: Optional[str] = None


@dataclass
class FileDownloadResponse:
    path: str
    content: Optional[bytes] = None
    error: Optional[str] = None
