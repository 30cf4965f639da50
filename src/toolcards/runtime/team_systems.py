"""The actor system a team runs its tool actors on (``Team(system=...)``), and the checks
that keep one team on one cluster with a store every process shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolcards.core.actors import ActorUnavailable
from toolcards.runtime.system import ActorSystem
from toolcards.stores.base import Store
from toolcards.stores.memory import MemoryBudgets

if TYPE_CHECKING:
    from toolcards.runtime.profiles import RoleProfile

__all__ = ["actor_system", "is_remote", "start_cluster_member", "stop_cluster_member"]


def is_remote(system: ActorSystem) -> bool:
    """True for an actor system whose actors run in other processes."""
    from toolcards.runtime.pykka_system import PykkaActorSystem

    return not isinstance(system, PykkaActorSystem)


def actor_system(
    system: ActorSystem | str | None, local: ActorSystem, team_id: str, store: Store
) -> ActorSystem:
    """The actor system for tool actors from ``Team(system=...)``."""
    if system is None or system == "pykka":
        return local
    if system == "ray":
        from toolcards.runtime.ray_system import RayActorSystem

        system = RayActorSystem(namespace=f"toolcards-{team_id}")
    if isinstance(system, str):
        raise ValueError(f"system must be 'pykka', 'ray' or an ActorSystem, got {system!r}")
    if is_remote(system) and not store.shared:
        raise ValueError(
            f"actors in other processes cannot open the store {store.location}: a "
            "distributed actor system needs a store every process shares (a postgresql:// URL)"
        )
    private = getattr(system, "starts_private_cluster", None)
    if callable(private) and private():
        raise ValueError(
            f"system ray with the shared store {store.location} would start a private Ray "
            "cluster in this process, so every process would run its own copy of the team's "
            "actors: give the cluster's address (RAY_ADDRESS, RayActorSystem(address=...) or "
            "'auto' for the cluster running on this machine; 'local' asks for a private one)"
        )
    keyed = getattr(system, "with_team_key", None)
    if callable(keyed):  # Ray: any driver finds any named actor; the team's key keeps it out
        from toolcards.runtime.team_key import claim_cluster, team_key

        keyed_system: ActorSystem = keyed(team_key(store, team_id))
        cluster, reachable = getattr(system, "cluster", None), getattr(system, "reachable", None)
        if callable(cluster) and callable(reachable):  # one cluster per team, never two
            claim_cluster(store, team_id, cluster(), reachable)
        return keyed_system
    return system


def start_cluster_member(team: Any, name: str, profile: RoleProfile) -> None:
    """Start the member ``name`` as an actor of ``team``'s distributed actor system."""
    system = team.system
    if system is team._local or not is_remote(system):
        raise ValueError(
            f"role {profile.role!r} has placement='cluster', which needs a distributed "
            "actor system: Team(..., system='ray')"
        )
    from toolcards.runtime.cluster_member import ClusterMemberFactory

    factory = ClusterMemberFactory(
        type(team),
        team.team_id,
        team._store.secret_location(),
        name,
        profile,
        system,
        policy=team.policy,
        audit=team.audit,
        approver=team.approver,
        budgets=None if isinstance(team.budgets, MemoryBudgets) else team.budgets,
    )
    factory.check_portable()
    system.spawn(name, factory)


def stop_cluster_member(team: Any, name: str, timeout: float | None) -> bool | None:
    """Fire the cluster-placed member ``name`` in its worker and stop its actor; None when
    no such actor runs."""
    from toolcards.runtime.cluster_member import ClusterMember

    if not is_remote(team.system):
        return None
    handle = team.system.lookup(name)
    if handle is None:
        return None
    bound = team.stop_timeout if timeout is None else timeout
    try:
        clean = bool(handle.within(bound + 5.0).ask(ClusterMember.fire, bound))
    except (TimeoutError, ActorUnavailable):
        clean = False
    team.system.stop([name], bound)
    return clean
