"""The team store, in two halves: :class:`StateStore` (transactions, teams and recorded
actors, tool-actor state rows, their versions and the idempotency keys of mutations) and
:class:`EventStore` (the team's event log: append, read, compact, positions, watch).
:class:`Store` is both over one transaction, and :class:`StateNamespace` is one tool actor's
view of its state rows. A backend (or a double: :mod:`toolcards.stores.memory`) can be written
and tested one half at a time; the runtime runs on a whole :class:`Store`.

The other stores, each one team's, have their protocols in :mod:`toolcards.stores.governance`:
:class:`AuditTable` (the audit trail), :class:`ApprovalStore` (pending approvals) and
:class:`RateLimits` (token buckets); the rows both backends share are in
:mod:`toolcards.stores.rows`. All of them are importable from here too. Implementations:
``stores/sqlite/`` (a file or memory), ``stores/postgres/`` (many processes and machines),
``stores/memory.py``; one contract test-suite (``tests/stores/``) runs against each, with two
teams in one database. :func:`toolcards.stores.open.open_stores` is the one place that opens a
backend, from a :class:`StoreLocation`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from toolcards.stores.errors import (
    DatabaseClosed,
    DatabaseUnavailable,
    SchemaTooNew,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    StoreUnavailable,
    UnknownStoreScheme,
    UnstorableText,
)
from toolcards.stores.governance import (
    ApprovalStore,
    AuditTable,
    Binding,
    BudgetStore,
    GrantStore,
    Limit,
    RateLimits,
    Spend,
)
from toolcards.stores.rows import (
    DEFAULT_TEAM,
    EVENT_ENVELOPE_COLUMNS,
    LIFECYCLE_TOOL,
    SCHEMA_VERSION,
    AppliedCall,
    Compaction,
    EventRow,
    check_text,
    compaction_marker,
    dumps,
    key_end,
)

__all__ = [
    "DEFAULT_TEAM",
    "EVENT_ENVELOPE_COLUMNS",
    "LIFECYCLE_TOOL",
    "SCHEMA_VERSION",
    "AppliedCall",
    "ApprovalStore",
    "AuditTable",
    "Binding",
    "BudgetStore",
    "Compaction",
    "DatabaseClosed",
    "DatabaseUnavailable",
    "EventRow",
    "EventStore",
    "GrantStore",
    "Limit",
    "RateLimits",
    "SchemaTooNew",
    "Spend",
    "StateNamespace",
    "StateStore",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreLockedError",
    "StoreUnavailable",
    "UnknownStoreScheme",
    "UnstorableText",
    "check_text",
    "compaction_marker",
    "dumps",
    "key_end",
]


class StateStore(ABC):
    """Half of a team store: transactions, teams and recorded actors, tool-actor state rows,
    their versions, and the idempotency keys of mutations.

    Every method is thread-safe. Statements outside :meth:`transaction` commit on their own;
    inside it they commit together when the outermost block exits, and callbacks registered
    with :meth:`after_commit` run after that commit.
    """

    location: str
    """Where the store lives, printable (a URL's password is never included)."""
    in_memory: bool = False
    shared: bool = False
    """True when several processes may hold the same team in this store at once."""
    transaction_per_thread: bool = False
    """True when each thread has its own connection and transaction (PostgreSQL): a tool
    actor's whole call may run inside one without holding up the process's other threads.
    False where one connection serves the process (SQLite): a transaction holds its lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.rollback_hooks: list[Callable[[], Any]] = []
        """Called after a transaction rolls back (caches derived from the store reload)."""
        self._lost = threading.local()

    def lost_writes(self) -> int:
        """How many transactions of the calling thread tried to write and did not commit
        (rolled back, cut off with their connection, or with an unknown outcome; without
        :attr:`transaction_per_thread`, also one that could not begin). A tool actor whose
        call moved this number reloads from the store before its next answer."""
        return int(getattr(self._lost, "count", 0))

    def note_lost_write(self) -> None:
        """Count one transaction of the calling thread that did not commit."""
        self._lost.count = self.lost_writes() + 1

    # ---- connection and transactions ---------------------------------------------------------

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """One atomic transaction (nestable: inner blocks join the outer one)."""

    @abstractmethod
    def after_commit(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` once the current transaction commits (now, outside of one)."""

    @property
    @abstractmethod
    def closed(self) -> bool:
        """True once :meth:`close` ran."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection (and the file lock, for SQLite)."""

    def checkpoint(self) -> None:  # noqa: B027 - optional: most stores have nothing to fold
        """Fold a write-ahead log into the main file, where there is one."""

    def secret_location(self) -> str:
        """What :func:`open_store` needs to open this store again in another process (a URL
        with its password: never print it)."""
        return self.location

    # ---- teams and actors --------------------------------------------------------------------

    @abstractmethod
    def team_exists(self, team_id: str) -> bool: ...

    @abstractmethod
    def open_team(self, team_id: str) -> None:
        """Record ``team_id`` as running (created if new)."""

    @abstractmethod
    def mark_stopped(self, team_id: str) -> None: ...

    @abstractmethod
    def record_actor(self, team_id: str, name: str, tag: str, config: str | None) -> None:
        """Record that ``name`` runs the actor class tagged ``tag`` with ``config`` (JSON)."""

    @abstractmethod
    def recorded_actors(self, team_id: str) -> list[tuple[str, str, str | None]]:
        """``(name, actor_tag, config_json)`` of every recorded actor, oldest first."""

    # ---- state -------------------------------------------------------------------------------

    @abstractmethod
    def state_get(self, team_id: str, actor: str, key: str) -> Any | None: ...

    @abstractmethod
    def state_put(self, team_id: str, actor: str, key: str, value: Any) -> None: ...

    @abstractmethod
    def state_delete(self, team_id: str, actor: str, key: str) -> None: ...

    @abstractmethod
    def state_items(
        self, team_id: str, actor: str, prefix: str = "", *, after: str = "", limit: int = 0
    ) -> list[tuple[str, Any]]:
        """``(key, value)`` with ``key`` starting with ``prefix`` and after ``after``, in key
        order; at most ``limit`` rows (0: all)."""

    @abstractmethod
    def state_count(self, team_id: str, actor: str, prefix: str = "") -> int: ...

    # ---- versions: cross-process coherence ---------------------------------------------------

    def actor_version(self, team_id: str, actor: str) -> int:
        """A number that changes whenever another process commits a change of ``actor``'s
        state or events (always 0 in a store one process owns)."""
        return 0

    def state_changes(
        self, team_id: str, actor: str, since: int
    ) -> tuple[list[tuple[str, Any]], list[str]] | None:
        """The state rows of ``actor`` written by transactions committed after its version
        ``since`` (``(key, value)``, at least those) and the keys deleted since (absent now),
        or None when the store cannot tell (a full reload then). Events are not included."""
        return None

    def state_version(self, team_id: str, actor: str) -> int:
        """A number that moves by one with each committed transaction that changed ``actor``'s
        state rows or events, whoever made it (0 before the first). A summary an actor keeps
        of its rows, written at version ``v`` (its transaction commits it as ``v + 1``), is
        current while the version reads ``v + 1``."""
        return self.actor_version(team_id, actor)

    def lock_actor(  # noqa: B027 - no-op alone
        self, team_id: str, actor: str, *, since: int | None = None
    ) -> None:
        """Inside a transaction: serialize with every other process calling ``actor``.
        ``since``: the version a copy of the actor holds; a store may read its
        :meth:`state_changes` since then in the same round trip."""

    def writes_pending(self, team_id: str, actor: str) -> bool:
        """Inside a transaction: True when it changed ``actor``'s state or events (its version
        moves by one when it commits)."""
        return False

    # ---- idempotency keys of mutations (see :mod:`toolcards.stores.applied_calls`) -----------

    def applied_call(self, team_id: str, key: str) -> AppliedCall | None:
        """The record a call that committed under ``key`` left (None: none committed under
        it, or its record expired)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no call keys")

    def record_applied(self, team_id: str, key: str, actor: str, digest: str, result: str) -> None:
        """Inside the transaction of a call's writes: record ``key`` with the call's
        ``digest`` and ``result`` (JSON text); the record commits with the writes or not at
        all."""
        raise NotImplementedError(f"{type(self).__name__} keeps no call keys")


class EventStore(ABC):
    """The other half of a team store: the team's event log. Positions (team-wide) and seqs
    (per tool) are assigned by the store, gap-free under concurrent writers. Every method is
    thread-safe; in a :class:`Store`, appends inside its transaction commit with it."""

    @abstractmethod
    def append_event(
        self,
        team_id: str,
        tool_id: str,
        payload: str,
        payload_type: str | None,
        timestamp: float,
        *,
        event_id: str | None = None,
        sender: str | None = None,
        display_type: str | None = None,
    ) -> tuple[int, int]:
        """Append one event; returns ``(position, seq)``. The store assigns both, so positions
        and per-tool seqs stay gap-free under concurrent writers (a store may number an event
        of a larger transaction when that commits: its position then reads 0)."""

    @abstractmethod
    def read_events(self, team_id: str, after: int, limit: int = 1000) -> list[EventRow]:
        """Committed events of ``team_id`` with ``position > after``, in log order."""

    @abstractmethod
    def last_seq(self, team_id: str, tool_id: str) -> int:
        """The seq of ``tool_id``'s last event (0 when none). O(1)."""

    @abstractmethod
    def last_position(self, team_id: str) -> int:
        """The position of the team's last event (0 when none). O(1)."""

    @abstractmethod
    def compact_events(
        self, team_id: str, *, keep_per_tool: int | None, before: float | None
    ) -> list[Compaction]:
        """Drop old events of every tool except lifecycle ones: all but the newest
        ``keep_per_tool``, and/or those older than ``before`` (epoch seconds). The newest
        dropped event of a tool stays as a marker, so seqs seen by readers have no gap."""

    def watch(self, team_id: str, callback: Callable[[], Any]) -> Callable[[], None]:
        """Call ``callback`` (on a store thread) whenever another process commits events of
        ``team_id``; returns a function that stops the calls. A store only this process
        writes never calls it (the event log wakes its readers itself)."""
        return _nothing


def _nothing() -> None:
    return None


class Store(StateStore, EventStore):
    """Durable team state: both halves over one transaction. Events appended inside
    :meth:`transaction` commit (or roll back) with the state rows written there, and an
    actor's :meth:`state_version` moves with its events too."""


class StateNamespace:
    """One tool actor's durable key/value state: one row per key.

    Values are JSON (pydantic models are dumped). Each ``put``/``delete`` commits on its own;
    ``with state.batch():`` makes several of them (and events emitted inside) one transaction.
    Reads go to the store, so an actor may keep as little in memory as it likes (see
    :meth:`count` and :meth:`iter_items` for large namespaces).

    A row whose text does not read as JSON (nested too deep, a number too long, broken:
    written around the store) reads as absent in every store: ``get`` answers None, ``items``,
    ``iter_items`` and the store's ``state_changes`` leave it out (a page stays full) and the
    store logs its key; :meth:`count` still counts it, and a ``put`` replaces it. A loader
    still checks the values it reads: a row of JSON may hold any type.
    """

    def __init__(self, store: StateStore, team_id: str, actor: str) -> None:
        self._store = store
        self._team_id = team_id
        self._actor = actor

    def get(self, key: str) -> Any | None:
        """The value stored under ``key``, or None."""
        return self._store.state_get(self._team_id, self._actor, key)

    def put(self, key: str, value: Any) -> None:
        """Store the JSON-serializable ``value`` under ``key``."""
        self._store.state_put(self._team_id, self._actor, key, value)

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error when it is absent)."""
        self._store.state_delete(self._team_id, self._actor, key)

    def items(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, in key order."""
        return iter(self._store.state_items(self._team_id, self._actor, prefix))

    def iter_items(self, prefix: str = "", batch: int = 1000) -> Iterator[tuple[str, Any]]:
        """Like :meth:`items`, read ``batch`` rows at a time (memory stays bounded)."""
        after = ""
        while True:
            rows = self._store.state_items(
                self._team_id, self._actor, prefix, after=after, limit=batch
            )
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def count(self, prefix: str = "") -> int:
        """How many keys start with ``prefix`` (one indexed query, no rows loaded)."""
        return self._store.state_count(self._team_id, self._actor, prefix)

    def batch(self) -> AbstractContextManager[None]:
        """A context manager: every put/delete/emit inside commits atomically at exit."""
        return self._store.transaction()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Like :meth:`batch`, holding this namespace's lock (:meth:`StateStore.lock_actor`)
        from its start: such blocks run one at a time among every process of the store, each
        reading what the one before it committed, so a check and the write it allows are
        never interleaved with another process's."""
        with self._store.transaction():
            self._store.lock_actor(self._team_id, self._actor)
            yield

    def version(self) -> int:
        """Moves by one with each committed transaction that wrote this namespace (or events
        of its actor), from any writer. Read inside :meth:`batch`, the batch's own commit makes
        it this plus one unless another writer commits too: a summary row that records the
        version its batch commits at tells, by one read, whether any row changed since."""
        return self._store.state_version(self._team_id, self._actor)
