"""Members placed on the cluster: a member that runs as an actor of a distributed system.

A :class:`RoleProfile` with ``placement="cluster"`` puts each member of its role in a Ray
actor instead of a thread of the hiring process. The actor joins the team in its worker
process (a second holder of the same PostgreSQL-backed team) and holds the member there, so
the member's model runs, and its tools are called, on whichever node Ray chose. Everything
else is as for a member of another process: the roster row names the worker as its holder,
messages reach it through the team's event log, its history is in the store. When Ray
restarts the actor (its worker died), the new one takes the member over and delivers what
was queued meanwhile; the conversation continues from the stored history.

:class:`ClusterMemberFactory` is picklable: it carries the team's class, its store URL, the
profile, the governance objects and the host's limits, and builds the :class:`ClusterMember`
in the worker. The host's ``trust`` stays behind: its grants name this host's programs, paths
and variables, not the worker's node, and a worker's team restores nothing from the store.
"""

from __future__ import annotations

import os
import pickle
from typing import TYPE_CHECKING, Any, Protocol

from toolcards._lazy import optional_module

if TYPE_CHECKING:
    from toolcards.governance.approvals.broker import Approver
    from toolcards.governance.audit.log import AuditLog
    from toolcards.governance.policy.policy import Policy
    from toolcards.runtime.profiles import RoleProfile
    from toolcards.runtime.system import ActorSystem
    from toolcards.stores.base import BudgetStore


class _HostingTeam(Protocol):
    """What a cluster member needs of the team it joins in its worker."""

    def adopt(self, role: str, name: str) -> str: ...

    def fire(self, name: str, timeout: float | None = None) -> bool: ...

    def stop(self, timeout: float | None = None) -> object: ...


class ClusterMember:
    """The target of a member's cluster actor: a team joined in this worker, holding one
    member. Public methods run on the actor."""

    def __init__(self, team: _HostingTeam, name: str) -> None:
        self._team = team
        self.name = name

    def fire(self, timeout: float | None = None) -> bool:
        """Fire the member here (its roster row and history go); True when it stopped cleanly."""
        return self._team.fire(self.name, timeout)

    def pid(self) -> int:
        """The id of the worker process that runs the member."""
        return os.getpid()

    def on_stop(self) -> None:
        self._team.stop()


class ClusterMemberFactory:
    """Builds a :class:`ClusterMember` in a worker process of the team's actor system."""

    def __init__(
        self,
        team_cls: type[Any],
        team_id: str,
        store_location: str,
        name: str,
        profile: RoleProfile,
        system: ActorSystem,
        *,
        policy: Policy | None = None,
        audit: AuditLog | None = None,
        approver: Approver | None = None,
        budgets: BudgetStore | None = None,
        max_members: int,
        stop_timeout: float,
    ) -> None:
        self.team_cls = team_cls
        self.team_id = team_id
        self.store_location = store_location
        self.name = name
        self.profile = profile
        self.system = system
        self.policy = policy
        self.audit = audit
        self.approver = approver
        self.budgets = budgets
        """The team's shared budget store (None: the worker counts in its own memory)."""
        self.max_members = max_members
        """The host's cap on the team's members: a member's model hires in the worker too."""
        self.stop_timeout = stop_timeout

    def check_portable(self) -> None:
        """Raise ``ValueError`` naming the part that cannot travel to a worker process."""
        cloudpickle = optional_module("ray.cloudpickle", "ray", "members placed on the cluster")
        for label, value in (
            ("the model of the profile", self.profile.model),
            ("the profile's cards", self.profile.cards),
            ("the team's policy", self.policy),
            ("the team's audit log", self.audit),
            ("the team's approver", self.approver),
            ("the team's budget store", self.budgets),
        ):
            try:
                cloudpickle.dumps(value)
            except (TypeError, AttributeError, pickle.PicklingError) as exc:
                raise ValueError(
                    f"member {self.name} cannot be placed on the cluster: {label} cannot be "
                    f"sent to a worker process ({exc}); use placement='process' for this role"
                ) from None

    def __repr__(self) -> str:
        return f"<ClusterMemberFactory {self.name} of team {self.team_id}>"

    def __call__(self) -> ClusterMember:
        team = self.team_cls(
            self.team_id,
            self.store_location,
            profiles=[self.profile],
            policy=self.policy,
            audit=self.audit,
            approver=self.approver,
            budgets=self.budgets,
            system=self.system,
            max_members=self.max_members,
            stop_timeout=self.stop_timeout,
        )
        try:
            team.adopt(self.profile.role, self.name)
        except BaseException:
            team.stop()
            raise
        return ClusterMember(team, self.name)
