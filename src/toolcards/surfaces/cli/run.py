"""``toolcards list`` and ``toolcards call`` themselves, free of typer: the typer commands
(:mod:`.app`) and the console entry point's short path for plain command lines
(:func:`run_plain`, from :mod:`toolcards.surfaces.main`) both run these, so the two print,
decide and exit alike. A command that a running server answers loads neither the runtime
nor pydantic: :mod:`.operations` (the command run here) is imported only when none does."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

from toolcards._lazy import TYPE_CHECKING
from toolcards.surfaces.cli.args import ArgsError, parse_json, parse_pairs
from toolcards.surfaces.cli.extras import missing_extra
from toolcards.surfaces.cli.listing import Start, cached_rows, remember
from toolcards.surfaces.cli.state import (
    State,
    cell,
    emit_json,
    fail,
    out,
    print_error,
    print_json_text,
    print_rows,
    print_text,
)

if TYPE_CHECKING:  # a command forwarded to a running server loads neither
    from typing import Any, Literal, NoReturn

    from toolcards.surfaces.cli.control import ServerEndpoint

__all__ = ["call_tool", "end_for_missing_extra", "forwarded", "list_tools", "run_plain"]

FAIL_CLOSED_HINT = (
    "a caller cannot approve its own call: on a terminal it waits for a principal holding the "
    "approver role (`toolcards approvals grant ID` or the dashboard), or the config names the "
    "terminal's approver (principals.terminal_approver)"
)
"""What follows the message of a call that failed closed (``needs_approval``: nobody was
asked), made here or forwarded to a running server."""
NO_APPROVER_HINT = (
    "a caller cannot approve its own call, and no principal of {config} holds the approver "
    "role: add principals.terminal_approver: {{id: NAME, roles: [approver]}} to be asked on "
    "this terminal, or give a principal roles: [approver] to run `toolcards approvals grant ID`"
)
"""What follows it instead when the config names nobody who could ever approve the call."""


def _exit_code(name: Literal["USAGE", "FAILED"]) -> int:
    # lazy: governance's outcome table; a command a running server answers does without it
    from toolcards.surfaces.outcomes import ExitCode

    return int(ExitCode[name])


def forwarded(state: State, op: str, **fields: Any) -> tuple[bool, Any]:
    """(True, data) when a running server on this config answered ``op``."""
    server = state.server()
    if server is None:
        return False, None
    return True, _request(server, op, **fields)


def _request(server: ServerEndpoint, op: str, **fields: Any) -> Any:
    try:
        return server.request(op, **fields)
    except (OSError, RuntimeError, ValueError) as exc:
        fail(f"the running server did not answer: {exc}", _exit_code("FAILED"))


def list_tools(state: State, show_all: bool) -> None:
    """List the tools the local principal may call (``show_all``: the others too)."""
    done, rows = forwarded(state, "list", all=show_all)
    if not done:
        every = _local_rows(state)
        rows = [row for row in every if show_all or row["callable"]]
    if state.json:
        emit_json(rows, plain=True)
        return
    lines = [
        (str(r["name"]), ",".join([*r["hints"], *([] if r["callable"] else ["denied"])]) or "-",
         str(r["description"]))
        for r in rows
    ]  # fmt: skip
    if not sys.stdout.isatty():  # full values, one tool a line, for pipes and files
        print_rows(("tool", "hints", "description"), lines)
    else:
        from rich.table import Table  # lazy: rich, ~5x python -c pass; only for a terminal

        table = Table("tool", "hints", "description", box=None, pad_edge=False)
        table.columns[0].no_wrap = table.columns[1].no_wrap = True
        for name, tags, description in lines:  # a remote server's text: never read as markup
            style = "dim" if "denied" in tags.split(",") else ""
            table.add_row(cell(name, style), cell(tags), cell(description))
        out().print(table)
    if not rows:
        print_text("no tools for this principal", stderr=True)


def _local_rows(state: State) -> list[dict[str, Any]]:
    """Every tool's row (with ``callable``) as listed here: from the listing cache while it
    holds, else made from the config's runtime and remembered (:mod:`.listing`)."""
    if state.factory is None and (rows := cached_rows(state.config)) is not None:
        return rows
    began = Start()
    # lazy: the runtime (~25x python -c pass); a command a running server answers opens none
    from toolcards.surfaces.cli.operations import list_rows, open_runtime, static_listing

    rt = open_runtime(state)
    rows = list_rows(rt, show_all=True)
    if state.factory is None and rt.config is not None and static_listing(rt):
        remember(state.config, rt.config.policy_path, rows, began)
    return rows


def call_tool(state: State, tool: str, pairs: list[str] | None, json_args: str | None) -> int:
    """Call ``tool`` as the local principal, print the outcome; the exit code."""
    if pairs and json_args is not None:
        fail("give key=value pairs or --json, not both", _exit_code("USAGE"))
    server = state.server()
    if server is None:
        # lazy: the runtime (~25x python -c pass); a command a running server answers opens none
        from toolcards.surfaces.cli.calling import call_here

        data = call_here(state, tool, pairs, json_args)
    else:
        try:
            if json_args is not None:
                args = parse_json(json_args)
            else:
                args = parse_pairs(pairs or [], _request(server, "schema", tool=tool) or {})
        except ArgsError as exc:
            fail(str(exc), _exit_code("USAGE"))
        data = _request(server, "call", tool=tool, args=args)
    code = int(data.pop("exit_code"))
    if data.get("outcome") == "needs_approval" and not state.json:
        data["message"] += f" ({_fail_closed_hint(state)})"
    if state.json:
        emit_json(data, plain=server is not None)
    elif data["ok"]:
        if "note" in data:
            print_text(data["note"], stderr=True)
        _print_value(data["value"])
    else:
        print_text(data["message"], stderr=True)
    return code


def _fail_closed_hint(state: State) -> str:
    """:data:`NO_APPROVER_HINT` when no principal of the config (a token's, the terminal's
    approver; an OAuth issuer's could be anyone) holds the approver role but the caller,
    ``local`` (and its own tokens), who cannot approve its own call; else
    :data:`FAIL_CLOSED_HINT`: waiting for an approver nobody can be would be the wrong advice."""
    if state.factory is not None:  # a code-built runtime: no config to read
        return FAIL_CLOSED_HINT
    # lazy: the config model (pydantic); only a call that failed closed reads it again
    from toolcards.surfaces.config import APPROVER_ROLE, ConfigError, load_config

    try:
        principals = load_config(state.config).principals
    except ConfigError:
        return FAIL_CLOSED_HINT
    caller = principals.local.id if principals.local is not None else None
    others = [p for p in (principals.terminal_approver, *principals.tokens) if p and p.id != caller]
    if principals.oauth is not None or any(APPROVER_ROLE in p.roles for p in others):
        return FAIL_CLOSED_HINT
    return NO_APPROVER_HINT.format(config=state.config)


def _print_value(value: Any) -> None:
    """A call's value (JSON-ready): text, anything else as indented JSON; on a terminal
    escaped line by line (:func:`.state.print_text`), elsewhere as it is, for scripts."""
    if isinstance(value, str):
        print_text(value)
        return
    print_json_text(json.dumps(value, ensure_ascii=False, indent=2))


def end_for_missing_extra(exc: BaseException) -> None:
    """When ``exc`` says an optional part is not installed: one line naming its extra, and
    exit code 2 (the caller raises ``exc`` otherwise)."""
    line = missing_extra(exc)
    if line is None:
        return
    print_error(line)
    raise SystemExit(_exit_code("USAGE")) from None


def run_plain(command: str, root: dict[str, Any], sub: dict[str, Any]) -> NoReturn:
    """Run a plain ``list`` or ``call`` (as :mod:`toolcards.surfaces.main` read its command
    line) without typer, as the full command line runs it: same state, output, exit codes
    (an interrupted one ends as click ends it)."""
    config = sub.get("config") or root.get("config") or os.environ.get("TOOLCARDS_CONFIG")
    state = State(config=Path(config or "toolcards.yaml"), json=bool(root.get("--json")))
    code = 0
    try:
        if command == "list":
            list_tools(state, bool(sub.get("--all")))
        else:
            tool, *pairs = sub[""]
            code = call_tool(state, tool, pairs or None, sub.get("args"))
    except KeyboardInterrupt:
        sys.stderr.write("\nAborted!\n")
        code = 1
    except Exception as exc:
        code = _failed(exc)
    finally:
        state.close()
    raise SystemExit(code)


def _failed(exc: Exception) -> int:
    """The exit code of a command that raised ``exc``, as under typer; raises the others."""
    typer = sys.modules.get("typer")  # loaded by a command that failed (state.fail)
    if typer is not None and isinstance(exc, typer.Exit):
        return int(exc.exit_code)
    if isinstance(exc, OSError) and exc.errno == errno.EPIPE:  # the reader went away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    end_for_missing_extra(exc)
    raise exc
