"""Stand-in for deepagents.backends.protocol as 0.7 documents it: the
backend base classes (abc.ABC, so isinstance checks are by class, not by
shape) and the result dataclasses with 0.7's field names and defaults."""

import abc
from dataclasses import dataclass
from typing import Any, Dict, List, Optional


@dataclass
class ExecuteResponse:
    output: str
    exit_code: Optional[int] = None
    truncated: bool = False


@dataclass
class ReadResult:
    error: Optional[str] = None
    file_data: Optional[Dict[str, Any]] = None
    total_lines: Optional[int] = None
    start_line: Optional[int] = None
    end_line: Optional[int] = None
    next_offset: Optional[int] = None
    no_lines_requested: bool = False

    def __post_init__(self):
        # 0.7 refuses inconsistent windows; so does the stand-in
        if (self.start_line is None) != (self.end_line is None):
            raise ValueError("start_line and end_line go together")
        if self.start_line is not None:
            if not 1 <= self.start_line <= self.end_line:
                raise ValueError("a window runs forward from line 1")
            if self.total_lines is not None and self.total_lines < self.end_line:
                raise ValueError("total_lines below end_line")
            if self.next_offset is not None and self.next_offset != self.end_line:
                raise ValueError("next_offset must be end_line")
        elif self.next_offset is not None or self.total_lines is not None:
            raise ValueError("paging fields need a window")
        if self.no_lines_requested and (self.error or self.start_line is not None):
            raise ValueError("no_lines_requested stands alone")


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
    entries: Optional[List[Dict[str, Any]]] = None


@dataclass
class GrepResult:
    error: Optional[str] = None
    matches: Optional[List[Dict[str, Any]]] = None
    truncated: bool = False


@dataclass
class GlobResult:
    error: Optional[str] = None
    matches: Optional[List[Dict[str, Any]]] = None
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


class BackendProtocol(abc.ABC):
    """File operations; a backend overrides what it supports."""

    def ls(self, path):
        raise NotImplementedError

    def read(self, file_path, offset=0, limit=2000):
        raise NotImplementedError

    def write(self, file_path, content):
        raise NotImplementedError


class SandboxBackendProtocol(BackendProtocol):
    """A backend that also runs shell commands: execute() and id."""

    @property
    def id(self):
        raise NotImplementedError

    def execute(self, command, *, timeout=None):
        raise NotImplementedError
