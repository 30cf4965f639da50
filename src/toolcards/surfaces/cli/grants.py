"""``toolcards approvals grants list|revoke``: the remembered approvals of the config's team.

A grant is made with ``toolcards approvals grant ID --remember 8h`` (``--session`` to limit it
to the session the call came from, ``--match NAME=glob:notes/*`` or ``--match NAME=any`` to
widen one argument; the others stay exactly as the request shows them). ``list`` shows each
live grant exactly as it will match: its id, the principal, the tool, every argument's
matcher, the session and the expiry (``--all`` adds the revoked and expired ones), to an
approver: a pattern holds exact argument values, so anyone else is told only how many there
are, as on the dashboard. ``revoke
ID`` ends one at once, in every process sharing the approvals store, as the local principal,
which must hold the approver role. Making and revoking are audited (``grant_created``,
``grant_revoked``), and every call a grant lets through carries its id in its audit row
(``toolcards audit --grant ID``). Exit codes: 0 done, 2 usage or config error, 3 refused.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from toolcards.governance.approvals.broker import ApprovalError
from toolcards.governance.approvals.view import is_approver
from toolcards.surfaces.cli.approvals import (
    approvals_app,
    grant_row,
    inbox,
    show_rows,
    shown,
    shown_grant,
    shown_pattern,
)
from toolcards.surfaces.cli.options import ConfigOpt, state_of
from toolcards.surfaces.cli.state import emit_json, err, fail, out
from toolcards.surfaces.outcomes import ExitCode

grants_app = typer.Typer(help="Remembered approvals: list them, revoke one.", no_args_is_help=True)

__all__ = ["approvals_app", "grants_app"]

GrantIdArg = Annotated[str, typer.Argument(help="The grant id shown by `grants list`.")]


@grants_app.command("list")
def grants_list(
    ctx: typer.Context,
    all_: Annotated[
        bool, typer.Option("--all", help="Also the revoked and expired grants.")
    ] = False,
    config: ConfigOpt = None,
) -> None:
    """The team's grants, newest first, each exactly as it will match (to an approver)."""
    state = state_of(ctx, config)
    with inbox(state) as (broker, me):
        grants = broker.grants(ended=all_)
        exact = is_approver(me, broker.approver_role)
    if not exact:  # their patterns hold exact argument values (passwords, paths)
        which = "grants" if all_ else "live grants"
        role = broker.approver_role
        err().print(f"{which}: {len(grants)} (their patterns are shown to the {role!r} role)")
        if state.json:
            emit_json([])
        return
    now = time.time()
    rows = [grant_row(grant, now) for grant in grants]
    if state.json:
        emit_json(rows)
        return
    if not rows:
        err().print("no grant" if all_ else "no live grant (--all shows ended ones)")
        return
    lines = [
        (g.grant_id, r["state"], shown_grant(g), shown_pattern(g), f"made by {shown(g.created_by)}")
        for g, r in zip(grants, rows, strict=True)
    ]  # a long value is cut in "matches": "pattern" holds it whole, its spaces kept
    show_rows(("id", "state", "matches", "pattern", "made by"), lines, 34, verbatim=3)


@grants_app.command("revoke")
def grants_revoke(ctx: typer.Context, grant_id: GrantIdArg, config: ConfigOpt = None) -> None:
    """End a grant at once: no call runs by it any more, in any process of the team."""
    state = state_of(ctx, config)
    with inbox(state) as (broker, me):
        try:
            revoked = broker.revoke(grant_id, approver=me, surface="cli")
        except ApprovalError as exc:
            fail(str(exc), ExitCode.DENIED)
    row = grant_row(revoked, time.time())
    if state.json:
        emit_json(row)
        return
    out().print(f"revoked {grant_id}: {shown_grant(revoked)}", markup=False, soft_wrap=True)


# the command table's ``approvals`` entry is this module's approvals_app: grants included
approvals_app.add_typer(grants_app, name="grants")
