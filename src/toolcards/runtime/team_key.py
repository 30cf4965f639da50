"""The team's key: a random secret made once per team and kept in its store.

Actors of a distributed system (Ray) refuse calls that do not carry it, so a driver of another
team that finds an actor by name cannot read or change the team's state through it. The key is
read through the team's own store rows, which no other team's store handle returns.
"""

from __future__ import annotations

import secrets

from toolcards.stores.base import Store

_ACTOR = "~team"
_KEY = "actor_key"


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
