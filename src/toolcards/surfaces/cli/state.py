"""What every ``toolcards`` command shares: the per-invocation state (config, output mode,
the runtimes it opened), error exits, JSON output and the two consoles (created on first
use: importing rich costs more than a ``--help`` may take). Free of typer, so ``list`` and
``call`` can run without it (:mod:`.run`); the typer options are in :mod:`.options`, and
opening the config's runtime is :func:`.operations.open_runtime`."""

from __future__ import annotations

import json
import os
import re
import sys
from functools import cache
from pathlib import Path

from toolcards._lazy import TYPE_CHECKING
from toolcards.surfaces.cli.control import ServerEndpoint, find_server

if TYPE_CHECKING:  # a command forwarded to a running server loads none of these
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    from rich.console import Console
    from rich.text import Text

    from toolcards.surfaces.runtime import SurfaceRuntime


@cache
def out() -> Console:
    from rich.console import Console  # lazy: rich, ~5x python -c pass; plain output skips it

    return Console(highlight=False, soft_wrap=True)


@cache
def err() -> Console:
    from rich.console import Console  # lazy: rich, ~5x python -c pass; plain output skips it

    return Console(stderr=True, highlight=False, soft_wrap=True)


class State:
    """One command's config, output mode (``json``), the runtime ``factory`` of a code-built
    CLI (None: open the config) and the runtimes it opened."""

    def __init__(
        self,
        config: Path = Path("toolcards.yaml"),
        json: bool = False,
        factory: Callable[[bool], SurfaceRuntime] | None = None,
    ) -> None:
        self.config = config
        self.json = json
        self.factory = factory
        self.opened: list[SurfaceRuntime] = []

    def built(self, with_team: bool = False) -> SurfaceRuntime | None:
        """The runtime of a code-built command line (its ``factory``), closed with the state;
        None when the command opens the config's (:func:`.operations.open_runtime`)."""
        if self.factory is None:
            return None
        rt = self.factory(with_team)
        self.opened.append(rt)
        return rt

    def server(self) -> ServerEndpoint | None:
        """A running ``toolcards serve`` on this config to forward to, or None."""
        if self.factory is not None:
            return None
        return find_server(self.config)

    def close(self) -> None:
        while self.opened:
            self.opened.pop().close()


def fail(message: str, code: int) -> NoReturn:
    """End the command with ``message`` and exit code ``code`` (an :class:`ExitCode`)."""
    import typer  # lazy: typer, ~5x python -c pass; list and call without it pay it on failing

    print_error(message)
    raise typer.Exit(int(code))


def print_error(message: str) -> None:
    """``error: message`` on stderr, ``message`` :func:`shown`: it quotes data (a config key,
    a card type, a path), which must neither act on the terminal nor be read as markup."""
    from rich.text import Text  # lazy: rich, as err()

    err().print(Text.assemble(("error:", "red"), " ", shown(message)))


def shown(value: object) -> str:
    """Data (a stored tool name or principal, a remote tool's description, a config key) as a
    terminal or a pipe shows it: on one line, escaped as ``approvals list`` shows a caller
    (:func:`~toolcards.governance.approvals.view.escaped_line`), so that no escape sequence,
    carriage return or line break in it acts on the terminal or reads as other text.
    Printable ASCII without a backslash, the usual case, is itself: importing the escaping
    (pydantic_core) costs more than a forwarded ``list``."""
    text = str(value)
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    from toolcards.governance.approvals.view import escaped_line  # lazy: see above

    return escaped_line(text)


def cell(value: object, style: str = "") -> Text:
    """``value`` :func:`shown`, as rich Text (a table's cell, a line): never read as markup."""
    from rich.text import Text  # lazy: rich, as out()

    return Text(shown(value), style=style)


def prose(value: object) -> Text:
    """Text that may run over lines (a model's answer, a tool's value) as rich Text: each piece
    between its line breaks and tabs :func:`shown` (no markup, no escape sequence), the breaks
    and tabs kept (rich writes a tab as spaces), so a file's lines still read as lines."""
    from rich.text import Text  # lazy: rich, as out()

    lines = ("\t".join(map(shown, line.split("\t"))) for line in str(value).split("\n"))
    return Text("\n".join(lines))


def print_rows(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Rows as tab-separated lines with every value in full (for output that is not a
    terminal: nothing is cut or wrapped), each :func:`shown` (a tab or a line break inside a
    value is written ``\\t`` or ``\\n``)."""
    for row in (header, *rows):
        sys.stdout.write("\t".join(shown(v) for v in row) + "\n")


_RICH_CHANGES = re.compile(r":\S*:|\t")  # what rich would rewrite: emoji codes, tabs


def print_text(text: str, stderr: bool = False) -> None:
    """``text`` (a tool's value, a call's message: data) on stdout (``stderr``: on stderr).
    On a terminal as :func:`prose`, so that no escape sequence in it acts on the terminal;
    elsewhere as ``out().print(text, markup=False)`` (``err()``) prints it, which keeps it
    as it is for a script. Written directly when the stream is no terminal and rich would
    change nothing (no tabs, control characters or ``:emoji:`` codes): importing rich costs
    more than a tool call."""
    stream = sys.stderr if stderr else sys.stdout
    if _unchanged_by_rich(stream, text):
        stream.write(text + "\n")
        return
    console = err() if stderr else out()
    console.print(prose(text) if console.is_terminal else text, markup=False)


def print_json_text(text: str) -> None:
    """Indented JSON ``text`` on stdout as ``out().print_json(text)`` prints it (written
    directly when rich would change nothing, as :func:`print_text` decides). On a terminal
    every hidden character is written as its JSON escape (as ``approvals show`` writes
    arguments): the same JSON, of which nothing acts on the terminal."""
    if _unchanged_by_rich(sys.stdout, text):
        sys.stdout.write(text + "\n")
        return
    if not out().is_terminal:
        out().print_json(text)
        return
    from rich.highlighter import JSONHighlighter  # lazy: rich, as out()
    from rich.text import Text  # lazy: rich, as out()

    from toolcards.governance.approvals.view import escaped_json  # lazy: as in shown()

    escaped = escaped_json(text)
    out().print(JSONHighlighter()(Text(escaped)))


def _unchanged_by_rich(stream: Any, text: str) -> bool:
    """Whether rich would print ``text`` to ``stream`` as it is: no terminal (nor one
    forced by the environment), no tabs, control characters or ``:emoji:`` codes."""
    return (
        not stream.isatty()
        and not os.environ.get("FORCE_COLOR")
        and os.environ.get("TTY_COMPATIBLE") != "1"
        and not _RICH_CHANGES.search(text)
        and text.replace("\n", "").isprintable()
    )


def emit_json(data: Any, plain: bool = False) -> None:
    """``data`` as one JSON line; ``plain``: data that is JSON already (decoded from a
    running server's answer), which needs no conversion."""
    if not plain:
        from pydantic_core import to_jsonable_python  # lazy: a forwarded answer is JSON already

        data = to_jsonable_python(data, fallback=str)
    sys.stdout.write(json.dumps(data, ensure_ascii=False))
    sys.stdout.write("\n")
