"""agentbox for Python: an agent's shell commands and file operations in a
sandbox (user, mount, pid, ipc, uts, net and cgroup namespaces, seccomp,
Landlock, cgroup limits, no capabilities) that lives for a conversation.

    from agentbox import Sandbox
    with Sandbox("/path/to/workspace") as sb:
        print(sb.execute("ls -la").output)

See docs/python.md of the agentbox repository."""

from .sandbox import FILE_ERRORS, PROTOCOL, ProtocolError, Sandbox, SandboxClosed, SandboxError
from .types import (DeleteResult, EditResult, ExecuteResponse, FileDownloadResponse, FileInfo,
                    FileUploadResponse, GlobResult, GrepMatch, GrepResult, LsResult, ReadResult,
                    Result, WriteResult)

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "SandboxError", "SandboxClosed", "ProtocolError", "PROTOCOL", "FILE_ERRORS",
    "ExecuteResponse", "Result", "FileInfo", "GrepMatch", "LsResult", "ReadResult",
    "WriteResult", "EditResult", "GlobResult", "GrepResult", "DeleteResult",
    "FileUploadResponse", "FileDownloadResponse",
]
