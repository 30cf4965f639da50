"""The whole ``toolcards`` command line: a table from each command's name to the function
(or the group of subcommands) that runs it, with the first paragraph of its help.

A command's module is imported when the command runs (:class:`CommandTable`), so the
modules of the command line import what they need at the top, ``toolcards --help`` lists
the commands from the table without importing any of them, and a command needing an
optional part fails, naming its extra, only when it runs. The table holds the CLI wing's
commands and those the other wings contribute: ``serve`` (the MCP server) and
``dashboard``. This module composes the wings (the architecture test allows it, and no wing
imports it); :mod:`toolcards.surfaces.main` is the console entry point that imports it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
from gettext import gettext as _
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_group_from_info
from typer.models import CommandInfo, TyperInfo

from toolcards.surfaces.cli.options import root
from toolcards.surfaces.cli.run import end_for_missing_extra
from toolcards.surfaces.cli.state import State

__all__ = ["COMMANDS", "Command", "CommandTable", "State", "app", "help_text", "main"]


class Command(NamedTuple):
    """Where a command is (``module:attribute``: a typer command function, or a
    ``typer.Typer`` of subcommands) and the first paragraph of its help."""

    target: str
    summary: str


COMMANDS = {
    "list": Command(
        "toolcards.surfaces.cli.app:list_command", "List the tools the local principal may call."
    ),
    "describe": Command(
        "toolcards.surfaces.cli.app:describe",
        "Show a tool's description, annotations and argument schema.",
    ),
    "call": Command("toolcards.surfaces.cli.app:call", "Call a tool as the local principal."),
    "hash-token": Command(
        "toolcards.surfaces.cli.app:hash_token_command",
        "Print the digest to store for an HTTP bearer token.",
    ),
    "init": Command(
        "toolcards.surfaces.cli.init:init",
        "Write a minimal, commented toolcards.yaml and policy.yaml here.",
    ),
    "serve": Command(
        "toolcards.surfaces.serving:serve",
        "Serve the configured tools over MCP (stdio or HTTP).",
    ),
    "dashboard": Command(
        "toolcards.surfaces.dashboard.cli:dashboard", "Serve the team dashboard in a browser."
    ),
    "audit": Command("toolcards.surfaces.cli.audit:audit_app", "Read and verify the audit trail."),
    "team": Command("toolcards.surfaces.cli.team:team_app", "Inspect the team."),
    "approvals": Command(
        "toolcards.surfaces.cli.grants:approvals_app",
        "Decide waiting calls (list, show, grant, deny), and grants.",
    ),
    "budgets": Command(
        "toolcards.surfaces.cli.budgets:budgets",
        "What each budget of the team has spent and has left.",
    ),
}
"""Every command, in the order ``--help`` lists them."""

_SHORT_EXCEPTIONS = True
_MARKUP = None  # plain help text: no rich panels


class CommandTable(TyperGroup):
    """The root group: its commands are :data:`COMMANDS`, each loaded when it is asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = COMMANDS.get(cmd_name)
        return None if entry is None else loaded(cmd_name, entry.target)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list, as click writes it, from the table's summaries (no command's
        module is imported to list them)."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, TyperCommand(name, help=entry.summary).get_short_help_str(limit))
            for name, entry in COMMANDS.items()
        ]
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)


@functools.cache
def loaded(name: str, target: str) -> Any:
    """The click command ``name`` of ``target`` (``module:attribute``), its module imported."""
    module, _sep, attribute = target.partition(":")
    # lazy: the command table's one boundary: a command's module loads when it runs
    found = getattr(importlib.import_module(module), attribute)
    if isinstance(found, typer.Typer):
        return get_group_from_info(
            TyperInfo(found, name=name),
            pretty_exceptions_short=_SHORT_EXCEPTIONS,
            rich_markup_mode=_MARKUP,
            suggest_commands=True,
        )
    return get_command_from_info(
        CommandInfo(name=name, callback=found),
        pretty_exceptions_short=_SHORT_EXCEPTIONS,
        rich_markup_mode=_MARKUP,
    )


app = typer.Typer(
    name="toolcards",
    cls=CommandTable,
    callback=root,
    help="Governed tools from the command line, and as an MCP server.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_short=_SHORT_EXCEPTIONS,
    rich_markup_mode=_MARKUP,
    epilog=(
        "Exit codes: 0 ok, 1 tool failure, 2 usage or config error, 3 denied, 4 invalid input, "
        "5 needs approval or refused, 6 rate limited, 7 unknown tool, 8 policy error, "
        "9 refused by a guardrail, 10 over budget."
    ),
)


def main(argv: list[str] | None = None) -> None:
    """Run the command line on ``argv`` (default: the process's arguments). A command that
    needs an optional part that is not installed ends in one line naming the extra."""
    try:
        app(args=argv, prog_name="toolcards")
    except Exception as exc:
        end_for_missing_extra(exc)
        raise


def help_text() -> str:
    """``toolcards --help`` as the command line prints it."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        app(args=["--help"], prog_name="toolcards")
    return buffer.getvalue()
