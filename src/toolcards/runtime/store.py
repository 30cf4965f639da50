"""The team store: one SQLite database holding tool-actor state, the event log and the roster.

This module owns the schema and its migrations; everything else calls it. A file-backed store
runs in WAL mode, so a process killed mid-write leaves the last committed transaction intact,
and it is guarded by an exclusive lock file: one writing process per store file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from pydantic_core import to_jsonable_python

from toolcards.core.errors import ToolcardsError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS teams (
    team_id TEXT PRIMARY KEY, created_at REAL NOT NULL, stopped_at REAL
);
CREATE TABLE IF NOT EXISTS actors (
    team_id TEXT NOT NULL, name TEXT NOT NULL, actor_cls TEXT NOT NULL,
    config_cls TEXT, config TEXT, created_at REAL NOT NULL,
    PRIMARY KEY (team_id, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state (
    team_id TEXT NOT NULL, actor TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (team_id, actor, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    pos INTEGER PRIMARY KEY, team_id TEXT NOT NULL, tool_id TEXT NOT NULL,
    seq INTEGER NOT NULL, payload TEXT NOT NULL, timestamp REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_tool_seq ON events (team_id, tool_id, seq);
CREATE INDEX IF NOT EXISTS events_team_pos ON events (team_id, pos);
"""

_KEY_END = chr(0x10FFFF)


class StoreLockedError(ToolcardsError):
    """Another process holds the store file open for writing (single writer per store)."""


class StoreClosedError(ToolcardsError):
    """The store was closed (its team stopped); no more reads or writes."""


def dumps(value: Any) -> str:
    """JSON text of ``value``; pydantic models, dates and sets are converted on the way."""
    return json.dumps(value, default=to_jsonable_python, separators=(",", ":"))


class _LockFile:
    """An exclusive, non-blocking ``flock`` on ``<store>.lock``, released by the kernel on exit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: TextIO | None = None

    def acquire(self, store: Path) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX: no cross-process guard
            return
        fh = open(self.path, "a+")  # noqa: SIM115 - held open for the lock's lifetime
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise StoreLockedError(
                f"store {store} is open for writing by another process (pid {holder}); "
                "stop that team first, or open a copy of the file"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing the descriptor drops the flock
            self._fh = None


class TeamStore:
    """A thread-safe SQLite store (one connection, one re-entrant lock).

    ``path`` is a file path or ``":memory:"``. Statements outside :meth:`transaction` commit on
    their own; inside it they commit together when the outermost block exits.
    ``durable=True`` fsyncs every commit (power-loss safe); the default survives process kills.
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, durable: bool = False):
        self.location = str(path)
        self.in_memory = self.location == ":memory:"
        self.lock = threading.RLock()
        self._depth = 0
        self._after_commit: list[Callable[[], Any]] = []
        self.rollback_hooks: list[Callable[[], Any]] = []
        """Called after a transaction rolls back (caches derived from the store reload)."""
        self._lockfile: _LockFile | None = None
        if not self.in_memory:
            file = Path(self.location).resolve()
            file.parent.mkdir(parents=True, exist_ok=True)
            self._lockfile = _LockFile(file.with_name(file.name + ".lock"))
            self._lockfile.acquire(file)
            self.location = str(file)
        try:
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                self.location, check_same_thread=False, isolation_level=None
            )
            self._setup(durable)
        except BaseException:
            if self._lockfile is not None:
                self._lockfile.release()
            raise

    def _setup(self, durable: bool) -> None:
        conn = self.conn
        if not self.in_memory:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.executescript(_SCHEMA)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
            )
        elif int(row[0]) > SCHEMA_VERSION:
            raise ToolcardsError(
                f"store {self.location} has schema {row[0]}, newer than this toolcards "
                f"({SCHEMA_VERSION}); upgrade toolcards to open it"
            )

    # ---- connection and transactions ---------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosedError(f"store {self.location} is closed")
        return self._conn

    @property
    def closed(self) -> bool:
        return self._conn is None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic transaction (nestable: inner blocks join the outer one)."""
        with self.lock:
            conn = self.conn
            if self._depth == 0:
                conn.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    self._after_commit.clear()
                    conn.execute("ROLLBACK")
                    for hook in self.rollback_hooks:
                        hook()
                raise
            self._depth -= 1
            if self._depth:
                return
            conn.execute("COMMIT")
            callbacks, self._after_commit = self._after_commit, []
        for callback in callbacks:
            callback()

    def after_commit(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` once the current transaction commits (now, outside of one)."""
        with self.lock:
            if self._depth:
                self._after_commit.append(callback)
                return
        callback()

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file (no-op in memory)."""
        if not self.in_memory:
            with self.lock:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        if self._lockfile is not None:
            self._lockfile.release()

    # ---- teams and roster --------------------------------------------------------------------

    def team_exists(self, team_id: str) -> bool:
        with self.lock:
            sql = "SELECT 1 FROM teams WHERE team_id=?"
            return self.conn.execute(sql, (team_id,)).fetchone() is not None

    def open_team(self, team_id: str) -> None:
        with self.lock:
            self.conn.execute(
                "INSERT INTO teams (team_id, created_at) VALUES (?, ?) "
                "ON CONFLICT(team_id) DO UPDATE SET stopped_at=NULL",
                (team_id, time.time()),
            )

    def mark_stopped(self, team_id: str) -> None:
        with self.lock:
            sql = "UPDATE teams SET stopped_at=? WHERE team_id=?"
            self.conn.execute(sql, (time.time(), team_id))

    def record_actor(self, team_id: str, name: str, tag: str, config: str | None) -> None:
        """Record that ``name`` runs the actor class tagged ``tag`` with ``config`` (JSON)."""
        with self.lock:
            self.conn.execute(
                "INSERT OR REPLACE INTO actors VALUES (?, ?, ?, NULL, ?, ?)",
                (team_id, name, tag, config, time.time()),
            )

    def recorded_actors(self, team_id: str) -> list[tuple[str, str, str | None]]:
        """``(name, actor_tag, config_json)`` of every recorded actor, oldest first."""
        with self.lock:
            sql = "SELECT name, actor_cls, config FROM actors WHERE team_id=? ORDER BY created_at"
            return list(self.conn.execute(sql, (team_id,)))

    # ---- state -------------------------------------------------------------------------------

    def state_get(self, team_id: str, actor: str, key: str) -> Any | None:
        with self.lock:
            row = self.conn.execute(
                "SELECT value FROM state WHERE team_id=? AND actor=? AND key=?",
                (team_id, actor, key),
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def state_put(self, team_id: str, actor: str, key: str, value: Any) -> None:
        text = dumps(value)
        with self.lock:
            self.conn.execute(
                "INSERT OR REPLACE INTO state VALUES (?, ?, ?, ?)", (team_id, actor, key, text)
            )

    def state_delete(self, team_id: str, actor: str, key: str) -> None:
        with self.lock:
            self.conn.execute(
                "DELETE FROM state WHERE team_id=? AND actor=? AND key=?", (team_id, actor, key)
            )

    def state_items(self, team_id: str, actor: str, prefix: str = "") -> list[tuple[str, Any]]:
        with self.lock:
            rows = self.conn.execute(
                "SELECT key, value FROM state WHERE team_id=? AND actor=? AND key>=? AND key<? "
                "ORDER BY key",
                (team_id, actor, prefix, prefix + _KEY_END),
            ).fetchall()
        return [(key, json.loads(value)) for key, value in rows]

    # ---- events ------------------------------------------------------------------------------

    def last_seqs(self, team_id: str) -> dict[str, int]:
        with self.lock:
            rows = self.conn.execute(
                "SELECT tool_id, MAX(seq) FROM events WHERE team_id=? GROUP BY tool_id", (team_id,)
            )
            return {tool_id: int(seq) for tool_id, seq in rows}

    def append_event(
        self, team_id: str, tool_id: str, seq: int, payload: str, timestamp: float
    ) -> int:
        with self.lock:
            cur = self.conn.execute(
                "INSERT INTO events (team_id, tool_id, seq, payload, timestamp) "
                "VALUES (?, ?, ?, ?, ?)",
                (team_id, tool_id, seq, payload, timestamp),
            )
            return int(cur.lastrowid or 0)

    def read_events(
        self, team_id: str, after: int, limit: int = 1000
    ) -> list[tuple[int, str, int, str, float]]:
        """Committed events of ``team_id`` with ``pos > after``, in log order."""
        with self.lock:
            return self.conn.execute(
                "SELECT pos, tool_id, seq, payload, timestamp FROM events "
                "WHERE team_id=? AND pos>? ORDER BY pos LIMIT ?",
                (team_id, after, limit),
            ).fetchall()


class StateNamespace:
    """One tool actor's durable key/value state: one SQLite row per key.

    Values are JSON (pydantic models are dumped). Each ``put``/``delete`` commits on its own;
    ``with state.batch():`` makes several of them (and events emitted inside) one transaction.
    """

    def __init__(self, store: TeamStore, team_id: str, actor: str) -> None:
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

    def batch(self) -> Any:
        """A context manager: every put/delete/emit inside commits atomically at exit."""
        return self._store.transaction()
