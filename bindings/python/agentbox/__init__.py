"""agentbox for Python: an agent's shell commands and file operations in a
sandbox (user, mount, pid, ipc, uts, net and cgroup namespaces, seccomp,
Landlock, cgroup limits, no capabilities) that lives for a conversation.

    from agentbox import Sandbox
    with Sandbox("/path/to/workspace") as sb:
        print(sb.execute("ls -la").output)

With deepagents installed, Sandbox is one of its sandbox backends
(SandboxBackendProtocol) and returns its result classes. See docs/python.md
of the agentbox repository."""

from .sandbox import (DEEPAGENTS_DIRS, FILE_ERRORS, PROTOCOL, CommitConflict, FileError,
                      LegacySandbox, ProtocolError, Sandbox, SandboxClosed, SandboxError)
from ._process import Process
from ._watch import Watch
from .types import (DEEPAGENTS, Change, CommitResult, DeleteResult, EditResult, ExecuteResponse, FileData,
                    FileDownloadResponse, FileInfo, FileUploadResponse, GlobResult, GrepMatch,
                    GrepResult, LsResult, ReadResult, Result, SandboxBackendProtocol, TokenPort,
                    WriteResult)

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "LegacySandbox", "Process", "Watch", "SandboxError", "SandboxClosed", "ProtocolError", "FileError",
    "CommitConflict", "Change", "CommitResult",
    "PROTOCOL", "FILE_ERRORS", "DEEPAGENTS", "DEEPAGENTS_DIRS", "SandboxBackendProtocol",
    "ExecuteResponse", "Result", "FileInfo", "FileData", "GrepMatch", "LsResult",
    "ReadResult", "WriteResult", "EditResult", "GlobResult", "GrepResult", "DeleteResult",
    "FileUploadResponse", "FileDownloadResponse", "TokenPort",
]
