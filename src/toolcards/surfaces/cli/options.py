"""The typer side of the per-invocation state: the root options (``--config``, ``--json``,
``--version``), the ``--config`` option every command takes and the
:class:`~toolcards.surfaces.cli.state.State` a command's context carries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolcards._version import package_version
from toolcards.surfaces.cli.logs import escaped_logs
from toolcards.surfaces.cli.state import State, out

__all__ = ["ConfigOpt", "root", "state_of"]

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Config file (default ./toolcards.yaml).", show_default=False
    ),
]


def state_of(ctx: typer.Context, config: Path | None = None) -> State:
    state = ctx.find_root().obj
    if not isinstance(state, State):
        state = ctx.find_root().obj = State()
    if config is not None and state.factory is None:
        state.config = config
    return state


def _version(value: bool) -> None:
    if value:
        out().print(f"toolcards {package_version()}", markup=False)
        raise typer.Exit(0)


def root(
    ctx: typer.Context,
    config: Annotated[
        Path, typer.Option("--config", "-c", help="Config file.", envvar="TOOLCARDS_CONFIG")
    ] = Path("toolcards.yaml"),
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_version
        ),
    ] = False,
) -> None:
    """The options before the command: every command reads them from its context's state;
    its log lines are escaped (:func:`.logs.escaped_logs`)."""
    escaped_logs()
    state = state_of(ctx, config)
    if state.factory is None:
        state.config = config
    state.json = json_out
    ctx.call_on_close(state.close)
