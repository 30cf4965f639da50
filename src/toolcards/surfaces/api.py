"""Python entry points for registries built in code: :func:`serve_mcp` and :func:`run_cli`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from toolcards.surfaces.commands import State, app
from toolcards.surfaces.runtime import SurfaceRuntime

if TYPE_CHECKING:
    from toolcards.core.factory import ToolFactory
    from toolcards.core.identity import Identity
    from toolcards.governance.audit.log import AuditLog
    from toolcards.governance.capability import CapabilityRegistry
    from toolcards.governance.policy.policy import Policy


def _runtime(
    source: CapabilityRegistry | ToolFactory | Sequence[Callable[..., Any]],
    policy: Policy | str | Path,
    identity: Identity | None,
    tokens: dict[str, Identity] | None,
    audit: AuditLog | str | Path | None,
    timeout: float | None,
    approval: Literal["approver", "client"] = "approver",
) -> SurfaceRuntime:
    return SurfaceRuntime.build(
        source,
        policy=policy,
        identity=identity,
        tokens=tokens,
        audit=audit,
        timeout=timeout,
        approval=approval,
    )


def serve_mcp(
    source: CapabilityRegistry | ToolFactory | Sequence[Callable[..., Any]],
    *,
    policy: Policy | str | Path,
    transport: Literal["stdio", "http"] = "stdio",
    identity: Identity | None = None,
    tokens: dict[str, Identity] | None = None,
    audit: AuditLog | str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    timeout: float | None = 60.0,
    approval: Literal["approver", "client"] = "approver",
) -> None:
    """Serve ``source`` (a registry, a ToolFactory or tool callables) over MCP, governed by
    ``policy``. stdio calls run as ``identity`` (anonymous when None); HTTP callers present a
    bearer token from ``tokens`` (plain token -> identity; no token is anonymous).
    ``approval``: approval-required calls wait for an approver principal (``"approver"``;
    refused at once when none of the identities holds the role) or ask the calling client
    (``"client"``, trusting it). Blocks."""
    from toolcards.surfaces.serving import serve_runtime  # lazy: extra mcp

    if transport not in ("stdio", "http"):
        raise ValueError("transport must be 'stdio' or 'http'")
    rt = _runtime(source, policy, identity, tokens, audit, timeout, approval)
    try:
        anyio.run(lambda: serve_runtime(rt, transport, host=host, port=port))
    finally:
        rt.close()


def run_cli(
    source: CapabilityRegistry | ToolFactory | Sequence[Callable[..., Any]],
    *,
    policy: Policy | str | Path,
    identity: Identity | None = None,
    audit: AuditLog | str | Path | None = None,
    argv: list[str] | None = None,
    timeout: float | None = 60.0,
) -> None:
    """Run the ``toolcards`` command line over ``source`` (``--config`` is not read): list,
    describe, call, audit and serve act on these tools as ``identity``. Exits the process
    with the documented exit code."""
    runtime = _runtime(source, policy, identity, None, audit, timeout)

    def factory(_with_team: bool) -> SurfaceRuntime:
        return runtime

    try:
        app(args=argv, prog_name="toolcards", obj=State(factory=factory))
    finally:
        runtime.close()
