"""A sandbox provider for deepagents' coding agent (deepagents-code, `dcode`):
`dcode --sandbox agentbox` runs the agent's commands and file operations in
a detached agentbox sandbox on the current directory, and `--sandbox-id ID`
reattaches to one (docs/python.md). Registered under the entry-point group
deepagents_code.sandbox_providers; with deepagents-code installed it
subclasses its SandboxProvider, else a structural copy stands in."""

import asyncio
import logging
import os
import subprocess
from dataclasses import dataclass
from typing import Any, Optional

from .sandbox import Sandbox, SandboxError, _binary

logger = logging.getLogger(__name__)

try:  # the framework's own classes, when it is there
    from deepagents_code.integrations.sandbox_provider import (  # type: ignore
        SandboxInstallHint, SandboxNotFoundError, SandboxProvider, SandboxProviderMetadata)
except ImportError:
    @dataclass(frozen=True)
    class SandboxInstallHint:  # type: ignore[no-redef]
        kind: str
        name: str

    @dataclass(frozen=True)
    class SandboxProviderMetadata:  # type: ignore[no-redef]
        name: str
        working_dir: str
        install: Optional[SandboxInstallHint] = None
        supports_sandbox_id: bool = True
        supports_snapshot_name: bool = False
        backend_module: Optional[str] = None

    class SandboxNotFoundError(SandboxError):  # type: ignore[no-redef]
        """The requested sandbox does not exist."""

    class SandboxProvider:  # type: ignore[no-redef]
        @property
        def metadata(self):
            return None

        async def aget_or_create(self, *, sandbox_id: Optional[str] = None, **kwargs: Any):
            return await asyncio.to_thread(self.get_or_create, sandbox_id=sandbox_id,
                                           **kwargs)

        async def adelete(self, *, sandbox_id: str, **kwargs: Any) -> None:
            await asyncio.to_thread(self.delete, sandbox_id=sandbox_id, **kwargs)

# the params of [sandboxes.providers.agentbox.params] this provider knows
_PARAMS = frozenset(("workspace", "profile", "memory", "cpus", "pids", "network",
                     "workspace_mode", "timeout", "idle_timeout", "ttl", "name", "binary",
                     "via", "secrets", "net_ca"))


class AgentboxProvider(SandboxProvider):
    """Detached agentbox sandboxes for deepagents-code: get_or_create makes
    one on the workspace (default: the current directory) or reattaches by
    id; delete removes one, leaving nothing."""

    @property
    def metadata(self) -> SandboxProviderMetadata:
        return SandboxProviderMetadata(
            name="agentbox", working_dir="/workspace",
            install=SandboxInstallHint(kind="package", name="agentbox"),
            supports_sandbox_id=True, supports_snapshot_name=False,
            backend_module="agentbox")

    def get_or_create(self, *, sandbox_id: Optional[str] = None, **kwargs: Any) -> Sandbox:
        """Reattach to sandbox_id, or make a sandbox with the params:
        workspace, profile, memory, cpus, pids, network ("none", "host",
        "allow=..."), workspace_mode ("direct", "overlay"), timeout,
        idle_timeout, ttl (seconds), name, binary, via (a transport prefix),
        secrets ({NAME: host or [hosts]}: NAME's value stays in agentbox's
        proxy, added to requests to those hosts; the agent sees a
        placeholder), net_ca (extra CAs for those hosts' certificates).
        Unknown params (a newer config's) are ignored."""
        unknown = sorted(set(kwargs) - _PARAMS)
        if unknown:
            logger.debug("agentbox provider: ignoring params %s", unknown)
        via = list(kwargs.get("via") or ())
        binary = kwargs.get("binary")
        if sandbox_id:
            try:
                return Sandbox.connect(sandbox_id, via=via, binary=binary)
            except SandboxError as e:
                if "no sandbox" in str(e):
                    raise SandboxNotFoundError("no agentbox sandbox %s" % sandbox_id) from e
                raise
        options: dict = {}
        for key in ("memory", "cpus", "pids", "timeout", "binary", "secrets", "net_ca"):
            if kwargs.get(key) is not None:
                options[key] = kwargs[key]
        if kwargs.get("network"):
            options["network"] = str(kwargs["network"])
        if kwargs.get("workspace_mode"):
            options["workspace_mode"] = kwargs["workspace_mode"]
        if kwargs.get("profile"):
            options["extra_args"] = ("--profile", str(kwargs["profile"]))
        return Sandbox.create(kwargs.get("workspace") or os.getcwd(), detach=True,
                              name=kwargs.get("name"), idle_timeout=kwargs.get("idle_timeout"),
                              ttl=kwargs.get("ttl"), **options)

    def delete(self, *, sandbox_id: str, **kwargs: Any) -> None:
        """End sandbox_id and leave nothing of it (agentbox rm -f)."""
        args = list(kwargs.get("via") or ()) + [
            _binary(kwargs.get("binary"), remote=bool(kwargs.get("via"))), "rm", "-f",
            sandbox_id]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            if "no sandbox" in r.stderr:
                raise SandboxNotFoundError("no agentbox sandbox %s" % sandbox_id)
            raise SandboxError(r.stderr.strip())
