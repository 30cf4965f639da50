"""``toolcards call`` made in this process (no running server answers it): the config's
runtime opened, the arguments read, the approver chosen (:mod:`.prompt`) and the call made
through the executor; :mod:`.run` prints the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from toolcards.surfaces.cli.args import ArgsError, parse_json, parse_pairs
from toolcards.surfaces.cli.operations import call_data, open_runtime, schema_of
from toolcards.surfaces.cli.prompt import call_approver
from toolcards.surfaces.cli.state import State, cell, err, fail
from toolcards.surfaces.outcomes import ExitCode

__all__ = ["call_here"]


def call_here(
    state: State, tool: str, pairs: list[str] | None, json_args: str | None
) -> dict[str, Any]:
    """``toolcards call`` in this process: the runtime opened, the arguments read (pairs typed
    by the tool's schema), the approver chosen (see :mod:`.prompt`), the call made; its
    outcome as :func:`call_data` gives it."""
    rt = open_runtime(state)
    try:
        if json_args is not None:
            args = parse_json(json_args)
        else:
            args = parse_pairs(pairs or [], schema_of(rt, tool))
    except ArgsError as exc:
        fail(str(exc), ExitCode.USAGE)
    spinner = sys.stdout.isatty() and not state.json
    status = err().status(cell(f"calling {tool}...")) if spinner else None  # never markup
    interactive = not state.json and sys.stdin.isatty()
    approver = call_approver(rt, interactive=interactive, status=status)
    with status if status is not None else contextlib.nullcontext():
        return asyncio.run(call_data(rt, tool, args, approver))
