"""How a card reaches the running system: observer protocols (narrowest first).

A card holds its observer by weak reference (``card.get_observer()``). A stateful card reaches
its team's actors only through an :class:`ActorToolObserver`; the runtime's team observer
implements all three protocols, and an owner that implements none of the team ones (a plain
agent) leaves the card to use the process's implicit team (``Team.implicit()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from toolcards.core.events import ToolStateEvent

if TYPE_CHECKING:
    from pydantic import BaseModel

    from toolcards.core.actors import ActorHandle

A = TypeVar("A")


@runtime_checkable
class ToolObserver(Protocol):
    """Receives the events a tool emits. Nothing more."""

    def notify_event(self, event: ToolStateEvent | Any) -> None:
        """Record or forward an event."""


@runtime_checkable
class ActorToolObserver(ToolObserver, Protocol):
    """An observer that also reaches its team's actors by name."""

    @property
    def address(self) -> str:
        """The name of the member (or process) that owns the card."""

    @property
    def team_id(self) -> str:
        """The team the owner belongs to."""

    def tool_actor(
        self, name: str, actor_cls: type[A], config: BaseModel | None = None
    ) -> ActorHandle[A]:
        """Get or create the team singleton ``name`` running ``actor_cls`` (atomic)."""

    def actor(self, name: str) -> ActorHandle[Any] | None:
        """The running team actor ``name``, or None."""


@runtime_checkable
class TeamManagementToolObserver(ActorToolObserver, Protocol):
    """An observer that may also change the team's membership."""

    def on_hire(self, role: str, name: str | None = None) -> str:
        """Hire a member for ``role``; returns its unique name."""

    def on_fire(self, name: str) -> None:
        """Stop and remove the member ``name``."""
