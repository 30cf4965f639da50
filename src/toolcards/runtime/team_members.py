"""The member methods of a :class:`~toolcards.runtime.Team`: hire, fire, messages and the
roster's views, each handed to the team's :class:`~toolcards.runtime.members.MemberRoster`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolcards.runtime.members import DEFAULT_SEND_TIMEOUT, MemberRoster
from toolcards.runtime.messaging import USER, MemberActivity, MemberInfo, MemberMessage
from toolcards.runtime.team_systems import start_cluster_member, stop_cluster_member

if TYPE_CHECKING:
    from toolcards.runtime.profiles import RoleProfile


class TeamMembers:
    """A team's members (see :mod:`toolcards.runtime.members`)."""

    _roster: MemberRoster

    def hire(self, role: str, name: str | None = None) -> str:
        """Hire a member for ``role``; returns its unique name (``@<role>-<n>`` by default).

        An unknown role, a taken or malformed ``name``, or a full role is an error (nothing
        is started). The member's cards are bound for it; its tools are governed when the
        team has a policy. A role with ``placement="cluster"`` runs the member as an actor of
        the team's distributed system (Ray), in a worker process of the cluster.
        """
        return self._roster.hire(role, name)

    def adopt(self, role: str, name: str) -> str:
        """Hold the recorded member ``name`` of ``role`` in this process (the worker of a
        member placed on the cluster does this): its conversation continues from the store
        and messages queued for it meanwhile are delivered."""
        return self._roster.hire(role, name, adopting=True)

    def start_cluster_member(self, name: str, profile: RoleProfile) -> None:
        """Start the member ``name`` as an actor of this team's distributed actor system."""
        start_cluster_member(self, name, profile)

    def stop_cluster_member(self, name: str, timeout: float | None = None) -> bool | None:
        """Fire the cluster-placed member ``name`` in its worker and stop its actor; None when
        no such actor runs."""
        return stop_cluster_member(self, name, timeout)

    def fire(self, name: str, timeout: float | None = None) -> bool:
        """Stop the member ``name`` (bounded by ``timeout``, default the team's stop timeout)
        and remove it from the roster with its conversation. Returns True when it stopped in
        time. An unknown or already fired name is a ``LookupError``."""
        return self._roster.fire(name, timeout)

    def send(
        self, to: str, content: str, *, sender: str = USER, timeout: float = DEFAULT_SEND_TIMEOUT
    ) -> str:
        """Send ``content`` to the member ``to`` and wait at most ``timeout`` seconds for its
        answer. A slash command (``/name args``) runs the member's command, not its model."""
        return self._roster.send(to, content, sender, timeout)

    def post(self, to: str, content: str, *, sender: str = USER) -> MemberMessage:
        """Queue ``content`` in the mailbox of ``to`` and return at once. When ``sender`` is a
        member, the answer is posted back to the sender's mailbox."""
        return self._roster.post(to, content, sender)

    def members(self) -> list[MemberInfo]:
        """The roster: name, role, busy and hire time of every member, in hire order."""
        return self._roster.members()

    def is_member(self, name: str) -> bool:
        """True when ``name`` is on the roster (exact name, with its ``@``)."""
        return self._roster.is_member(name)

    def profile(self, role: str) -> RoleProfile:
        """The profile of ``role``; a ``LookupError`` lists the known roles."""
        return self._roster.profile(role)

    def activity(
        self, *, max_task_chars: int = 200, stale_after: float | None = None
    ) -> dict[str, MemberActivity]:
        """Who is busy on what, per member on the roster, derived from the event log."""
        return self._roster.activity(max_task_chars=max_task_chars, stale_after=stale_after)
