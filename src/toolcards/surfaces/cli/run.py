"""``toolcards list`` and ``toolcards call`` themselves, free of typer: the typer commands
(:mod:`.app`) and the console entry point's short path for plain command lines
(:mod:`toolcards.surfaces.main`) both run these, so the two print, decide and exit alike."""

from __future__ import annotations

import sys

from toolcards._lazy import TYPE_CHECKING
from toolcards.surfaces.cli.state import (
    State,
    emit_json,
    err,
    fail,
    out,
    print_json_text,
    print_rows,
    print_text,
)

if TYPE_CHECKING:  # a command forwarded to a running server loads neither
    from typing import Any

__all__ = ["call_tool", "end_for_missing_extra", "forwarded", "list_tools", "stdin_is_tty"]


def forwarded(state: State, op: str, **fields: Any) -> tuple[bool, Any]:
    """(True, data) when a running server on this config answered ``op``."""
    server = state.server()
    if server is None:
        return False, None
    try:
        return True, server.request(op, **fields)
    except (OSError, RuntimeError, ValueError) as exc:
        from toolcards.surfaces.outcomes import ExitCode

        fail(f"the running server did not answer: {exc}", ExitCode.FAILED)


def list_tools(state: State, show_all: bool) -> None:
    """List the tools the local principal may call (``show_all``: the others too)."""
    done, rows = forwarded(state, "list", all=show_all)
    if not done:
        from toolcards.surfaces.cli.operations import list_rows

        rows = list_rows(state.runtime(), show_all)
    if state.json:
        emit_json(rows, plain=done)
        return
    lines = [
        (str(r["name"]), ",".join([*r["hints"], *([] if r["callable"] else ["denied"])]) or "-",
         str(r["description"]))
        for r in rows
    ]  # fmt: skip
    if not sys.stdout.isatty():  # full values, one tool a line, for pipes and files
        print_rows(("tool", "hints", "description"), lines)
    else:
        from rich.table import Table

        table = Table("tool", "hints", "description", box=None, pad_edge=False)
        table.columns[0].no_wrap = table.columns[1].no_wrap = True
        for name, tags, description in lines:
            shown = f"[dim]{name}[/dim]" if "denied" in tags.split(",") else name
            table.add_row(shown, tags, description)
        out().print(table)
    if not rows:
        print_text("no tools for this principal", stderr=True)


def _approver(state: State, rt: Any, status: Any) -> Any:
    """Who decides an approval-required call (see :mod:`.prompt`): never the caller
    unless ``approval: client``; None fails the call closed."""
    from toolcards.surfaces.cli.prompt import call_approver

    interactive = not state.json and stdin_is_tty()
    return call_approver(rt, interactive=interactive, status=status)


def stdin_is_tty() -> bool:
    return sys.stdin.isatty()


def call_tool(state: State, tool: str, pairs: list[str] | None, json_args: str | None) -> int:
    """Call ``tool`` as the local principal, print the outcome; the exit code."""
    from toolcards.surfaces.cli.args import ArgsError, parse_json, parse_pairs

    if pairs and json_args is not None:
        from toolcards.surfaces.outcomes import ExitCode

        fail("give key=value pairs or --json, not both", ExitCode.USAGE)
    server = state.server()
    rt = None if server is not None else state.runtime()
    try:
        if json_args is not None:
            args = parse_json(json_args)
        elif rt is not None:
            from toolcards.surfaces.cli.operations import schema_of

            args = parse_pairs(pairs or [], schema_of(rt, tool))
        else:
            args = parse_pairs(pairs or [], forwarded(state, "schema", tool=tool)[1] or {})
    except ArgsError as exc:
        from toolcards.surfaces.outcomes import ExitCode

        fail(str(exc), ExitCode.USAGE)
    if rt is None:
        data = forwarded(state, "call", tool=tool, args=args)[1]
    else:  # asyncio only here: a call forwarded to a running server does without it
        import asyncio
        import contextlib

        from toolcards.surfaces.cli.operations import call_data

        spinner = sys.stdout.isatty() and not state.json
        status = err().status(f"calling {tool}...") if spinner else None
        approver = _approver(state, rt, status)
        with status if status is not None else contextlib.nullcontext():
            data = asyncio.run(call_data(rt, tool, args, approver))
        if approver is None and data.get("outcome") == "needs_approval" and not state.json:
            from toolcards.surfaces.cli.prompt import FAIL_CLOSED_HINT

            data["message"] += f" ({FAIL_CLOSED_HINT})"
    code = int(data.pop("exit_code"))
    if state.json:
        emit_json(data, plain=rt is None)
    elif data["ok"]:
        if "note" in data:
            print_text(data["note"], stderr=True)
        _print_value(data["value"], plain=rt is None)
    else:
        print_text(data["message"], stderr=True)
    return code


def _print_value(value: Any, plain: bool) -> None:
    """A call's value; ``plain``: JSON already (a running server's answer)."""
    if isinstance(value, str):
        print_text(value)
        return
    if plain:
        import json

        text = json.dumps(value, ensure_ascii=False, indent=2)
    else:
        from toolcards.surfaces.outcomes import render_value

        text = render_value(value)[0]
    print_json_text(text)


def end_for_missing_extra(exc: BaseException) -> None:
    """When ``exc`` says an optional part is not installed: one line naming its extra, and
    exit code 2 (the caller raises ``exc`` otherwise)."""
    from toolcards.surfaces.cli.extras import missing_extra

    line = missing_extra(exc)
    if line is None:
        return
    from rich.markup import escape

    from toolcards.surfaces.outcomes import ExitCode

    err().print(f"[red]error:[/red] {escape(line)}", markup=True, highlight=False)
    raise SystemExit(int(ExitCode.USAGE)) from None
