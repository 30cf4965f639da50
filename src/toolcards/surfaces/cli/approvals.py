"""``toolcards approvals list|show|grant|deny``: decide approval-required calls out of band.

A call that needs approval (an MCP call under ``approval: approver``, a team member's call, a
``toolcards call`` on a terminal) waits in the config's approvals inbox: a SQLite file beside
the audit file, or the PostgreSQL store's database. ``list`` shows what waits: its approval
id, the tool, the caller, the arguments, the digest a grant binds, the reason and its age.
``show ID`` prints one request whole. An approver (the config's local principal holding the
approver role) sees the exact arguments that run, byte for byte, as canonical JSON with
hidden characters (controls, bidi, zero-width) written as escapes and named; anyone else sees
them redacted. Arguments too long for the list are shown only by ``show``, and granting them
needs the digest ``show`` printed (``grant ID --digest ...``). ``grant ID`` / ``deny ID``
decide that one request, once, as the local principal, which must hold the approver role and
must not be the caller. ``grant ID --args '{...}'`` grants it with edited arguments: they are
what is approved and what runs (once, without asking again), checked as a fresh call's would be
(the schema, then the policy on the edit: an edit the policy denies is refused). Every
decision, and every refused attempt, is audited with the deciding principal's identity (an
edited grant with the digests of both argument sets). Exit codes: 0 decided, 2 usage or config
error, 3 refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolcards.core.approvals import ApprovalState
from toolcards.governance.approvals.broker import ApprovalError
from toolcards.governance.approvals.grants import (
    GrantError,
    Remember,
    describe,
    parse_duration,
    parse_matches,
)
from toolcards.governance.approvals.view import (
    arguments_view,
    escaped_json,
    escaped_line,
    is_approver,
)
from toolcards.governance.redaction.redactor import args_digest, canonical_json
from toolcards.stores.base import DatabaseUnavailable
from toolcards.surfaces.cli.args import ArgsError, parse_json
from toolcards.surfaces.cli.options import ConfigOpt, state_of
from toolcards.surfaces.cli.state import State, emit_json, err, fail, out
from toolcards.surfaces.config import ConfigError, load_config
from toolcards.surfaces.config.shared import open_shared
from toolcards.surfaces.outcomes import ExitCode

if TYPE_CHECKING:
    from toolcards.core.grants import Grant
    from toolcards.core.identity import Identity
    from toolcards.governance.approvals.broker import ApprovalBroker, ApprovalRequest
    from toolcards.governance.approvals.view import ArgumentsView

approvals_app = typer.Typer(
    help="Decide waiting calls (list, show, grant, deny), and grants.",
    no_args_is_help=True,
)

IdArg = Annotated[str, typer.Argument(help="The approval id shown by `toolcards approvals list`.")]
DigestOpt = Annotated[
    str | None,
    typer.Option(
        help="The arguments digest `toolcards approvals show` printed: the grant applies only "
        "to the request with exactly those arguments (needed for arguments too long for list)."
    ),
]


EditOpt = Annotated[
    str | None,
    typer.Option(
        "--args",
        help="Grant with edited arguments (one JSON object, `-` reads stdin): they run instead "
        "of the caller's, once, checked as a fresh call's would be.",
    ),
]


@contextlib.contextmanager
def inbox(state: State) -> Iterator[tuple[ApprovalBroker, Identity]]:
    """The config's approvals broker (decisions audited) and the local principal."""
    built = state.built()
    if built is not None:
        yield built.executor.approvals, built.local
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


def shown(text: str) -> str:
    """A principal, a tool id or a reason as an approver's terminal shows it: on one line,
    hidden characters escaped (a carriage return or an escape sequence could rewrite the
    lines beside it)."""
    return escaped_line(text)


def shown_grant(grant: Grant) -> str:
    """A grant as it will match, hidden characters escaped (:func:`describe` writes a long
    value cut: the pattern is shown whole beside it)."""
    return escaped_json(describe(grant))


def shown_pattern(grant: Grant) -> str:
    """A grant's whole pattern (its JSON), hidden characters escaped."""
    return escaped_json(grant.pattern_json)


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _row(request: ApprovalRequest, now: float, exact: bool) -> dict[str, Any]:
    """One request as ``me`` may see it: ``exact`` (an approver) gives the arguments that run,
    else the redacted copy."""
    view = arguments_view(request, exact=exact)
    return {
        "approval_id": request.approval_id,
        "tool": request.tool_id,
        "caller": request.principal,
        "args": request.exact_args if view.exact else dict(request.args),
        "args_exact": view.grantable,
        "args_shown": view.text,
        "args_length": view.length,
        "escaped": list(view.escapes),
        "args_digest": request.args_digest,
        "reason": request.reason,
        "surface": request.surface,
        "age_s": round(now - request.created_at, 1),
        "expires_in_s": round(request.expires_at - now, 1),
    }


def _cell(view: ArgumentsView, approval_id: str) -> str:
    """The arguments as the list shows them: whole, or a pointer to ``show``."""
    if not view.recorded:
        return "(the exact arguments were not recorded: it can only be denied)"
    if not view.fits:
        return (
            f"({view.length} characters: too long for this list; "
            f"`toolcards approvals show {approval_id}` prints them whole)"
        )
    return view.text


_COLUMNS = ("id", "tool", "caller", "arguments", "digest", "reason", "age", "escaped")
_ARGS = _COLUMNS.index("arguments")


def show_rows(
    columns: tuple[str, ...], lines: Sequence[tuple[str, ...]], id_width: int, verbatim: int = -1
) -> None:
    """Rows under ``columns``: on a terminal a table whose first column (an id to copy into
    the next command) is never cut; else one row a line, tab-separated, each value's
    whitespace folded except column ``verbatim``'s (JSON holds no raw tab or line break)."""
    if not sys.stdout.isatty():
        for line in [columns, *lines]:
            cells = [v if i == verbatim else " ".join(v.split()) for i, v in enumerate(line)]
            sys.stdout.write("\t".join(cells) + "\n")
        return
    # lazy: rich, ~5x python -c pass; only for a terminal
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False)
    table.add_column(columns[0], no_wrap=True, min_width=id_width)
    for name in columns[1:]:
        table.add_column(name, overflow="fold")
    for line in lines:
        table.add_row(*(Text(cell) for cell in line))  # never read as markup
    out().print(table)


@approvals_app.command("list")
def approvals_list(ctx: typer.Context, config: ConfigOpt = None) -> None:
    """Calls waiting for an approver, oldest first (an approver sees the exact arguments)."""
    state = state_of(ctx, config)
    with inbox(state) as (broker, me):
        pending = broker.pending()
        exact = is_approver(me, broker.approver_role)
    now = time.time()
    rows = [_row(request, now, exact) for request in pending]
    if state.json:
        emit_json(rows)
        return
    if not rows:
        err().print("no call waits for approval")
        return
    if not exact:
        err().print(
            f"arguments redacted: the exact ones are shown to the {broker.approver_role!r} role"
        )
    lines: list[tuple[str, ...]] = []
    for request, row in zip(pending, rows, strict=True):
        view = arguments_view(request, exact=exact)
        lines.append((
            row["approval_id"], shown(row["tool"]), shown(row["caller"]),
            _cell(view, request.approval_id), f"sha256:{request.args_digest[:16]}",
            shown(row["reason"]), _age(row["age_s"]),
            ", ".join(view.escapes) or "-",
        ))  # fmt: skip
    show_rows(_COLUMNS, lines, 32, verbatim=_ARGS)  # an id is copied into grant/deny


@approvals_app.command("show")
def approvals_show(ctx: typer.Context, approval_id: IdArg, config: ConfigOpt = None) -> None:
    """One waiting call, whole: the exact arguments that a grant runs (for an approver), and
    the digest that binds them."""
    state = state_of(ctx, config)
    with inbox(state) as (broker, me):
        request = broker.get(approval_id)
        exact = is_approver(me, broker.approver_role)
        if request is not None and broker.state(request) is not ApprovalState.PENDING:
            request = None
    if request is None:
        fail(f"no pending approval {approval_id} (unknown, decided or expired)", ExitCode.DENIED)
    row = _row(request, time.time(), exact)
    if state.json:
        emit_json(row)
        return
    view = arguments_view(request, exact=exact)
    if not view.recorded:
        what = "not recorded: nobody can see what would run, so it can only be denied"
    elif view.exact:
        what = f"exact, {view.length} characters of canonical JSON (its SHA-256 is the digest)"
    else:
        what = "redacted (the exact arguments are shown to the approver role)"
    if view.escapes:
        what += "; shown as escapes: " + ", ".join(view.escapes)
    fields = (
        ("approval", request.approval_id), ("tool", shown(request.tool_id)),
        ("caller", shown(request.principal)), ("surface", shown(request.surface or "-")),
        ("reason", shown(request.reason)),
        ("waiting", f"{_age(row['age_s'])} (expires in {_age(row['expires_in_s'])})"),
        ("digest", f"sha256:{request.args_digest}"), ("arguments", what),
    )  # fmt: skip
    lines = [f"{name:<10} {value}" for name, value in fields]
    if view.recorded:
        lines.append(view.text)  # whole, as plain text: no markup, no wrapping
    if view.grantable:
        lines.append(
            f"grant it (once, exactly these arguments): toolcards approvals grant "
            f"{request.approval_id} --digest {request.args_digest}"
        )
        lines.append("or with edited arguments, which then run instead: add --args '{...}'")
    sys.stdout.write("\n".join(lines) + "\n")


def _decide(
    ctx: typer.Context,
    config: Any,
    approval_id: str,
    grant: bool,
    why: str | None,
    digest: str | None = None,
    edit: str | None = None,
    remember: Any = None,
) -> None:
    state = state_of(ctx, config)
    edited = _edit(edit)
    remembered = None
    with inbox(state) as (broker, me):
        try:
            if grant:
                handle = _granted(broker, approval_id, digest)
                record = broker.grant_record(
                    handle, approver=me, surface="cli", args=edited, remember=remember
                )
                request, runs, remembered = record.request, record.edited_args, record.grant
            else:
                request = broker.deny(approval_id, approver=me, surface="cli", reason=why)
                runs = None
        except ApprovalError as exc:
            fail(str(exc), ExitCode.DENIED)
        exact = is_approver(me, broker.approver_role)
    verb = "granted" if grant else "denied"
    data = {**_row(request, time.time(), exact), "decision": verb, "approver": me.id}
    if remembered is not None:
        data["grant"] = grant_row(remembered, time.time())
    if runs is not None:
        data["edited_args"], data["approved_args_digest"] = runs, args_digest(runs)
    if state.json:
        emit_json(data)
        return
    line = (
        f"{verb}: {shown(request.tool_id)} for {shown(request.principal)} "
        f"({request.approval_id}); "
        f"arguments sha256:{request.args_digest}"
    )
    if runs is not None:
        line += f"; runs instead sha256:{data['approved_args_digest']} {canonical_json(runs)}"
    if remembered is not None:
        line += f"\nremembered as {remembered.grant_id}: {shown_grant(remembered)}"
        line += f"\npattern: {shown_pattern(remembered)}"
    out().print(line, markup=False, soft_wrap=True)


def grant_row(grant: Grant, now: float) -> dict[str, Any]:
    """One grant as the CLI shows it (JSON)."""
    state = "revoked" if grant.revoked_at is not None else "live" if grant.live(now) else "expired"
    return {
        "grant_id": grant.grant_id,
        "principal": grant.principal,
        "tool": grant.tool_id,
        "pattern": dict(grant.pattern),
        "session": grant.session or None,
        "expires_at": grant.expires_at,
        "expires_in_s": round(grant.expires_at - now, 1),
        "created_by": grant.created_by,
        "created_at": grant.created_at,
        "approval_id": grant.approval_id,
        "state": state,
        "revoked_by": grant.revoked_by,
        "matches": describe(grant),
    }


def _edit(text: str | None) -> dict[str, Any] | None:
    """``--args``: one JSON object (bounded), or a usage error in one line."""
    if text is None:
        return None
    try:
        return parse_json(text)
    except ArgsError as exc:
        fail(f"--args: {exc}", ExitCode.USAGE)


def _granted(broker: ApprovalBroker, approval_id: str, digest: str | None) -> Any:
    """What a grant names: the request with the digest given (the broker refuses it when it
    is not the recorded one), or its id when the list showed its arguments whole."""
    request = broker.get(approval_id)
    if request is None:
        return approval_id  # the broker refuses it, and audits the attempt
    if digest is not None:
        given = digest.strip().lower().removeprefix("sha256:")
        return dataclasses.replace(request, args_digest=given)
    if not arguments_view(request, exact=True).fits:
        fail(
            f"the arguments of {approval_id} are too long for `toolcards approvals list`: read "
            f"them whole with `toolcards approvals show {approval_id}`, then grant with the "
            "--digest it prints",
            ExitCode.DENIED,
        )
    return approval_id


RememberOpt = Annotated[
    str | None,
    typer.Option(
        "--remember",
        help="Also remember the decision for this long (30m, 8h, 7d; at most 30 days): later "
        "calls of this principal and tool with arguments matching run without asking.",
    ),
]
SessionOpt = Annotated[
    bool,
    typer.Option("--session", help="With --remember: only in the session the call came from."),
]
MatchOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--match",
        help="With --remember: NAME=any or NAME=glob:PATTERN widens one argument (repeatable); "
        "the others must stay exactly as shown.",
    ),
]


@approvals_app.command("grant")
def approvals_grant(
    ctx: typer.Context,
    approval_id: IdArg,
    digest: DigestOpt = None,
    edit: EditOpt = None,
    remember: RememberOpt = None,
    session: SessionOpt = False,
    match: MatchOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Let the waiting call run, once, with exactly the arguments shown (or, with --args,
    with those edited arguments instead); with --remember, also later calls it covers."""
    terms = _remember(remember, session, match or [])
    _decide(ctx, config, approval_id, True, None, digest, edit, terms)


def _remember(seconds: str | None, session: bool, match: list[str]) -> Remember | None:
    """The ``Remember`` of ``--remember``/``--session``/``--match`` (None without it)."""
    if seconds is None:
        if session or match:
            fail("--session and --match go with --remember", ExitCode.USAGE)
        return None
    try:
        return Remember(parse_duration(seconds), session, parse_matches(match) or None)
    except GrantError as exc:
        fail(f"--remember: {exc}", ExitCode.USAGE)


@approvals_app.command("deny")
def approvals_deny(
    ctx: typer.Context,
    approval_id: IdArg,
    reason: Annotated[str | None, typer.Option(help="Why (written to the audit trail).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Refuse the waiting call."""
    _decide(ctx, config, approval_id, False, reason)
