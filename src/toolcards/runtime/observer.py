"""The team-side observer: what a card bound inside a :class:`~toolcards.runtime.Team` holds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from toolcards.core.events import ToolStateEvent
from toolcards.runtime.system import DEFAULT_ASK_TIMEOUT, ActorHandle, ActorUnavailable

if TYPE_CHECKING:
    from toolcards.runtime.team import Team
    from toolcards.runtime.tool_actor import ToolActor


class TeamObserver:
    """The owner of cards bound by ``team.bind(cards, member=...)``.

    Implements ``ToolObserver``, ``ActorToolObserver`` and ``TeamManagementToolObserver``.
    Cards hold it weakly; the team keeps it alive until the team stops.
    """

    def __init__(self, team: Team, address: str) -> None:
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
    def team(self) -> Team:
        return self._team

    def notify_event(self, event: ToolStateEvent | Any) -> None:
        """Record ``event`` in the team log (a ToolStateEvent under its ``tool_id``, anything
        else under this member's address); the log assigns the ``seq``."""
        if isinstance(event, ToolStateEvent):
            self._team.log.append(event.tool_id, event.payload)
        else:
            self._team.log.append(self._address, event)

    def proxy_ask(
        self, actor: str, method: str, *args: Any, timeout: float | None = None, **kwargs: Any
    ) -> Any:
        """Call ``method`` on the team actor ``actor``; waits at most ``timeout`` seconds."""
        handle = self._team.actor(actor)
        if handle is None:
            raise ActorUnavailable(f"team {self.team_id} has no actor named {actor!r}")
        return handle.ask(method, *args, timeout=timeout or DEFAULT_ASK_TIMEOUT, **kwargs)

    def tool_actor(
        self, name: str, actor_cls: type[ToolActor], config: BaseModel | None = None
    ) -> ActorHandle:
        """Get or create the team singleton ``name`` (see ``Team.tool_actor``)."""
        return self._team.tool_actor(name, actor_cls, config)

    def create_actor(self, name: str, factory: Any, config: Any = None) -> Any:
        return self._team.tool_actor(name, factory, config)

    def on_hire(self, role: str, name: str | None = None) -> str:
        """Hire a member for ``role`` in this team; returns its unique name."""
        return self._team.hire(role, name)

    def on_fire(self, name: str) -> None:
        """Fire the member ``name`` (bounded stop; a ``LookupError`` when unknown)."""
        self._team.fire(name)

    def send_message(self, to: str, content: str) -> str:
        """Post ``content`` to the member ``to`` as this observer's member; returns the message
        id. When the sender is a member, the answer arrives later in its mailbox."""
        return self._team.post(to, content, sender=self._address).id

    def __repr__(self) -> str:
        return f"<TeamObserver {self._address} team={self.team_id}>"
