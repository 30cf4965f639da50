"""How a card reaches the running system: observer protocols (narrowest first)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from toolcards.core.events import ToolStateEvent


@runtime_checkable
class ToolObserver(Protocol):
    """Receives the events a tool emits. Nothing more."""

    def notify_event(self, event: ToolStateEvent | Any) -> None:
        """Record or forward an event."""


@runtime_checkable
class ActorToolObserver(ToolObserver, Protocol):
    """An observer that can also reach team actors by name."""

    @property
    def address(self) -> str:
        """The name of the member (or process) that owns the card."""

    @property
    def team_id(self) -> str:
        """The team the owner belongs to."""

    def proxy_ask(
        self, actor: str, method: str, *args: Any, timeout: float | None = None, **kwargs: Any
    ) -> Any:
        """Call ``method`` on the actor named ``actor`` and wait (bounded) for its answer."""


@runtime_checkable
class TeamManagementToolObserver(ActorToolObserver, Protocol):
    """An observer that may create actors and change the team's membership."""

    def create_actor(self, name: str, factory: Any, config: Any = None) -> Any:
        """Get or create the team singleton ``name``."""

    def on_hire(self, role: str, name: str | None = None) -> str:
        """Hire a member for ``role``; returns its unique name."""

    def on_fire(self, name: str) -> None:
        """Stop and remove the member ``name``."""
