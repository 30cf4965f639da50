"""The typer side of the per-invocation state: the ``--config`` option every command takes
and the :class:`~toolcards.surfaces.cli.state.State` a command's context carries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolcards.surfaces.cli.state import State

__all__ = ["ConfigOpt", "state_of"]

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
