"""Serve a registry over MCP (through toolcards' own MCP server) or on the command line
(a thin forward to apcore-cli).

``serve_mcp`` used to forward to apcore-mcp; that package pins the ``mcp`` SDK below 2, so
the bridge now offers the registry's modules as an :class:`ApcoreToolset` and serves them
with :func:`toolcards.surfaces.serve_mcp` on the current SDK.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from toolcards.core.identity import calling_principal
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.policy.policy import Policy
from toolcards.surfaces.api import serve_mcp as serve

from ._deps import require
from .toolset import ApcoreToolset

if TYPE_CHECKING:
    from toolcards.core.identity import Identity

_TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http"}


def _governed_caller(_ctx: Any) -> Identity | None:
    """The principal toolcards' executor runs this call for, so apcore's ACL judges the same
    caller toolcards' policy did; anonymous stays apcore's caller-less ``@external``."""
    who = calling_principal.get()
    return None if who is None or who.is_anonymous else who


def module_capabilities(
    registry_or_executor: Any,
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
) -> CapabilityRegistry:
    """The discoverable modules of an apcore registry (or executor) as toolcards capabilities;
    every call still runs through the apcore executor (its ACL, approvals and validation) as
    the caller toolcards' executor is running it for."""
    apcore = require("apcore")
    if isinstance(registry_or_executor, apcore.Executor):
        executor = registry_or_executor
        registry = executor.registry
    else:
        registry = registry_or_executor
        executor = apcore.Executor(registry)
    toolset = ApcoreToolset(
        registry,
        executor,
        identity_resolver=_governed_caller,
        include=include,
        exclude=exclude,
        sanitize_tool_names=False,
        approvals_asked=True,  # toolcards' gate asks for the modules that require approval
    )
    caps: CapabilityRegistry = anyio.run(CapabilityRegistry.from_toolset, toolset)
    return caps


def serve_mcp(
    registry_or_executor: Any,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    policy: Policy | str | Path | None = None,
    identity: Identity | None = None,
    tokens: dict[str, Identity] | None = None,
    audit: Any = None,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    timeout: float | None = 60.0,
) -> None:
    """Serve every module over MCP (stdio by default; ``transport="http"`` or
    ``"streamable-http"`` for streamable HTTP at ``http://host:port/mcp``). Blocks.

    Calls go through toolcards' governed executor (``policy``; default: allow all, leaving
    the decisions to the apcore executor's own ACL) and then the apcore executor.
    ``identity``, ``tokens`` and ``audit`` are those of :func:`toolcards.surfaces.serve_mcp`.
    """
    if transport not in _TRANSPORTS:
        raise ValueError(f"transport must be one of {sorted(_TRANSPORTS)}")
    caps = module_capabilities(registry_or_executor, include=include, exclude=exclude)
    serve(
        caps,
        policy=policy if policy is not None else Policy.allow_all(),
        transport=_TRANSPORTS[transport],  # type: ignore[arg-type]
        identity=identity,
        tokens=tokens,
        audit=audit,
        host=host,
        port=port,
        timeout=timeout,
    )


def build_cli(registry: Any, *, executor: Any | None = None, **options: Any) -> Any:
    """Build the apcore-cli command group for ``registry`` (a ``click.Group``)."""
    apcore_cli = require("apcore_cli")
    return apcore_cli.create_cli(registry=registry, executor=executor, **options)


def serve_cli(
    registry: Any,
    *,
    executor: Any | None = None,
    argv: Sequence[str] | None = None,
    prog_name: str | None = None,
    standalone_mode: bool = True,
    **options: Any,
) -> Any:
    """Run the command line for ``registry`` on ``argv`` (default: ``sys.argv[1:]``).

    With ``standalone_mode=True`` (the default) this exits the process like any CLI does;
    pass ``False`` to get the command's return value instead.
    """
    cli = build_cli(registry, executor=executor, prog_name=prog_name, **options)
    args = list(argv) if argv is not None else None
    return cli.main(args=args, prog_name=prog_name, standalone_mode=standalone_mode)
