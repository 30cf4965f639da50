"""What every ``toolcards`` command shares: the per-invocation state (config, output mode,
the runtime it opened), error exits, JSON output and the two consoles (created on first use:
importing rich costs more than a ``--help`` may take). Free of typer, so ``list`` and
``call`` can run without it (:mod:`.run`); the typer options are in :mod:`.options`."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from toolcards.surfaces.outcomes import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from toolcards.surfaces.runtime import SurfaceRuntime


@cache
def out() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


@cache
def err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass
class State:
    config: Path = Path("toolcards.yaml")
    json: bool = False
    factory: Callable[[bool], SurfaceRuntime] | None = None
    opened: list[SurfaceRuntime] = field(default_factory=list)

    def runtime(self, with_team: bool = False) -> SurfaceRuntime:
        """The runtime for this command (config and store problems end the command)."""
        import sqlite3

        from toolcards.runtime.system import ActorSystemUnavailable
        from toolcards.stores.base import DatabaseUnavailable, StoreError, StoreLockedError
        from toolcards.surfaces.config import ConfigError
        from toolcards.surfaces.runtime import SurfaceRuntime

        try:
            if self.factory is not None:
                rt = self.factory(with_team)
            else:
                rt = SurfaceRuntime.open(self.config, with_team=with_team or None)
        except ConfigError as exc:
            fail(str(exc), ExitCode.USAGE)
        except StoreLockedError as exc:
            fail(f"{exc} (is `toolcards serve` running on this config?)", ExitCode.FAILED)
        except StoreError as exc:
            fail(f"{exc} (store: in {self.config})", ExitCode.FAILED)
        except sqlite3.Error as exc:  # the audit log's file
            fail(
                f"{self._audit_where()}: {exc}; give a file path in a writable folder",
                ExitCode.FAILED,
            )
        except (DatabaseUnavailable, ActorSystemUnavailable) as exc:
            fail(str(exc), ExitCode.FAILED)
        self.opened.append(rt)
        return rt

    def _audit_where(self) -> str:
        from toolcards.surfaces.config import ConfigError, load_config

        try:
            path = load_config(self.config).audit_path
            return f"cannot open the audit log {path} (audit: in {self.config})"
        except ConfigError:
            return "cannot open the audit log"

    def server(self) -> Any:
        """A running ``toolcards serve`` on this config to forward to, or None."""
        if self.factory is not None:
            return None
        from toolcards.surfaces.control import find_server

        return find_server(self.config)

    def close(self) -> None:
        while self.opened:
            self.opened.pop().close()


def fail(message: str, code: ExitCode) -> NoReturn:
    import typer  # only when failing: the commands that run without typer pay it then

    err().print(f"[red]error:[/red] {message}", markup=True, highlight=False)
    raise typer.Exit(int(code))


def print_rows(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Rows as tab-separated lines with every value in full (for output that is not a
    terminal: nothing is cut or wrapped); tabs and line breaks inside values become spaces."""
    for row in (header, *rows):
        sys.stdout.write("\t".join(" ".join(str(v).split()) for v in row) + "\n")


_RICH_CHANGES = re.compile(r":\S*:|\t")  # what rich would rewrite: emoji codes, tabs


def print_text(text: str) -> None:
    """``text`` on stdout as ``out().print(text, markup=False)`` prints it. Written
    directly when stdout is no terminal and rich would change nothing (no tabs, control
    characters or ``:emoji:`` codes): importing rich costs more than a tool call."""
    if (
        sys.stdout.isatty()
        or _RICH_CHANGES.search(text)
        or not text.replace("\n", "").isprintable()
    ):
        out().print(text, markup=False)
        return
    sys.stdout.write(text + "\n")


def emit_json(data: Any) -> None:
    from pydantic_core import to_jsonable_python

    sys.stdout.write(json.dumps(to_jsonable_python(data, fallback=str), ensure_ascii=False))
    sys.stdout.write("\n")
