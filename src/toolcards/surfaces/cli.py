"""``toolcards``: list, describe and call governed tools, read the audit trail, serve MCP.

Every command reads ``--config`` (default ``./toolcards.yaml``) and calls as the config's
local principal, through the same executor, policy and audit log as ``toolcards serve``.
``--json`` (before the command) prints machine-readable output.

Exit codes: 0 ok · 1 tool failure (or the store is in use) · 2 usage or config error ·
3 denied · 4 invalid input · 5 needs approval / approval refused · 6 rate limited ·
7 unknown tool.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from toolcards.surfaces.outcomes import ExitCode

if TYPE_CHECKING:
    from toolcards.governance.approvals import ApprovalRequest
    from toolcards.surfaces.runtime import SurfaceRuntime

app = typer.Typer(
    name="toolcards",
    help="Governed tools from the command line, and as an MCP server.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    epilog=(
        "Exit codes: 0 ok, 1 tool failure, 2 usage or config error, 3 denied, 4 invalid input, "
        "5 needs approval or refused, 6 rate limited, 7 unknown tool."
    ),
)
audit_app = typer.Typer(help="Read the audit trail.", no_args_is_help=True)
team_app = typer.Typer(help="Inspect the team.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
app.add_typer(team_app, name="team")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass
class State:
    config: Path = Path("toolcards.yaml")
    json: bool = False
    factory: Callable[[bool], SurfaceRuntime] | None = None
    opened: list[SurfaceRuntime] = field(default_factory=list)

    def runtime(self, with_team: bool = False) -> SurfaceRuntime:
        """The runtime for this command (config and store problems end the command)."""
        from toolcards.runtime.store import StoreLockedError
        from toolcards.surfaces.config import ConfigError
        from toolcards.surfaces.runtime import SurfaceRuntime

        try:
            if self.factory is not None:
                rt = self.factory(with_team)
            else:
                rt = SurfaceRuntime.open(self.config, with_team=with_team or None)
        except ConfigError as exc:
            fail(str(exc), ExitCode.USAGE)
        except StoreLockedError as exc:
            fail(f"{exc} (is `toolcards serve` running on this config?)", ExitCode.FAILED)
        self.opened.append(rt)
        return rt

    def close(self) -> None:
        while self.opened:
            self.opened.pop().close()


ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Config file (default ./toolcards.yaml).", show_default=False
    ),
]


def _state(ctx: typer.Context, config: Path | None = None) -> State:
    state = ctx.find_root().obj
    if not isinstance(state, State):
        state = ctx.find_root().obj = State()
    if config is not None and state.factory is None:
        state.config = config
    return state


def fail(message: str, code: ExitCode) -> NoReturn:
    err.print(f"[red]error:[/red] {message}", markup=True, highlight=False)
    raise typer.Exit(int(code))


def emit_json(data: Any) -> None:
    from pydantic_core import to_jsonable_python

    sys.stdout.write(json.dumps(to_jsonable_python(data, fallback=str), ensure_ascii=False))
    sys.stdout.write("\n")


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path, typer.Option("--config", "-c", help="Config file.", envvar="TOOLCARDS_CONFIG")
    ] = Path("toolcards.yaml"),
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    state = _state(ctx, config)
    if state.factory is None:
        state.config = config
    state.json = json_out
    ctx.call_on_close(state.close)


# -- tools ------------------------------------------------------------------------------------


def _hints(ann: Any) -> list[str]:
    names = ("readonly", "destructive", "idempotent", "open_world", "requires_approval")
    return [n for n in names if getattr(ann, n)]


@app.command("list")
def list_tools(
    ctx: typer.Context,
    config: ConfigOpt = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Include tools you may not call.")
    ] = False,
) -> None:
    """List the tools the local principal may call."""
    state = _state(ctx, config)
    rt = state.runtime()
    visible = set(rt.visible_to(rt.local))
    rows = [
        {
            "name": cap.id,
            "callable": cap.id in visible,
            "hints": _hints(cap.annotations),
            "description": (cap.description or "").strip().split("\n", 1)[0],
        }
        for cap in rt.registry
        if show_all or cap.id in visible
    ]
    if state.json:
        emit_json(rows)
        return
    from rich.table import Table

    table = Table("tool", "hints", "description", box=None, pad_edge=False)
    for row in rows:
        name = str(row["name"])
        if not row["callable"]:
            name = f"[dim]{name} (denied)[/dim]"
        hints: list[str] = row["hints"]  # type: ignore[assignment]
        table.add_row(name, ",".join(hints), str(row["description"]))
    out.print(table)
    if not rows:
        err.print(f"no tools for {rt.local.id}")


@app.command()
def describe(
    ctx: typer.Context,
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    config: ConfigOpt = None,
) -> None:
    """Show a tool's description, annotations and argument schema."""
    state = _state(ctx, config)
    rt = state.runtime()
    cap = rt.registry.get(tool)
    if cap is None or not rt.policy.visible(rt.local, tool):
        fail(f"no tool {tool!r} for {rt.local.id}", ExitCode.DENIED)
    data = {
        "name": cap.id,
        "description": cap.description,
        "annotations": cap.annotations.as_metadata(),
        "input_schema": cap.json_schema,
    }
    if state.json:
        emit_json(data)
        return
    out.print(f"[bold]{cap.id}[/bold]  {', '.join(_hints(cap.annotations))}")
    out.print(cap.description or "(no description)", markup=False)
    out.print_json(json.dumps(cap.json_schema))


def _approver(state: State, status: Any) -> tuple[Any, list[bool]]:
    """A confirm prompt when stdin is a terminal (and output is for a human); else None."""
    asked: list[bool] = []
    if state.json or not stdin_is_tty():
        return None, asked

    async def confirm(request: ApprovalRequest) -> bool:
        from rich.prompt import Confirm

        from toolcards.surfaces.mcp_server import approval_prompt

        asked.append(True)
        if status is not None:
            status.stop()
        err.print(approval_prompt(request), markup=False)
        answer = Confirm.ask("Run it once with these arguments?", default=False, console=err)
        if status is not None:
            status.start()
        return bool(answer)

    return confirm, asked


def stdin_is_tty() -> bool:
    return sys.stdin.isatty()


@app.command()
def call(
    ctx: typer.Context,
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    pairs: Annotated[
        list[str] | None, typer.Argument(help="Arguments as key=value (typed by the schema).")
    ] = None,
    json_args: Annotated[
        str | None,
        typer.Option("--json", "--args", help="Arguments as a JSON object ('-': stdin)."),
    ] = None,
    config: ConfigOpt = None,
) -> None:
    """Call a tool as the local principal.

    A call that needs approval asks on the terminal (stdin a TTY, no --json); otherwise it
    fails closed with exit code 5.
    """
    import asyncio
    import contextlib

    from toolcards.surfaces.cli_args import ArgsError, parse_json, parse_pairs
    from toolcards.surfaces.outcomes import classify

    state = _state(ctx, config)
    if pairs and json_args is not None:
        fail("give key=value pairs or --json, not both", ExitCode.USAGE)
    rt = state.runtime()
    cap = rt.registry.get(tool)
    try:
        if json_args is not None:
            args = parse_json(json_args)
        else:
            args = parse_pairs(pairs or [], cap.json_schema if cap is not None else {})
    except ArgsError as exc:
        fail(str(exc), ExitCode.USAGE)
    spinner = sys.stdout.isatty() and not state.json
    status = err.status(f"calling {tool}...") if spinner else None
    approver, asked = _approver(state, status)
    with status if status is not None else contextlib.nullcontext():
        result = asyncio.run(
            rt.executor.call(tool, args, rt.local, surface="cli", approver=approver)
        )
    view = classify(result, human_asked=bool(asked))
    if state.json:
        payload = {"tool": tool, "ok": not view.is_error, **view.meta(result.retry_after)}
        payload["value" if not view.is_error else "message"] = (
            result.value if not view.is_error else view.message
        )
        emit_json(payload)
    elif not view.is_error:
        _print_value(result.value)
    else:
        err.print(view.message, markup=False)
    raise typer.Exit(int(view.exit_code))


def _print_value(value: Any) -> None:
    from toolcards.surfaces.mcp_server import render_value

    text, _ = render_value(value)
    if isinstance(value, str):
        out.print(text, markup=False)
    else:
        out.print_json(text)


# -- audit ------------------------------------------------------------------------------------


def _audit_log(ctx: typer.Context, state: State) -> Any:
    from toolcards.governance.audit import AuditLog
    from toolcards.surfaces.config import ConfigError, load_config

    if state.factory is not None:
        audit = state.runtime().audit
    else:
        try:
            config = load_config(state.config)
        except ConfigError as exc:
            fail(str(exc), ExitCode.USAGE)
        path = config.audit_path
        if path is None or not path.exists():
            fail(f"{config.source}: no audit log at {path}", ExitCode.USAGE)
        audit = AuditLog(path)
        ctx.call_on_close(audit.close)
    if audit is None:
        fail("this runtime keeps no audit log", ExitCode.USAGE)
    return audit


def _show_entries(state: State, entries: list[Any]) -> None:
    import dataclasses
    import datetime as dt

    if state.json:
        emit_json([dataclasses.asdict(e) for e in entries])
        return
    from rich.table import Table

    table = Table("time", "principal", "surface", "tool", "decision", "outcome", "ms", box=None)
    for e in entries:
        when = dt.datetime.fromtimestamp(e.ts).isoformat(timespec="seconds")
        table.add_row(
            when, e.principal, e.surface, e.tool, e.decision, e.outcome, f"{e.duration_ms:.1f}"
        )
    out.print(table)


@audit_app.command("tail")
def audit_tail(
    ctx: typer.Context,
    config: ConfigOpt = None,
    n: Annotated[int, typer.Option("-n", min=1, max=10_000)] = 20,
) -> None:
    """The last N audit entries, oldest first."""
    state = _state(ctx, config)
    _show_entries(state, _audit_log(ctx, state).tail(n))


def _since(text: str | None) -> float | None:
    import datetime as dt
    import time

    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].replace(".", "", 1).isdigit():
        return time.time() - float(text[:-1]) * units[text[-1]]
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise typer.BadParameter(
            "use 30s, 10m, 2h, 1d or an ISO time", param_hint="--since"
        ) from None


@audit_app.command("query")
def audit_query(
    ctx: typer.Context,
    config: ConfigOpt = None,
    principal: Annotated[str | None, typer.Option(help="Caller id.")] = None,
    tool: Annotated[str | None, typer.Option(help="Tool name.")] = None,
    decision: Annotated[str | None, typer.Option(help="allow, deny or approve.")] = None,
    outcome: Annotated[str | None, typer.Option(help="ok, denied, needs_approval, ...")] = None,
    since: Annotated[str | None, typer.Option(help="30s, 10m, 2h, 1d or ISO time.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=100_000)] = 100,
) -> None:
    """Audit entries matching every given filter."""
    state = _state(ctx, config)
    start = _since(since)
    entries = _audit_log(ctx, state).query(
        principal=principal, tool=tool, decision=decision, outcome=outcome, since=start, limit=limit
    )
    _show_entries(state, entries)


# -- team -------------------------------------------------------------------------------------


@team_app.command("status")
def team_status(
    ctx: typer.Context,
    config: ConfigOpt = None,
    events: Annotated[int, typer.Option(min=0, max=1000)] = 10,
) -> None:
    """Members, tool actors and recent events of the configured team."""
    state = _state(ctx, config)
    rt = state.runtime(with_team=True)
    team = rt.team
    if team is None:
        fail("no team is configured for this runtime", ExitCode.USAGE)
    members_fn = getattr(team, "members", None)
    members = [m.model_dump() for m in members_fn()] if callable(members_fn) else []
    actors = sorted(n for n in team.actor_names() if n.startswith("#"))
    recent = [e.model_dump(mode="json") for e in team.events()[-events:]] if events else []
    data = {"team_id": team.team_id, "members": members, "tool_actors": actors, "events": recent}
    if state.json:
        emit_json(data)
        return
    out.print(f"[bold]team[/bold] {team.team_id}")
    out.print(f"members: {', '.join(m['name'] for m in members) or '(none)'}", markup=False)
    out.print(f"tool actors: {', '.join(actors) or '(none)'}", markup=False)
    for e in recent:
        payload = json.dumps(e.get("payload"), ensure_ascii=False)
        out.print(f"  {e['tool_id']} #{e['seq']}: {payload[:120]}", markup=False)


# -- serving and tokens -----------------------------------------------------------------------


@app.command()
def serve(
    ctx: typer.Context,
    config: ConfigOpt = None,
    transport: Annotated[str, typer.Option(help="stdio or http.")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port.")] = 8765,
    dashboard: Annotated[
        bool, typer.Option("--dashboard", help="HTTP: also serve the team dashboard at /.")
    ] = False,
) -> None:
    """Serve the configured tools over MCP (stdio as the local principal, or HTTP). With
    ``--dashboard``, approval-required calls wait in the dashboard's approvals inbox."""
    import anyio

    if transport not in ("stdio", "http"):
        raise typer.BadParameter("use stdio or http", param_hint="--transport")
    if dashboard and transport != "http":
        raise typer.BadParameter("the dashboard needs --transport http", param_hint="--dashboard")
    rt = _state(ctx, config).runtime(with_team=dashboard)
    from toolcards.surfaces.mcp_http import run_http
    from toolcards.surfaces.mcp_server import run_stdio

    try:
        if transport == "stdio":
            anyio.run(run_stdio, rt)
        else:
            err.print(f"serving MCP at http://{host}:{port}/mcp", markup=False)
            if dashboard:  # the page at / and its approvals inbox
                from toolcards.surfaces.dashboard.serve import run_mcp_with_dashboard

                anyio.run(lambda: run_mcp_with_dashboard(rt, host=host, port=port))
            else:
                anyio.run(lambda: run_http(rt, host=host, port=port))
    except KeyboardInterrupt:
        pass


@app.command("hash-token")
def hash_token_cmd(
    ctx: typer.Context,
    token: Annotated[
        str | None, typer.Argument(help="Token to hash ('-': stdin; none: new).")
    ] = None,
) -> None:
    """Print the sha256 digest to store for an HTTP bearer token (a new token if none given)."""
    from toolcards.surfaces.config import hash_token, new_token

    if token == "-":
        token = sys.stdin.readline().strip()
    fresh = token is None
    value = new_token() if token is None else token
    digest = hash_token(value)
    if _state(ctx).json:
        emit_json({"token": value if fresh else None, "token_sha256": digest})
        return
    if fresh:
        out.print(f"token: {value}", markup=False)
    out.print(f"token_sha256: {digest}", markup=False)


from toolcards.surfaces.dashboard.cli import register as _register_dashboard  # noqa: E402

_register_dashboard(app)


def main(argv: list[str] | None = None) -> None:
    """The ``toolcards`` entry point."""
    app(args=argv, prog_name="toolcards")


class _CallableModule(types.ModuleType):
    """``toolcards.surfaces.cli`` is both this module and the :func:`~.api.cli` helper:
    importing the module replaces the package attribute, so the module forwards calls."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        from toolcards.surfaces.api import cli

        cli(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
