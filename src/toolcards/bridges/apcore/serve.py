"""Serve a registry over MCP or on the command line (thin forwards to apcore-mcp / apcore-cli)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._deps import require


def serve_mcp(registry_or_executor: Any, **options: Any) -> None:
    """Run an MCP server exposing every module (``apcore_mcp.serve``; stdio by default).

    Options (``transport``, ``host``, ``port``, ``name``, ``acl``, ``approval_handler``, ...)
    are passed through unchanged.
    """
    apcore_mcp = require("apcore_mcp")
    apcore_mcp.serve(registry_or_executor, **options)


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
