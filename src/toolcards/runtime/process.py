"""Process-wide bookkeeping of teams: one store object per store file, the running teams
(one team per store and id), and their bounded stop at interpreter exit."""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Protocol

from toolcards.stores.base import Store
from toolcards.stores.location import StoreLocation
from toolcards.stores.open import open_team_store

logger = logging.getLogger(__name__)


class _Running(Protocol):
    team_id: str
    stop_timeout: float

    @property
    def store_location(self) -> str: ...

    def stop(self, timeout: float | None = None) -> object: ...


_lock: threading.RLock = threading.RLock()
_stores: dict[str, tuple[Store, int]] = {}
_live: dict[int, _Running] = {}


def lock() -> threading.RLock:
    """The lock guarding this module's tables (held briefly; re-entrant)."""
    return _lock


def open_location(location: str, *, durable: bool = False, connect_timeout: float = 5.0) -> Store:
    """The store at ``location``: a SQLite path, ``":memory:"``, a ``postgresql://`` URL or an
    installed backend's scheme (a new store object each call; :func:`open_store` shares them
    within a process)."""
    return open_team_store(location, durable=durable, connect_timeout=connect_timeout)


def _key(location: str) -> str:
    return StoreLocation.parse(location).key


def open_store(location: str, durable: bool, *, read_only: bool = False) -> Store:
    """One store object per file or database URL per process (shared by the teams of this
    process), or a new memory one. ``read_only``: a new reader of its own, which leaves a
    SQLite file's writer lock to the process that writes it."""
    if read_only:
        return open_team_store(location, read_only=True)
    if location == ":memory:":
        return open_location(location, durable=durable)
    key = _key(location)
    with _lock:
        found = _stores.get(key)
        if found is not None:
            _stores[key] = (found[0], found[1] + 1)
            return found[0]
        store = open_location(key, durable=durable)
        _stores[key] = (store, 1)
        return store


def release_store(store: Store) -> None:
    """Drop one user of ``store``; the last one closes it."""
    with _lock:
        for key, (found, users) in list(_stores.items()):
            if found is store:
                if users > 1:
                    _stores[key] = (store, users - 1)
                    return
                del _stores[key]
    store.close()


def claim(team: _Running, shared_store: bool) -> None:
    """Record ``team`` as running; ValueError when a file store already runs the same id."""
    with _lock:
        if shared_store:
            key = (team.store_location, team.team_id)
            for other in _live.values():
                if (other.store_location, other.team_id) == key:
                    raise ValueError(f"team {team.team_id} is already running on this store")
        _live[id(team)] = team


def unclaim(team: _Running) -> None:
    """Forget ``team`` (it stopped, or failed to start)."""
    with _lock:
        _live.pop(id(team), None)


def _stop_all_at_exit() -> None:
    with _lock:
        teams = list(_live.values())
    for team in teams:
        try:
            team.stop(timeout=min(team.stop_timeout, 2.0))
        except Exception:  # best effort at interpreter exit
            logger.debug("stopping team %s at exit failed", team.team_id, exc_info=True)


atexit.register(_stop_all_at_exit)
