"""``toolcards approvals list|grant|deny``: decide approval-required calls out of band.

A call that needs approval (an MCP call under ``approval: approver``, a team member's call)
waits in the config's approvals inbox: a SQLite file beside the audit file, or the PostgreSQL
store's database. ``list`` shows what waits: its approval id, the tool, the caller, the exact
arguments (redacted as stored), the reason and its age. ``grant ID`` / ``deny ID`` decide
that one request, once, as the config's local principal, which must hold the approver role
and must not be the caller. Every decision, and every refused attempt, is audited with the
deciding principal's identity. Exit codes: 0 decided, 2 usage or config error, 3 refused.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolcards.surfaces.cli_state import ConfigOpt, State, emit_json, err, fail, out, state_of
from toolcards.surfaces.outcomes import ExitCode

if TYPE_CHECKING:
    from toolcards.governance.approvals import ApprovalBroker, ApprovalRequest
    from toolcards.governance.identity import Identity

approvals_app = typer.Typer(
    help="Decide calls that wait for approval (list, grant, deny).",
    no_args_is_help=True,
)

IdArg = Annotated[str, typer.Argument(help="The approval id shown by `toolcards approvals list`.")]


def register(app: typer.Typer) -> None:
    """Add the ``approvals`` commands to ``app``."""
    app.add_typer(approvals_app, name="approvals")


@contextlib.contextmanager
def _inbox(state: State) -> Iterator[tuple[ApprovalBroker, Identity]]:
    """The config's approvals broker (decisions audited) and the local principal."""
    from toolcards._postgres import DatabaseUnavailable
    from toolcards.surfaces.config import ConfigError, load_config
    from toolcards.surfaces.shared import open_shared

    if state.factory is not None:
        rt = state.runtime()
        yield rt.executor.approvals, rt.local
        return
    try:
        config = load_config(state.config)
        shared = open_shared(config, durability="sync", rate_limits=False)
    except ConfigError as exc:
        fail(str(exc), ExitCode.USAGE)
    except DatabaseUnavailable as exc:
        fail(str(exc), ExitCode.FAILED)
    try:
        yield shared.approvals, config.local_identity
    finally:
        shared.close()


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _row(request: ApprovalRequest, now: float) -> dict[str, Any]:
    return {
        "approval_id": request.approval_id,
        "tool": request.tool_id,
        "caller": request.principal,
        "args": dict(request.args),
        "reason": request.reason,
        "surface": request.surface,
        "age_s": round(now - request.created_at, 1),
        "expires_in_s": round(request.expires_at - now, 1),
    }


@approvals_app.command("list")
def approvals_list(ctx: typer.Context, config: ConfigOpt = None) -> None:
    """Calls waiting for an approver, oldest first."""
    state = state_of(ctx, config)
    with _inbox(state) as (broker, _me):
        pending = broker.pending()
    now = time.time()
    rows = [_row(request, now) for request in pending]
    if state.json:
        emit_json(rows)
        return
    if not rows:
        err().print("no call waits for approval")
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=32)  # copied into grant/deny: never cut
    for name in ("tool", "caller", "arguments", "reason", "age"):
        table.add_column(name, overflow="fold")
    for row in rows:
        args = json.dumps(row["args"], ensure_ascii=False, sort_keys=True)
        table.add_row(
            row["approval_id"], row["tool"], row["caller"], args, row["reason"], _age(row["age_s"])
        )
    out().print(table, markup=False)


def _decide(
    ctx: typer.Context, config: Any, approval_id: str, grant: bool, why: str | None
) -> None:
    from toolcards.governance.approvals import ApprovalError

    state = state_of(ctx, config)
    with _inbox(state) as (broker, me):
        try:
            if grant:
                request = broker.grant(approval_id, approver=me, surface="cli")
            else:
                request = broker.deny(approval_id, approver=me, surface="cli", reason=why)
        except ApprovalError as exc:
            fail(str(exc), ExitCode.DENIED)
    verb = "granted" if grant else "denied"
    data = {**_row(request, time.time()), "decision": verb, "approver": me.id}
    if state.json:
        emit_json(data)
        return
    out().print(
        f"{verb}: {request.tool_id} for {request.principal} ({request.approval_id})", markup=False
    )


@approvals_app.command("grant")
def approvals_grant(ctx: typer.Context, approval_id: IdArg, config: ConfigOpt = None) -> None:
    """Let the waiting call run, once, with exactly the arguments shown."""
    _decide(ctx, config, approval_id, True, None)


@approvals_app.command("deny")
def approvals_deny(
    ctx: typer.Context,
    approval_id: IdArg,
    reason: Annotated[str | None, typer.Option(help="Why (written to the audit trail).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Refuse the waiting call."""
    _decide(ctx, config, approval_id, False, reason)
