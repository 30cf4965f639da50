"""The team's key (a random secret made once per team) and its Ray cluster, kept in its store.

Actors of a distributed system (Ray) refuse calls that do not carry it, so a driver of another
team that finds an actor by name cannot read or change the team's state through it. The key is
read through the team's own store rows, which no other team's store handle returns.

The cluster a team's actors run on is recorded too: a process that joins the team on another
cluster would run a second copy of every actor, so it is refused while the recorded cluster
answers (and takes the team over when that cluster is gone).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from toolcards.stores.base import Store

_ACTOR = "~team"
_KEY = "actor_key"
_CLUSTER = "ray_cluster"


def team_key(store: Store, team_id: str) -> str:
    """The team's key, made on first use (one winner when many processes ask at once)."""
    found = store.state_get(team_id, _ACTOR, _KEY)
    if isinstance(found, str):
        return found
    with store.transaction():
        store.lock_actor(team_id, _ACTOR)
        found = store.state_get(team_id, _ACTOR, _KEY)
        if isinstance(found, str):
            return found
        made = secrets.token_urlsafe(32)
        store.state_put(team_id, _ACTOR, _KEY, made)
    return made


def claim_cluster(
    store: Store, team_id: str, cluster: str, reachable: Callable[[str], bool]
) -> None:
    """Record ``cluster`` as the team's, or check it is the recorded one: ValueError while
    another recorded cluster still answers; a recorded cluster that no longer answers is
    replaced (its actors are gone with it)."""
    if store.state_get(team_id, _ACTOR, _CLUSTER) == cluster:
        return
    with store.transaction():
        store.lock_actor(team_id, _ACTOR)
        recorded = store.state_get(team_id, _ACTOR, _CLUSTER)
        if recorded == cluster:
            return
        if isinstance(recorded, str) and reachable(recorded):
            raise ValueError(
                f"team {team_id} runs its actors on the Ray cluster at {recorded}, and this "
                f"process is connected to {cluster}: join that cluster (RAY_ADDRESS={recorded})"
                ", or stop the team there first"
            )
        store.state_put(team_id, _ACTOR, _CLUSTER, cluster)
