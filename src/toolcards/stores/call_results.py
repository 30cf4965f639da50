"""Recorded results of governed calls, by durable call key: what lets a replayed call (a
durable run recovering after its process died) be answered without running the tool again.

A key is claimed before the tool runs and settled with the outcome after; a key seen again
is either settled (answer from the record) or claimed but never settled (the process died
while the tool ran). A first claim of a key that another team has claimed in the same table
reads as ``elsewhere`` (a durable engine recovered that team's run in this team's process):
only the existence of that key is read, never its row.

A claim has an ``owner`` (a token of the claim, which its call's audit row carries) and a lease
its owner renews while the call runs: an unsettled claim whose lease ran out belongs to a
process that died. Bounded: a recorded value is at most :data:`MAX_VALUE_BYTES` (a larger
result is recorded as an error saying so), and a record is kept :data:`KEEP_SECONDS` after it
was settled (older ones are deleted when the team claims a key). :class:`CallResults` is what the
executor's durable step (:mod:`toolcards.governance.executor.replay`) asks of a store;
:func:`toolcards.stores.open.open_call_results` opens one at any store location. The SQL is
shared by :class:`SqliteCallResults` and
:class:`toolcards.stores.postgres.call_results.PostgresCallResults`; every row carries its
``team_id`` and every statement filters by it.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from toolcards.stores.base import DEFAULT_TEAM
from toolcards.stores.migrate import TeamColumn
from toolcards.stores.sqlite.connect import shared_connection

TABLE = """
CREATE TABLE IF NOT EXISTS toolcards_call_results (
    team_id TEXT NOT NULL,
    call_key TEXT NOT NULL,
    tool_id TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    principal TEXT NOT NULL DEFAULT '',
    call_id TEXT,
    claimed_at DOUBLE PRECISION NOT NULL,
    outcome TEXT,
    message TEXT,
    value TEXT,
    owner TEXT,
    lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
    settled_at DOUBLE PRECISION,
    PRIMARY KEY (team_id, call_key)
)
"""

MIGRATION = TeamColumn(
    "call_results",
    added=(
        ("principal", "TEXT NOT NULL DEFAULT ''"),
        ("call_id", "TEXT"),
        ("owner", "TEXT"),
        ("lease_until", "DOUBLE PRECISION NOT NULL DEFAULT 0"),
        ("settled_at", "DOUBLE PRECISION"),
    ),
)
"""The columns a table made by an older version lacks (its rows answer no principal, its
unsettled claims hold no lease: they read as dead)."""

INDEXES = (
    "CREATE INDEX IF NOT EXISTS toolcards_call_results_key ON toolcards_call_results (call_key);"
    "CREATE INDEX IF NOT EXISTS toolcards_call_results_claimed "
    "ON toolcards_call_results (team_id, claimed_at)"
)
"""A key looked up across teams (:data:`_ELSEWHERE`) reads one index entry, not the table; the
purge (:data:`_PURGE`) reads only the rows claimed before its window."""

MAX_VALUE_BYTES = 1_048_576
"""The largest result a record keeps (the bound a task's result has too): a replay needs the
answer, not a copy of every large read a run made; a larger one is recorded as
:data:`TOO_LARGE`, so its replay is told so and does not run the call again."""
TOO_LARGE = (
    f"error: the result of this call was larger than the {MAX_VALUE_BYTES} bytes a recorded "
    "result keeps; it is not run again"
)
KEEP_SECONDS = 7 * 24 * 3600.0
"""How long a record is kept after it was settled: a durable run is recovered when its engine
starts again (minutes, hours), not weeks later; a run replayed after that runs the call again."""

_CLAIM = (
    "INSERT INTO toolcards_call_results (team_id, call_key, tool_id, args_digest, principal, "
    "call_id, claimed_at, owner, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (team_id, call_key) DO NOTHING"
)
_FIND = (
    "SELECT tool_id, args_digest, principal, call_id, outcome, message, value, claimed_at, "
    "owner, lease_until FROM toolcards_call_results WHERE team_id = ? AND call_key = ?"
)
_ELSEWHERE = "SELECT 1 FROM toolcards_call_results WHERE call_key = ? AND team_id <> ? LIMIT 1"
_SETTLE = (
    "UPDATE toolcards_call_results SET outcome = ?, message = ?, value = ?, settled_at = ? "
    "WHERE team_id = ? AND call_key = ? AND outcome IS NULL"
)
"""The first answer recorded for a key stays: every replay gets the same one."""
_RENEW = (
    "UPDATE toolcards_call_results SET lease_until = ? "
    "WHERE team_id = ? AND call_key = ? AND owner = ? AND outcome IS NULL"
)
_PURGE = (
    "DELETE FROM toolcards_call_results WHERE team_id = ? AND claimed_at < ? "
    "AND outcome IS NOT NULL AND COALESCE(settled_at, claimed_at) < ?"
)
"""Records settled before the window (a record of an older version: claimed before it)."""
_RELEASE = (
    "DELETE FROM toolcards_call_results WHERE team_id = ? AND call_key = ? AND outcome IS NULL"
)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """A key claimed before this claim: its tool, argument digest, principal and call id,
    (None while the call never finished) its outcome, message and JSON-encoded value, and
    when it was claimed (epoch seconds), its owner and (epoch seconds) the end of its lease.
    ``elsewhere``: this claim was the team's first, but another team had claimed the key (the
    fields are this claim's own)."""

    tool_id: str
    args_digest: str
    principal: str
    call_id: str | None
    outcome: str | None
    message: str | None
    value: str | None
    claimed_at: float = 0.0
    owner: str | None = None
    lease_until: float = 0.0
    elsewhere: bool = False

    @property
    def settled(self) -> bool:
        return self.outcome is not None


class CallResults(Protocol):
    """Where claimed and settled calls are kept (one team's)."""

    def find(self, key: str) -> CallRecord | None:
        """The record of ``key`` (settled or not); None when it was never claimed."""
        ...

    def claim(
        self,
        key: str,
        tool_id: str,
        args_digest: str,
        principal: str = "",
        call_id: str = "",
        *,
        owner: str = "",
        lease_until: float = 0.0,
    ) -> CallRecord | None:
        """Claim ``key`` for ``principal``'s call about to run (by ``owner``, alive until
        ``lease_until``): None when this claim is the first, else the record an earlier claim
        left (settled or not), or this claim's own record marked ``elsewhere`` when another
        team claimed the key."""
        ...

    def renew(self, key: str, owner: str, until: float) -> None:
        """Extend the lease of ``owner``'s unsettled claim of ``key`` to ``until``."""
        ...

    def settle(self, key: str, outcome: str, message: str, value: str | None) -> None:
        """Record how the claimed call ended (``value``: its result as JSON text). ``message``
        and ``value`` are text every store keeps (UTF-8: no lone surrogate, which the
        executor writes as its ``\\u`` escape)."""
        ...

    def release(self, key: str) -> None:
        """Drop an unsettled claim, so the next call with ``key`` runs."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


class SqlCallResults(ABC):
    """The claim/settle logic over ``_tx()`` (one write transaction yielding a cursor that
    speaks ``?`` placeholders)."""

    team_id: str

    @abstractmethod
    def _tx(self) -> AbstractContextManager[Any]: ...

    def find(self, key: str) -> CallRecord | None:
        """The record of ``key`` (settled or not); None when it was never claimed."""
        with self._tx() as cur:
            row = cur.execute(_FIND, (self.team_id, key)).fetchone()
        return CallRecord(*row) if row is not None else None

    def claim(
        self,
        key: str,
        tool_id: str,
        args_digest: str,
        principal: str = "",
        call_id: str = "",
        *,
        owner: str = "",
        lease_until: float = 0.0,
    ) -> CallRecord | None:
        """Claim ``key`` for ``principal``'s call about to run (by ``owner``, alive until
        ``lease_until``): None when this claim is the first, else the record an earlier claim
        left (settled or not), or this claim's own record marked ``elsewhere`` when another
        team claimed the key. The team's records settled before :data:`KEEP_SECONDS` go."""
        now = time.time()
        mine = (tool_id, args_digest, principal, call_id or None, None, None, None, now)
        row = (self.team_id, key, *mine[:4], now, owner or None, lease_until)
        with self._tx() as cur:
            cur.execute(_PURGE, (self.team_id, now - KEEP_SECONDS, now - KEEP_SECONDS))
            cur.execute(_CLAIM, row)
            if cur.rowcount == 1:
                if cur.execute(_ELSEWHERE, (key, self.team_id)).fetchone() is None:
                    return None
                return CallRecord(*mine, owner or None, lease_until, elsewhere=True)
            row = cur.execute(_FIND, (self.team_id, key)).fetchone()
        return CallRecord(*row) if row is not None else None

    def renew(self, key: str, owner: str, until: float) -> None:
        """Extend the lease of ``owner``'s unsettled claim of ``key`` to ``until``."""
        with self._tx() as cur:
            cur.execute(_RENEW, (until, self.team_id, key, owner))

    def settle(self, key: str, outcome: str, message: str, value: str | None) -> None:
        """Record how the claimed call ended (``value``: its result as JSON text; one larger
        than :data:`MAX_VALUE_BYTES` is recorded as :data:`TOO_LARGE`); a key settled already
        keeps its answer."""
        if value is not None and len(value.encode()) > MAX_VALUE_BYTES:
            outcome, message, value = "error", TOO_LARGE, None
        with self._tx() as cur:
            cur.execute(_SETTLE, (outcome, message, value, time.time(), self.team_id, key))

    def release(self, key: str) -> None:
        """Drop an unsettled claim (the call did not end: it waits for approval, or was
        withdrawn), so the next call with ``key`` runs."""
        with self._tx() as cur:
            cur.execute(_RELEASE, (self.team_id, key))

    @abstractmethod
    def close(self) -> None: ...


class SqliteCallResults(SqlCallResults):
    """Recorded call results in a SQLite file (WAL, synchronous writes): shared by the
    processes of one machine and kept across restarts."""

    def __init__(self, path: str | Path, team_id: str | None = None) -> None:
        self.path = Path(path)
        self.team_id = team_id or DEFAULT_TEAM
        self._db = shared_connection(self.path, sync=True)
        self._lock = threading.Lock()
        with self._tx() as cur:
            cur.execute(TABLE)
            MIGRATION.sqlite(self._db, self.team_id, prefix="toolcards_")
            for statement in INDEXES.split(";"):
                cur.execute(statement)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db.cursor()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()
