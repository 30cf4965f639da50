"""The whole ``toolcards`` command line: the CLI wing's commands (list, describe, call,
approvals, audit, team, hash-token) with the commands the other wings contribute: ``serve``
(the MCP server) and ``dashboard``.

This module composes the wings (the architecture test allows it, and no wing imports it);
:mod:`toolcards.surfaces.main` is the console entry point that imports it lazily.
"""

from __future__ import annotations

from typing import Annotated

import typer

from toolcards.surfaces.cli.app import State, app
from toolcards.surfaces.cli.options import ConfigOpt, state_of
from toolcards.surfaces.cli.state import err, fail
from toolcards.surfaces.dashboard.cli import register as register_dashboard
from toolcards.surfaces.http.ports import MCP_PORT, PortUnavailable, listen, url_host
from toolcards.surfaces.outcomes import ExitCode

__all__ = ["State", "app", "main", "serve"]

HTTP_MODULES = ("starlette", "sse_starlette", "uvicorn")
"""What MCP over HTTP needs beside the MCP SDK (the dashboard extra)."""


def serve(
    ctx: typer.Context,
    config: ConfigOpt = None,
    transport: Annotated[str, typer.Option(help="stdio or http.")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port.")] = MCP_PORT,
    dashboard: Annotated[
        bool, typer.Option("--dashboard", help="HTTP: also serve the team dashboard at /.")
    ] = False,
    max_body: Annotated[
        int | None,
        typer.Option(
            min=1024,
            help="HTTP: largest request body in bytes (default: http.max_body, 4 MiB).",
        ),
    ] = None,
) -> None:
    """Serve the configured tools over MCP (stdio or HTTP).

    Over stdio the caller is the config's local principal; over HTTP, the bearer token's.
    Approval-required calls wait for an approver (toolcards approvals; with --dashboard
    also in the dashboard's inbox) unless the config says "approval: client"."""
    import contextlib

    import anyio

    if transport not in ("stdio", "http"):
        raise typer.BadParameter("use stdio or http", param_hint="--transport")
    if dashboard and transport != "http":
        raise typer.BadParameter("the dashboard needs --transport http", param_hint="--dashboard")
    from toolcards.surfaces.runtime import require_modules  # lazy: loads pydantic

    # a missing extra is said before anything starts or says it serves
    require_modules("mcp", *(HTTP_MODULES if transport == "http" else ()))
    state = state_of(ctx, config)
    sock = None
    if transport == "http":  # taken or not, known before anything starts
        try:
            sock = listen(host, port)
        except PortUnavailable as exc:
            fail(str(exc), ExitCode.USAGE)
    with sock if sock is not None else contextlib.nullcontext():
        rt = state.runtime(with_team=dashboard)
        from toolcards.surfaces.config import ConfigError  # lazy: loads pydantic
        from toolcards.surfaces.mcp_server.options import MCPOptions  # lazy: loads the stores

        try:  # the MCP server's own part: a prompts: or resources: entry that fails ends here
            options = MCPOptions.of(rt)
        except ConfigError as exc:
            fail(str(exc), ExitCode.USAGE)
        if max_body is not None:
            rt.http_limits = rt.http_limits.model_copy(update={"max_body": max_body})
        from toolcards.surfaces.serving import operator_lines, serve_runtime

        if transport == "http":
            err().print(f"serving MCP at http://{url_host(host)}:{port}/mcp", markup=False)
            if dashboard:
                err().print(f"dashboard at http://{url_host(host)}:{port}/", markup=False)
        control = state.config if state.factory is None else None
        with contextlib.suppress(KeyboardInterrupt), operator_lines():
            anyio.run(
                lambda: serve_runtime(
                    rt,
                    transport,
                    host=host,
                    port=port,
                    config=control,
                    dashboard=dashboard,
                    sock=sock,
                    options=options,
                )
            )


app.command("serve")(serve)
register_dashboard(app)


def main(argv: list[str] | None = None) -> None:
    """Run the command line on ``argv`` (default: the process's arguments). A command that
    needs an optional part that is not installed ends in one line naming the extra."""
    try:
        app(args=argv, prog_name="toolcards")
    except Exception as exc:
        from toolcards.surfaces.cli.run import end_for_missing_extra

        end_for_missing_extra(exc)
        raise
