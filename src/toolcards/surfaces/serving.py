"""Run a runtime's MCP server (stdio or HTTP), with the CLI's control endpoint beside it
when it was opened from a config file with an embedded store (:mod:`.cli.control`; with a
PostgreSQL store every CLI process opens the team itself); ``toolcards serve`` is
:func:`serve`.

While a server runs, its card-contributed toolsets (MCP servers) stay connected, and its policy
file is watched: a file that breaks is said on stderr at once (the server goes on with the last
good policy), and so is the fix. MCP clients hear it as a logging notification (the policy logs
it for everyone, see :data:`toolcards.governance.policy.policy.EVERYONE`); the dashboard
shows it in a banner.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer

from toolcards.governance.policy.policy import EVERYONE
from toolcards.surfaces.approval import log as approval_log
from toolcards.surfaces.cli.endpoint import control_endpoint
from toolcards.surfaces.cli.logs import escaped
from toolcards.surfaces.cli.operations import open_runtime
from toolcards.surfaces.cli.options import ConfigOpt, state_of
from toolcards.surfaces.cli.state import err, fail
from toolcards.surfaces.config import ConfigError
from toolcards.surfaces.http.ports import MCP_PORT, PortUnavailable, listen, url_host
from toolcards.surfaces.mcp_server.http import run_http
from toolcards.surfaces.mcp_server.options import MCPOptions
from toolcards.surfaces.mcp_server.server import run_stdio
from toolcards.surfaces.outcomes import ExitCode
from toolcards.surfaces.runtime import require_modules

ROOT_LOGGER = "toolcards"
HTTP_MODULES = ("starlette", "sse_starlette", "uvicorn")
"""What MCP over HTTP needs beside the MCP SDK (the dashboard extra)."""

if TYPE_CHECKING:
    from pydantic_ai.toolsets import AbstractToolset

    from toolcards.governance.policy.policy import Policy
    from toolcards.surfaces.http.tokens import TokenTable
    from toolcards.surfaces.runtime import SurfaceRuntime


async def serve_runtime(
    rt: SurfaceRuntime,
    transport: str,
    *,
    host: str = "127.0.0.1",
    port: int = MCP_PORT,
    config: Path | None = None,
    dashboard: bool = False,
    sock: socket.socket | None = None,
    options: MCPOptions | None = None,
    dashboard_tokens: TokenTable | None = None,
    dashboard_path: str | None = None,
) -> None:
    """Serve until the client leaves (stdio) or the process is signalled (HTTP). With
    ``dashboard`` (HTTP), the team's dashboard is at ``dashboard_path`` (default: a new
    secret one) and approval-required calls wait in its approvals inbox
    (``dashboard_tokens``: one-time sign-in tokens instead of the config's). ``sock``
    (HTTP): a socket already bound to ``host:port``
    (:func:`toolcards.surfaces.http.ports.listen`). ``options``: the MCP server's own
    (default: built from ``rt``)."""
    http = f"http://{host}:{port}/mcp" if transport == "http" else None
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(watching_policy(rt.policy))
        await stack.enter_async_context(connected(rt.toolsets))
        if config is not None and not (rt.config is not None and rt.config.shared_store):
            await stack.enter_async_context(control_endpoint(rt, config, http))
        if transport == "stdio":
            await _until_signalled(rt, options)
        elif transport == "http" and dashboard:
            from toolcards.surfaces.combined import run_mcp_with_dashboard  # lazy: extra dashboard

            await run_mcp_with_dashboard(
                rt,
                host=host,
                port=port,
                approval_timeout=rt.approval_timeout,
                sock=sock,
                options=options,
                tokens=dashboard_tokens,
                base_path=dashboard_path,
            )
        elif transport == "http":
            await run_http(rt, host=host, port=port, sock=sock, options=options)
        else:
            raise ValueError("transport must be 'stdio' or 'http'")


async def _until_signalled(rt: SurfaceRuntime, options: MCPOptions | None) -> None:
    """stdio until the client leaves, or SIGTERM/SIGINT (then cleanly, records removed)."""
    async with anyio.create_task_group() as tasks:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(watch)
        await run_stdio(rt, options)
        tasks.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def connected(toolsets: Sequence[AbstractToolset[Any]]) -> AsyncIterator[None]:
    """Keep ``toolsets`` connected (entered) for the duration of the block."""
    async with contextlib.AsyncExitStack() as stack:
        for toolset in toolsets:
            await stack.enter_async_context(toolset)
        yield


def policy_notice(policy: Policy) -> str:
    """The line that tells an operator how the policy stands now."""
    if policy.error is None:
        return "policy reloaded: the policy file is valid again"
    if policy.loaded:
        return f"error: {policy.error} (still serving the last good policy until it is fixed)"
    return f"error: {policy.error} (every call is refused until it is fixed)"


class _OperatorLines(logging.Handler):
    """One line on stderr per record the operator of a server must see: a call that waits
    for an approver (the approval channels' INFO), and toolcards' warnings (an OAuth issuer
    whose keys cannot be fetched, an MCP server that went away)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, EVERYONE, False):  # the policy's: :func:`watching_policy` says it
            return False
        return record.levelno >= logging.WARNING or record.name == approval_log.name

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = escaped(" ".join(record.getMessage().split()))
        except Exception:  # a record that cannot be formatted is not worth a traceback
            return
        lead = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        _to_stderr(lead + text)


@contextlib.contextmanager
def operator_lines() -> Iterator[None]:
    """While the block runs, what a server's operator must see is said on stderr (see
    :class:`_OperatorLines`); the MCP clients hear it as log messages too."""
    handler = _OperatorLines()
    root, approvals = logging.getLogger(ROOT_LOGGER), approval_log
    previous = approvals.level
    if approvals.getEffectiveLevel() > logging.INFO:
        approvals.setLevel(logging.INFO)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        approvals.setLevel(previous)


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


@contextlib.asynccontextmanager
async def watching_policy(
    policy: Policy, say: Callable[[str], None] = _to_stderr
) -> AsyncIterator[None]:
    """Check ``policy``'s file every ``reload_interval`` seconds for the block; each change
    between broken and valid is one line given to ``say``."""

    async def watch() -> None:
        last = policy.error
        while True:
            policy.check_reload()
            if policy.error != last:
                last = policy.error
                say(policy_notice(policy))
            await anyio.sleep(max(policy.reload_interval, 0.05))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        try:
            yield
        finally:
            tasks.cancel_scope.cancel()


def serve(
    ctx: typer.Context,
    config: ConfigOpt = None,
    transport: Annotated[str, typer.Option(help="stdio or http.")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port.")] = MCP_PORT,
    dashboard: Annotated[
        bool, typer.Option("--dashboard", help="HTTP: also serve the team dashboard.")
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
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("use stdio or http", param_hint="--transport")
    if dashboard and transport != "http":
        raise typer.BadParameter("the dashboard needs --transport http", param_hint="--dashboard")
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
        rt = open_runtime(state, with_team=dashboard)
        try:  # the MCP server's own part: a prompts: or resources: entry that fails ends here
            options = MCPOptions.of(rt)
        except ConfigError as exc:
            fail(str(exc), ExitCode.USAGE)
        if max_body is not None:
            rt.http_limits = rt.http_limits.model_copy(update={"max_body": max_body})
        if transport == "http":
            err().print(f"serving MCP at http://{url_host(host)}:{port}/mcp", markup=False)
        origin = f"http://{url_host(host)}:{port}"
        one_time, path = _dashboard_sign_in(rt, origin) if dashboard else (None, None)
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
                    dashboard_tokens=one_time,
                    dashboard_path=path,
                )
            )


def _dashboard_sign_in(rt: SurfaceRuntime, origin: str) -> tuple[TokenTable | None, str]:
    """Say where the dashboard is and how to sign in (as ``toolcards dashboard`` does): a
    config with no token a viewer may use gets a one-time link for its local principal, or
    one line saying what is missing. The one-time tokens, if made, and the dashboard's secret
    path (in the address printed here only)."""
    # lazy: extra dashboard
    from toolcards.surfaces.dashboard.first_sign_in import first_sign_in
    from toolcards.surfaces.dashboard.sessions import secret_path

    path = secret_path()
    page = f"{origin}{path}/"
    err().print(f"dashboard at {page}", markup=False)
    sign_in = first_sign_in(rt.tokens, rt.local)
    link = sign_in.link(page)
    if link is not None:
        err().print(f"sign in as {rt.local.id} (once) at {link}", markup=False)
    elif sign_in.problem is not None:
        err().print(f"warning: {sign_in.problem}", markup=False)
    return (sign_in.tokens if sign_in.token is not None else None), path
