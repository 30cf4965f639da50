"""The SQLite team store: tool-actor state, the event log, recorded actors, in one file.

Its schema and migrations are :mod:`toolcards.stores.sqlite.schema`'s. A file-backed store runs
in WAL mode, so a process killed mid-write leaves the last committed transaction intact, and it
is guarded by an exclusive lock file (:mod:`toolcards.stores.sqlite.file`): one writing process
per store file (PostgreSQL is the store for teams that span processes:
:mod:`toolcards.stores.postgres.team`).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolcards.stores import applied_calls
from toolcards.stores.base import (
    SCHEMA_VERSION,
    AppliedCall,
    Compaction,
    EventRow,
    StateNamespace,
    Store,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    StoreUnavailable,
    dumps,
    key_end,
)
from toolcards.stores.events_sql import compact
from toolcards.stores.rows import read_page, read_value
from toolcards.stores.sqlite.connect import connect, database_path
from toolcards.stores.sqlite.file import LockFile, cannot_open, check_location
from toolcards.stores.sqlite.schema import is_current, migrate

__all__ = [
    "SCHEMA_VERSION",
    "StateNamespace",
    "StoreClosedError",
    "StoreLockedError",
    "TeamStore",
    "dumps",
]

BUSY_TIMEOUT = 5.0
"""Seconds a statement waits for another connection's lock on the file before the write is
a retry (:class:`StoreUnavailable`): under an actor's ask deadline (10 s), so the caller hears
"locked" and not a timeout. The audit and approval files wait longer
(:data:`toolcards.stores.sqlite.connect.BUSY_TIMEOUT`): no actor waits on their writes."""


def _below(prefix: str) -> tuple[str, tuple[str, ...]]:
    """The condition (and its parameter) keeping keys under ``prefix``'s end: none when no
    key is above them all (:func:`~toolcards.stores.rows.key_end`)."""
    end = key_end(prefix)
    return ("", ()) if end is None else (" AND key<?", (end,))


class TeamStore(Store):
    """A thread-safe SQLite store (one connection, one re-entrant lock).

    ``path`` is a file path or ``":memory:"``. ``durable=True`` fsyncs every commit
    (power-loss safe); the default survives process kills. ``read_only=True`` opens a file to
    be looked at (a dashboard of it): without the writer's lock file, so the process that
    writes it keeps running beside it, and without creating or migrating anything; it reads
    what that process commits.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        durable: bool = False,
        read_only: bool = False,
    ):
        super().__init__()
        self.location = str(path)
        self.in_memory = self.location == ":memory:"
        self._depth = 0
        self._after_commit: list[Callable[[], Any]] = []
        self._dirty: set[tuple[str, str]] = set()
        """(team, actor) pairs whose state or events the open transaction changed."""
        self._lockfile: LockFile | None = None
        self._conn: sqlite3.Connection | None = None
        read_only = read_only and not self.in_memory
        if not self.in_memory:
            try:
                file = database_path(Path(self.location).expanduser())
            except sqlite3.Error as exc:
                raise cannot_open(Path(self.location), exc) from None
            check_location(file)
            self.location = str(file)
        if not (self.in_memory or read_only):
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
                self._lockfile = LockFile(file.with_name(file.name + ".lock"))
                self._lockfile.acquire(file)
            except OSError as exc:
                raise cannot_open(file, exc) from None
        try:
            # read-only: cannot create the file nor write it; does not block the writer
            self._conn = connect(self.location, read_only=read_only, timeout=BUSY_TIMEOUT)
            if read_only:
                self._check_readable()
            else:
                self._setup(durable)
        except sqlite3.Error as exc:
            self._release()
            raise cannot_open(Path(self.location), exc) from None
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lockfile is not None:
            self._lockfile.release()

    def _setup(self, durable: bool) -> None:
        conn = self.conn
        if not self.in_memory:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            migrate(conn, self.location)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _check_readable(self) -> None:
        """A reader migrates nothing: a layout older than this code's is refused."""
        conn = self.conn
        if not is_current(conn, self.location):
            raise StoreError(
                f"store {self.location} has an older layout than this toolcards reads: open "
                "it once with a writer (toolcards serve or call on its config), then retry"
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
        with self.lock:
            conn = self.conn
            if self._depth == 0:
                self._begin(conn)
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    self._roll_back(conn)
                raise
            self._depth -= 1
            if self._depth:
                return
            try:
                self._bump_versions(conn)
                conn.execute("COMMIT")
            except BaseException:
                self._roll_back(conn)
                raise
            callbacks, self._after_commit = self._after_commit, []
        for callback in callbacks:
            callback()

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``; one that fails counts as a lost write (its caller may hold in
        memory what it was about to write), and a file locked by another connection past
        the busy timeout is a retry."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self.note_lost_write()
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise StoreUnavailable(
                    f"store {self.location} is locked by another connection ({exc}); retry"
                ) from None
            raise

    def _bump_versions(self, conn: sqlite3.Connection) -> None:
        """Before a commit: move the state version of every actor the transaction changed."""
        if self._dirty:
            dirty, self._dirty = sorted(self._dirty), set()
            conn.executemany(
                "INSERT INTO state_versions VALUES (?, ?, 1) ON CONFLICT(team_id, actor) "
                "DO UPDATE SET version = version + 1",
                dirty,
            )

    def _roll_back(self, conn: sqlite3.Connection) -> None:
        self._after_commit.clear()
        self._dirty.clear()
        self.note_lost_write()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        for hook in self.rollback_hooks:
            hook()

    def after_commit(self, callback: Callable[[], Any]) -> None:
        with self.lock:
            if self._depth:
                self._after_commit.append(callback)
                return
        callback()

    def checkpoint(self) -> None:
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

    # ---- teams and actors --------------------------------------------------------------------

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
        with self.lock:
            self.conn.execute(
                "INSERT INTO actors VALUES (?, ?, ?, NULL, ?, ?) ON CONFLICT(team_id, name) "
                "DO UPDATE SET actor_cls=excluded.actor_cls, config=excluded.config",
                (team_id, name, tag, config, time.time()),
            )

    def recorded_actors(self, team_id: str) -> list[tuple[str, str, str | None]]:
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
        return read_value(actor, key, None if row is None else row[0])

    def state_put(self, team_id: str, actor: str, key: str, value: Any) -> None:
        text = dumps(value)
        with self.transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO state VALUES (?, ?, ?, ?)", (team_id, actor, key, text)
            )
            self._dirty.add((team_id, actor))

    def state_delete(self, team_id: str, actor: str, key: str) -> None:
        with self.transaction():
            self.conn.execute(
                "DELETE FROM state WHERE team_id=? AND actor=? AND key=?", (team_id, actor, key)
            )
            self._dirty.add((team_id, actor))

    def writes_pending(self, team_id: str, actor: str) -> bool:
        return (team_id, actor) in self._dirty

    def applied_call(self, team_id: str, key: str) -> AppliedCall | None:
        with self.lock:
            return applied_calls.find(self.conn.execute, "", team_id, key)

    def record_applied(self, team_id: str, key: str, actor: str, digest: str, result: str) -> None:
        with self.transaction():
            applied_calls.record(self.conn.execute, "", team_id, key, actor, digest, result)

    def state_version(self, team_id: str, actor: str) -> int:
        with self.lock:
            row = self.conn.execute(
                "SELECT version FROM state_versions WHERE team_id=? AND actor=?", (team_id, actor)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def state_items(
        self, team_id: str, actor: str, prefix: str = "", *, after: str = "", limit: int = 0
    ) -> list[tuple[str, Any]]:
        below, end = _below(prefix)

        def fetch(low: str, inclusive: bool, limit: int) -> list[tuple[str, str]]:
            with self.lock:
                return self.conn.execute(
                    f"SELECT key, value FROM state WHERE team_id=? AND actor=? "
                    f"AND key{'>=' if inclusive else '>'}?{below} ORDER BY key LIMIT ?",
                    (team_id, actor, low, *end, limit or -1),
                ).fetchall()

        low, inclusive = (after, False) if after > prefix else (prefix, True)
        return read_page(fetch, actor, low, inclusive, limit)

    def state_count(self, team_id: str, actor: str, prefix: str = "") -> int:
        below, end = _below(prefix)
        with self.lock:
            row = self.conn.execute(
                f"SELECT COUNT(*) FROM state WHERE team_id=? AND actor=? AND key>=?{below}",
                (team_id, actor, prefix, *end),
            ).fetchone()
        return int(row[0])

    # ---- events ------------------------------------------------------------------------------

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
        with self.transaction():
            conn = self.conn
            self._dirty.add((team_id, tool_id))
            seq = conn.execute(
                "INSERT INTO tool_seqs VALUES (?, ?, 1) ON CONFLICT(team_id, tool_id) "
                "DO UPDATE SET seq = seq + 1 RETURNING seq",
                (team_id, tool_id),
            ).fetchone()[0]
            found = conn.execute(
                "UPDATE teams SET last_pos = last_pos + 1 WHERE team_id=? RETURNING last_pos",
                (team_id,),
            ).fetchone()
            if found is None:  # a log written before its team row (tests, tools)
                self.open_team(team_id)
                found = conn.execute(
                    "UPDATE teams SET last_pos = last_pos + 1 WHERE team_id=? RETURNING last_pos",
                    (team_id,),
                ).fetchone()
            position = int(found[0])
            conn.execute(
                "INSERT INTO events (team_id, tool_id, seq, payload, timestamp, payload_type, "
                "team_pos, event_id, sender, display_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    team_id,
                    tool_id,
                    seq,
                    payload,
                    timestamp,
                    payload_type,
                    position,
                    event_id,
                    sender,
                    display_type,
                ),
            )
        return position, int(seq)

    def read_events(self, team_id: str, after: int, limit: int = 1000) -> list[EventRow]:
        with self.lock:
            rows = self.conn.execute(
                "SELECT team_pos, tool_id, seq, payload, payload_type, timestamp, event_id, "
                "sender, display_type FROM events "
                "WHERE team_id=? AND team_pos>? ORDER BY team_pos LIMIT ?",
                (team_id, after, limit),
            ).fetchall()
        return [EventRow(*row) for row in rows]

    def last_seq(self, team_id: str, tool_id: str) -> int:
        with self.lock:
            row = self.conn.execute(
                "SELECT seq FROM tool_seqs WHERE team_id=? AND tool_id=?", (team_id, tool_id)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def last_position(self, team_id: str) -> int:
        with self.lock:
            row = self.conn.execute(
                "SELECT last_pos FROM teams WHERE team_id=?", (team_id,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def compact_events(
        self, team_id: str, *, keep_per_tool: int | None, before: float | None
    ) -> list[Compaction]:
        with self.transaction():
            return compact(
                self.conn.execute, "", team_id, keep_per_tool=keep_per_tool, before=before
            )
