"""``toolcards list|describe|call|hash-token``: list, describe and call governed tools.

Every command reads ``--config`` (default ``./toolcards.yaml``) and calls as the config's
local principal, through the same executor, policy and audit log as ``toolcards serve``.
While ``toolcards serve`` runs on the same config, ``list``, ``describe``, ``call`` and
``team status`` are forwarded to it (:mod:`.control`). ``--json`` (before the command)
prints machine-readable output. The command line (:mod:`toolcards.surfaces.commands`)
imports a command's module when the command runs, so ``--help`` starts fast.

Exit codes: 0 ok · 1 tool failure (or the store is in use) · 2 usage or config error ·
3 denied · 4 invalid input · 5 needs approval / approval refused · 6 rate limited ·
7 unknown tool · 8 policy error (the policy file never loaded) · 9 refused by a guardrail ·
10 over budget.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from toolcards.surfaces.cli.operations import describe_data, open_runtime
from toolcards.surfaces.cli.options import ConfigOpt, state_of
from toolcards.surfaces.cli.run import call_tool, forwarded, list_tools
from toolcards.surfaces.cli.state import cell, emit_json, err, out
from toolcards.surfaces.config import hash_token, new_token
from toolcards.surfaces.outcomes import ExitCode

__all__ = ["call", "describe", "hash_token_command", "list_command"]


def list_command(
    ctx: typer.Context,
    config: ConfigOpt = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Include tools you may not call.")
    ] = False,
) -> None:
    """List the tools the local principal may call."""
    list_tools(state_of(ctx, config), show_all)


def describe(
    ctx: typer.Context,
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    config: ConfigOpt = None,
) -> None:
    """Show a tool's description, annotations and argument schema."""
    state = state_of(ctx, config)
    done, data = forwarded(state, "describe", tool=tool)
    if not done:
        data = describe_data(open_runtime(state), tool)
    if data is None or "unknown" in data:  # hidden or missing: what a call of it says
        err().print(cell(data["unknown"] if data else f"unknown tool: {tool}"))
        raise typer.Exit(int(ExitCode.UNKNOWN_TOOL))
    hints = data.pop("hints")
    if state.json:
        emit_json(data)
        return
    out().print(cell(data["name"], "bold"), cell(", ".join(hints)), sep="  ")
    lines = (data["description"] or "(no description)").split("\n")  # each line escaped
    out().print(*map(cell, lines), sep="\n")
    out().print_json(json.dumps(data["input_schema"]))


def call(
    ctx: typer.Context,
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    pairs: Annotated[
        list[str] | None, typer.Argument(help="Arguments as key=value (typed by the schema).")
    ] = None,
    json_args: Annotated[
        str | None,
        typer.Option("--args", "--json", help="Arguments as one JSON object ('-': stdin)."),
    ] = None,
    config: ConfigOpt = None,
) -> None:
    """Call a tool as the local principal.

    A call that needs approval is never approved by its caller. On a terminal (no --json, no
    running server) it asks principals.terminal_approver when the config names one (or the
    caller with "approval: client"), else it waits for an approver's `toolcards approvals
    grant`; otherwise it fails closed with exit code 5.
    """
    raise typer.Exit(call_tool(state_of(ctx, config), tool, pairs, json_args))


def hash_token_command(
    ctx: typer.Context,
    token: Annotated[
        str | None, typer.Argument(help="Token to hash ('-': stdin; none: new).")
    ] = None,
) -> None:
    """Print the digest to store for an HTTP bearer token.

    Without a token, a new random one is made and printed with its digest."""
    if token == "-":
        token = sys.stdin.readline().strip()
    fresh = token is None
    value = new_token() if token is None else token
    digest = hash_token(value)
    if state_of(ctx).json:
        emit_json({"token": value if fresh else None, "token_sha256": digest})
        return
    if fresh:
        out().print(f"token: {value}", markup=False)
    out().print(f"token_sha256: {digest}", markup=False)
