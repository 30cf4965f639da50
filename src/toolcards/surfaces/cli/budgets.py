"""``toolcards budgets``: what the team spent of each budget of its policy, and what is left.

Reads the counters every process of the config shares (the approvals SQLite file beside the
audit file, or the PostgreSQL store's database): one line per counter of the current window,
each budget's per-principal and per-run counters and its team counter (shown even before its
first use). Exit codes: 0, 2 usage or config error.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from toolcards.governance.executor.budget import Budgets
from toolcards.governance.policy.parse import PolicyError
from toolcards.governance.policy.policy import Policy
from toolcards.stores.base import DatabaseUnavailable
from toolcards.stores.open import open_budgets
from toolcards.surfaces.cli.options import ConfigOpt, state_of
from toolcards.surfaces.cli.state import cell, emit_json, err, fail, out, print_rows
from toolcards.surfaces.config import ConfigError, load_config
from toolcards.surfaces.outcomes import ExitCode


def _amount(value: float, unit: str) -> str:
    return f"{value:.4f} {unit}" if unit == "USD" else f"{value:g} {unit}"


def budgets(ctx: typer.Context, config: ConfigOpt = None) -> None:
    """What each budget of the team has spent and has left."""
    state = state_of(ctx, config)
    built = state.built()
    if built is not None:
        lines = built.executor.budgets.report(built.executor.policy)
    else:
        try:
            found = load_config(state.config)
            policy = Policy.from_yaml(found.policy_path)
            store, close = open_budgets(found.approvals_location, found.team_id)
        except (ConfigError, PolicyError) as exc:
            fail(str(exc), ExitCode.USAGE)
        except DatabaseUnavailable as exc:
            fail(str(exc), ExitCode.FAILED)
        try:
            lines = Budgets(store).report(policy)
        finally:
            if close is not None:
                close()
    rows: list[dict[str, Any]] = [line.as_dict() for line in lines]
    if state.json:
        emit_json(rows)
        return
    if not rows:
        err().print("no budget in the policy (or nothing spent yet)")
        return
    header = ("budget", "per", "scope", "spent", "limit", "left", "window")
    table = [
        (
            r["budget"], r["per"], r["scope"] or "-", _amount(r["spent"], r["unit"]),
            _amount(r["limit"], r["unit"]), _amount(r["left"], r["unit"]), r["window"],
        )
        for r in rows
    ]  # fmt: skip
    if not sys.stdout.isatty():
        print_rows(header, table)
        return
    # lazy: rich, ~5x python -c pass; only for a terminal
    from rich.table import Table

    shown = Table(*header, box=None, pad_edge=False)
    for row in table:
        shown.add_row(*(cell(value) for value in row))  # escaped, never read as markup
    out().print(shown)
