"""What the parts of a team need from the team that owns them: two small host protocols.

:class:`~toolcards.runtime.Team` implements both. Tool actors, observers, the member roster and
member actors hold their team through these protocols only, so none of them imports the team
module (no import circles), and a tool actor may run where the whole ``Team`` object does not
exist (a worker process of a distributed actor system gives it a host of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from toolcards.core.actors import ActorHandle

if TYPE_CHECKING:
    from pydantic import BaseModel

    from toolcards.core.card import ToolCard
    from toolcards.core.events import ToolStateEvent
    from toolcards.core.factory import ToolFactory
    from toolcards.core.trust import HostTrust
    from toolcards.governance.approvals.broker import Approver
    from toolcards.governance.audit.log import AuditLog
    from toolcards.governance.policy.policy import Policy
    from toolcards.runtime.events import EventLog
    from toolcards.runtime.messaging import MemberInfo, MemberMessage
    from toolcards.runtime.profiles import RoleProfile
    from toolcards.stores.base import BudgetStore, StateNamespace

A = TypeVar("A")


class ActorHost(Protocol):
    """What a tool actor reaches through ``self.ctx.team``."""

    @property
    def team_id(self) -> str:
        """The team's id."""

    @property
    def running(self) -> bool:
        """False once the team is stopping or stopped."""

    @property
    def shared(self) -> bool:
        """True when other processes may hold this team at the same time (its store)."""

    @property
    def log(self) -> EventLog:
        """The team's event log."""

    def state_of(self, name: str) -> StateNamespace:
        """The durable key/value state of the actor ``name``."""

    def actor(self, name: str) -> ActorHandle[Any] | None:
        """The running actor ``name``, or None."""

    def tool_actor(
        self,
        name: str,
        actor_cls: type[A],
        config: BaseModel | None = None,
        *,
        by: str | None = None,
    ) -> ActorHandle[A]:
        """Get or create the team singleton ``name`` (``by``: the member binding it)."""

    def stop_later(self, name: str) -> None:
        """Stop the actor ``name`` once its queued messages are handled (returns at once)."""

    def is_member(self, name: str) -> bool:
        """True when ``name`` is on the roster."""

    def post(
        self, to: str, content: str, *, sender: str = ..., from_host: bool = ...
    ) -> MemberMessage:
        """Queue ``content`` in the mailbox of the member ``to`` (``from_host``: the host's
        code sent it, so a slash command in it may run; never for a tool's message)."""


class TeamHost(ActorHost, Protocol):
    """What the member roster, member actors and observers need besides :class:`ActorHost`."""

    @property
    def profiles(self) -> list[RoleProfile]:
        """The roles members are hired for."""

    @property
    def policy(self) -> Policy | None:
        """The policy that governs members' tools, if any."""

    @property
    def audit(self) -> AuditLog | None:
        """Where governed decisions are written, if anywhere."""

    @property
    def approver(self) -> Approver | None:
        """Who decides approval-required calls of members, if anyone."""

    @property
    def trust(self) -> HostTrust:
        """What the host lets a stored profile choose on this host (``Team(trust=...)``)."""

    @property
    def budgets(self) -> BudgetStore:
        """Where the members' budgets are counted."""

    def check_running(self) -> None:
        """Raise ``TeamStopped`` when the team is stopped."""

    def spawn(self, name: str, factory: Callable[[], Any]) -> ActorHandle[Any]:
        """Start any actor under a unique ``name``."""

    def stop_actor(self, name: str, timeout: float | None = None) -> bool:
        """Stop one actor; True when it stopped in time."""

    def start_cluster_member(self, name: str, profile: RoleProfile) -> None:
        """Start the member ``name`` as an actor of the team's distributed system."""

    def stop_cluster_member(self, name: str, timeout: float | None = None) -> bool | None:
        """Fire a cluster-placed member and stop its actor; None when it does not run."""

    def events(self, since: int = 0) -> list[ToolStateEvent]:
        """The recorded events after the first ``since``."""

    def bind(
        self,
        cards: Iterable[ToolCard],
        member: str = "local",
        retry_exception: type[Exception] | None = None,
    ) -> ToolFactory:
        """Bind ``cards`` for ``member``."""

    def members(self) -> list[MemberInfo]:
        """The roster, in hire order."""

    def hire(self, role: str, name: str | None = None) -> str:
        """Hire a member for ``role``."""

    def fire(self, name: str, timeout: float | None = None) -> bool:
        """Fire the member ``name``."""
