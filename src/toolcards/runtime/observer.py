"""The team-side observer: what a card bound inside a :class:`~toolcards.runtime.Team` holds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from toolcards.core.events import ToolStateEvent

if TYPE_CHECKING:
    from pydantic import BaseModel

    from toolcards.core.actors import ActorHandle
    from toolcards.runtime.host import TeamHost

A = TypeVar("A")


class TeamObserver:
    """The owner of cards bound by ``team.bind(cards, member=...)``.

    Implements ``ToolObserver``, ``ActorToolObserver`` and ``TeamManagementToolObserver``: the
    one path from a card to its team. Cards hold it weakly; the team keeps it alive until the
    team stops.
    """

    def __init__(self, team: TeamHost, address: str) -> None:
        self._team = team
        self._address = address

    @property
    def address(self) -> str:
        """The member name the cards belong to."""
        return self._address

    @property
    def team_id(self) -> str:
        return self._team.team_id

    @property
    def team(self) -> TeamHost:
        """The team itself (roster, profiles, events) for cards that manage it."""
        return self._team

    def notify_event(self, event: ToolStateEvent | Any) -> None:
        """Record ``event`` in the team log (a ToolStateEvent under its ``tool_id``, with its
        id, display type and sender, this member when it names none; anything else under this
        member's address); the log assigns the ``seq``."""
        if isinstance(event, ToolStateEvent):
            self._team.log.append(
                event.tool_id,
                event.payload,
                sender=event.sender or self._address,
                display_type=event.display_type,
                event_id=event.id,
            )
        else:
            self._team.log.append(self._address, event, sender=self._address)

    def tool_actor(
        self, name: str, actor_cls: type[A], config: BaseModel | None = None
    ) -> ActorHandle[A]:
        """Get or create the team singleton ``name`` (see ``Team.tool_actor``)."""
        return self._team.tool_actor(name, actor_cls, config, by=self._address)

    def actor(self, name: str) -> ActorHandle[Any] | None:
        """The running team actor ``name``, or None."""
        return self._team.actor(name)

    def on_hire(self, role: str, name: str | None = None) -> str:
        """Hire a member for ``role`` in this team; returns its unique name."""
        return self._team.hire(role, name)

    def on_fire(self, name: str) -> None:
        """Fire the member ``name`` (bounded stop; a ``LookupError`` when unknown)."""
        self._team.fire(name)

    def send_message(self, to: str, content: str) -> str:
        """Post ``content`` to the member ``to`` as this observer's member; returns the message
        id. When the sender is a member, the answer arrives later in its mailbox."""
        return self._team.post(to, content, sender=self._address, from_host=False).id

    def __repr__(self) -> str:
        return f"<TeamObserver {self._address} team={self.team_id}>"
