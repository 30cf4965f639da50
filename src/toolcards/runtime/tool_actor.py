"""Tool actors: the one-per-team home of a stateful tool's state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from toolcards.core.events import ToolStateEvent
from toolcards.runtime.events import EventLog
from toolcards.runtime.store import StateNamespace

if TYPE_CHECKING:
    from toolcards.runtime.team import Team


class ToolActorContext:
    """What a tool actor gets from its team: its name, durable state and the event log."""

    def __init__(self, name: str, team: Team, state: StateNamespace, log: EventLog) -> None:
        self.name = name
        self.team = team
        self.team_id = team.team_id
        self.state = state
        self._log = log

    def emit(self, payload: Any) -> ToolStateEvent | None:
        """Append a delta of this actor's state to the team log, before the call returns.

        ``seq`` counts per actor from 1 without gaps; an empty payload records nothing and
        returns None. Inside ``with state.batch():`` the event commits with the state change.
        """
        return self._log.append(self.name, payload)

    def stop_self(self) -> None:
        """Stop this actor once the current call returns (short-lived actors end this way)."""
        self.team.system.stop_later(self.name)

    def __repr__(self) -> str:
        return f"<ToolActorContext {self.name} team={self.team_id}>"


class ToolActor:
    """Base class of a stateful team-singleton tool actor.

    Its public methods run one at a time on the actor's own thread, so they read, modify and
    write state without locks. Callers reach them with ``handle.ask("method", ...)``. Never do
    slow I/O (HTTP, embeddings, subprocesses) here: it would block every member queued behind
    it; use :mod:`toolcards.runtime.deferred` instead.
    """

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        self.ctx = ctx
        self.config = config

    @property
    def name(self) -> str:
        return self.ctx.name

    @property
    def state(self) -> StateNamespace:
        return self.ctx.state

    def emit(self, payload: Any) -> ToolStateEvent | None:
        """Shortcut for ``self.ctx.emit(payload)``."""
        return self.ctx.emit(payload)

    def on_start(self) -> None:
        """Load state from ``self.ctx.state`` (runs on the actor's thread before any call)."""

    def on_stop(self) -> None:
        """Release resources (runs on the actor's thread after the last call)."""
