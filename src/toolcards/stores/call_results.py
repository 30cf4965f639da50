"""Recorded results of governed calls, by durable call key: what lets a replayed call (a
durable run recovering after its process died) be answered without running the tool again.

A key is claimed before the tool runs and settled with the outcome after; a key seen again
is either settled (answer from the record) or claimed but never settled (the process died
while the tool ran). A first claim of a key that another team has claimed in the same table
reads as ``elsewhere`` (a durable engine recovered that team's run in this team's process):
only the existence of that key is read, never its row. :class:`CallResults` is what the
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
    PRIMARY KEY (team_id, call_key)
)
"""

MIGRATION = TeamColumn(
    "call_results", added=(("principal", "TEXT NOT NULL DEFAULT ''"), ("call_id", "TEXT"))
)
"""The columns a table made by an older version lacks (its rows answer no principal)."""

INDEXES = (
    "CREATE INDEX IF NOT EXISTS toolcards_call_results_key ON toolcards_call_results (call_key)"
)
"""A key looked up across teams (:data:`_ELSEWHERE`) reads one index entry, not the table."""

_CLAIM = (
    "INSERT INTO toolcards_call_results "
    "(team_id, call_key, tool_id, args_digest, principal, call_id, claimed_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (team_id, call_key) DO NOTHING"
)
_FIND = (
    "SELECT tool_id, args_digest, principal, call_id, outcome, message, value, claimed_at "
    "FROM toolcards_call_results WHERE team_id = ? AND call_key = ?"
)
_ELSEWHERE = "SELECT 1 FROM toolcards_call_results WHERE call_key = ? AND team_id <> ? LIMIT 1"
_SETTLE = (
    "UPDATE toolcards_call_results SET outcome = ?, message = ?, value = ? "
    "WHERE team_id = ? AND call_key = ? AND outcome IS NULL"
)
"""The first answer recorded for a key stays: every replay gets the same one."""
_RELEASE = (
    "DELETE FROM toolcards_call_results WHERE team_id = ? AND call_key = ? AND outcome IS NULL"
)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """A key claimed before this claim: its tool, argument digest, principal and call id,
    (None while the call never finished) its outcome, message and JSON-encoded value, and
    when it was claimed (epoch seconds). ``elsewhere``: this claim was the team's first, but
    another team had claimed the key (the fields are this claim's own)."""

    tool_id: str
    args_digest: str
    principal: str
    call_id: str | None
    outcome: str | None
    message: str | None
    value: str | None
    claimed_at: float = 0.0
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
        self, key: str, tool_id: str, args_digest: str, principal: str = "", call_id: str = ""
    ) -> CallRecord | None:
        """Claim ``key`` for ``principal``'s call about to run: None when this claim is the
        first, else the record an earlier claim left (settled or not), or this claim's own
        record marked ``elsewhere`` when another team claimed the key."""
        ...

    def settle(self, key: str, outcome: str, message: str, value: str | None) -> None:
        """Record how the claimed call ended (``value``: its result as JSON text)."""
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
        self, key: str, tool_id: str, args_digest: str, principal: str = "", call_id: str = ""
    ) -> CallRecord | None:
        """Claim ``key`` for ``principal``'s call about to run: None when this claim is the
        first, else the record an earlier claim left (settled or not), or this claim's own
        record marked ``elsewhere`` when another team claimed the key."""
        now = time.time()
        row = (self.team_id, key, tool_id, args_digest, principal, call_id or None, now)
        with self._tx() as cur:
            cur.execute(_CLAIM, row)
            if cur.rowcount == 1:
                if cur.execute(_ELSEWHERE, (key, self.team_id)).fetchone() is None:
                    return None
                mine = (tool_id, args_digest, principal, call_id or None, None, None, None, now)
                return CallRecord(*mine, elsewhere=True)
            row = cur.execute(_FIND, (self.team_id, key)).fetchone()
        return CallRecord(*row) if row is not None else None

    def settle(self, key: str, outcome: str, message: str, value: str | None) -> None:
        """Record how the claimed call ended (``value``: its result as JSON text); a key
        settled already keeps its answer."""
        with self._tx() as cur:
            cur.execute(_SETTLE, (outcome, message, value, self.team_id, key))

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
            cur.execute(INDEXES)

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
