"""The main job's steps as they happen, on stderr (the report follows on stdout): a line per
hire and per member turn, with a spinner while a member works when stderr is a terminal."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

HEADER = "toolcards main job: the team at work (the report follows)"


class Steps:
    """Prints each step once it starts; the header comes with the first one."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self._started = False

    def _header(self) -> None:
        if not self._started:
            self._started = True
            self.console.print(f"[bold]{HEADER}[/bold]")

    @contextlib.contextmanager
    def opening(self) -> Iterator[None]:
        """While the team opens: on a terminal, a line that goes away again (an error that
        ends the job stays its only output); elsewhere nothing."""
        if not self.console.is_terminal:
            yield
            return

        line = Text("toolcards main job: opening the team...")
        with Live(line, console=self.console, transient=True):
            yield

    def note(self, text: str) -> None:
        """One step that is already done (a hire, a resume)."""
        self._header()
        self.console.print(f"  {escape(text)}")

    @contextlib.contextmanager
    def turn(self, member: str, text: str) -> Iterator[None]:
        """A member's turn: its line now, a spinner while it works, the time it took."""
        self._header()
        short = text if len(text) <= 60 else text[:57] + "..."
        self.console.print(f"  {escape(member)} <- {escape(short)}")
        started = time.monotonic()
        with self.console.status(f"{escape(member)} is working", spinner="dots"):
            yield
        self.console.print(f"  {escape(member)} answered ({time.monotonic() - started:.1f} s)")
