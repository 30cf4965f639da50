"""``toolcards audit tail|query|verify``: read the audit trail and check its hash chain."""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
import time
from typing import Annotated, Any

import typer

from toolcards.governance.audit.log import AuditLog, other_teams_line
from toolcards.surfaces.cli.options import ConfigOpt, state_of
from toolcards.surfaces.cli.state import (
    State,
    cell,
    emit_json,
    err,
    fail,
    out,
    print_rows,
    shown,
)
from toolcards.surfaces.config import ConfigError, load_config
from toolcards.surfaces.outcomes import ExitCode

audit_app = typer.Typer(help="Read and verify the audit trail.", no_args_is_help=True)
TeamOpt = Annotated[
    str | None,
    typer.Option("--team", help="Read this team's rows (default: the config's team_id)."),
]
_TEAM_HINT = "--team {team} (or team_id: {team} in the config)"
DECISIONS = ("allow", "deny", "approve", "grant", "none")
"""An audit entry's ``decision``: the policy's effect, an approver's ``grant`` or ``deny``, or
``none`` (nothing was decided: an unknown tool, a rejected approval)."""


def _audit_log(ctx: typer.Context, state: State, team: str | None = None) -> Any:
    """The audit log: read directly (SQLite WAL), also while a server writes to it."""
    built = state.built()
    if built is not None:
        if team is not None:
            fail("--team reads a configured trail: pass --config", ExitCode.USAGE)
        audit = built.audit
    else:
        try:
            config = load_config(state.config)
        except ConfigError as exc:
            fail(str(exc), ExitCode.USAGE)
        path = config.audit_location  # a file, or the PostgreSQL database of a shared store
        if path is None or (config.audit_path is not None and not config.audit_path.exists()):
            fail(f"{config.source}: no audit log at {config.audit_path}", ExitCode.USAGE)
        audit = AuditLog(path, team_id=team or config.team_id)
        ctx.call_on_close(audit.close)
    if audit is None:
        fail("this runtime keeps no audit log", ExitCode.USAGE)
    return audit


def _show_entries(state: State, entries: list[Any], audit: Any) -> None:
    if not entries:  # the rows may be another team's: say whose, and how to read them
        others = audit.elsewhere()
        if others:
            err().print(cell(other_teams_line(audit, others, _TEAM_HINT)))

    if state.json:
        emit_json([dataclasses.asdict(e) for e in entries])
        return
    header = ("time", "principal", "surface", "tool", "decision", "outcome", "ms")
    if not sys.stdout.isatty():  # full values, one entry a line, for pipes and files
        rows = [
            (dt.datetime.fromtimestamp(e.ts).isoformat(timespec="seconds"), *_cells(e))
            for e in entries
        ]
        print_rows(header, rows)
        return
    # lazy: rich, ~5x python -c pass; only for a terminal
    from rich.table import Table
    from rich.text import Text

    today = dt.date.today()
    rows = []
    for e in entries:
        when = dt.datetime.fromtimestamp(e.ts)
        stamp = when.strftime("%H:%M:%S" if when.date() == today else "%m-%d %H:%M")
        rows.append((stamp, *map(shown, _cells(e))))  # escaped as print_rows writes them
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    _fit(widths, header.index("principal"), header.index("tool"), out().width)
    table = Table(*header, box=None, pad_edge=False)
    for width, column in zip(widths, table.columns, strict=True):
        column.no_wrap = True  # one line per entry: a long principal or tool is cut short
        column.overflow = "ellipsis"
        column.max_width = width
    for row in rows:
        table.add_row(*(Text(value) for value in row))  # shown above: never read as markup
    out().print(table)


def _fit(widths: list[int], a: int, b: int, total: int) -> None:
    """Shrink columns ``a`` and ``b`` (in proportion) so that the row fits ``total``."""
    gaps = 2 * (len(widths) - 1)  # one space of padding each side between columns
    room = total - gaps - sum(w for i, w in enumerate(widths) if i not in (a, b))
    if widths[a] + widths[b] <= room:
        return
    room = max(room, 16)
    widths[a] = max(8, room * widths[a] // (widths[a] + widths[b]))
    widths[b] = max(8, room - widths[a])


def _cells(e: Any) -> tuple[str, ...]:
    return (e.principal, e.surface, e.tool, e.decision, e.outcome, f"{e.duration_ms:.1f}")


@audit_app.command("tail")
def audit_tail(
    ctx: typer.Context,
    config: ConfigOpt = None,
    n: Annotated[int, typer.Option("-n", min=1, max=10_000, help="How many entries.")] = 20,
    team: TeamOpt = None,
) -> None:
    """The last N audit entries, oldest first."""
    state = state_of(ctx, config)
    audit = _audit_log(ctx, state, team)
    _show_entries(state, audit.tail(n), audit)


def _since(text: str | None) -> float | None:
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
    decision: Annotated[
        str | None, typer.Option(help="allow, deny, approve, grant or none.")
    ] = None,
    outcome: Annotated[str | None, typer.Option(help="ok, denied, needs_approval, ...")] = None,
    since: Annotated[str | None, typer.Option(help="30s, 10m, 2h, 1d or ISO time.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=100_000, help="At most this many entries.")
    ] = 100,
    team: TeamOpt = None,
    grant: Annotated[
        str | None, typer.Option("--grant", help="The calls a grant let run, and its rows.")
    ] = None,
) -> None:
    """Audit entries matching every given filter."""
    state = state_of(ctx, config)
    if decision is not None and decision not in DECISIONS:  # a typo matched no row, silently
        fail(f"--decision: give one of {', '.join(DECISIONS)}, not {decision!r}", ExitCode.USAGE)
    start = _since(since)
    audit = _audit_log(ctx, state, team)
    entries = audit.query(
        principal=principal,
        tool=tool,
        decision=decision,
        outcome=outcome,
        since=start,
        limit=limit,
        grant_id=grant,
    )
    _show_entries(state, entries, audit)


@audit_app.command("verify")
def audit_verify(ctx: typer.Context, config: ConfigOpt = None, team: TeamOpt = None) -> None:
    """Check the team's hash chain: one line, the first changed, removed or reordered row
    (exit 1), or the chain's length and head digest (keep it elsewhere to catch a rewrite)."""
    state = state_of(ctx, config)
    report = _audit_log(ctx, state, team).verify()
    if state.json:
        emit_json(dataclasses.asdict(report))
    else:
        (out() if report.ok else err()).print(report.message, markup=False)
    if not report.ok:
        raise typer.Exit(int(ExitCode.FAILED))
