"""The SQLite team store: tool-actor state, the event log, recorded actors, in one file.

This module owns the SQLite schema and its migrations. A file-backed store runs in WAL mode, so
a process killed mid-write leaves the last committed transaction intact, and it is guarded by
an exclusive lock file: one writing process per store file (PostgreSQL is the store for teams
that span processes: :mod:`toolcards.stores.postgres.team`).
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from toolcards.stores import applied_calls
from toolcards.stores.base import (
    EVENT_ENVELOPE_COLUMNS,
    LIFECYCLE_TOOL,
    SCHEMA_VERSION,
    AppliedCall,
    Compaction,
    EventRow,
    SchemaTooNew,
    StateNamespace,
    Store,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    compaction_marker,
    dumps,
)

__all__ = [
    "SCHEMA_VERSION",
    "StateNamespace",
    "StoreClosedError",
    "StoreLockedError",
    "TeamStore",
    "dumps",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS teams (
    team_id TEXT PRIMARY KEY, created_at REAL NOT NULL, stopped_at REAL,
    last_pos INTEGER NOT NULL DEFAULT 0
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
    seq INTEGER NOT NULL, payload TEXT NOT NULL, timestamp REAL NOT NULL,
    payload_type TEXT, team_pos INTEGER, event_id TEXT, sender TEXT, display_type TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS events_tool_seq ON events (team_id, tool_id, seq);
CREATE TABLE IF NOT EXISTS tool_seqs (
    team_id TEXT NOT NULL, tool_id TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (team_id, tool_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state_versions (
    team_id TEXT NOT NULL, actor TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (team_id, actor)
) WITHOUT ROWID
"""

_V1_TO_V2 = [
    "UPDATE events SET team_pos = ranked.n FROM (SELECT pos, ROW_NUMBER() OVER "
    "(PARTITION BY team_id ORDER BY pos) AS n FROM events) AS ranked "
    "WHERE events.pos = ranked.pos",
    "DROP INDEX IF EXISTS events_team_pos",
    "INSERT OR REPLACE INTO tool_seqs SELECT team_id, tool_id, MAX(seq) FROM events "
    "GROUP BY team_id, tool_id",
    "UPDATE teams SET last_pos = COALESCE((SELECT MAX(team_pos) FROM events e "
    "WHERE e.team_id = teams.team_id), 0)",
]
"""Version 1 -> 2: dense per-team positions and per-tool last seqs (payload types: NULL)."""

_KEY_END = chr(0x10FFFF)


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


def _check_location(file: Path) -> None:
    if file.is_dir():
        raise StoreError(
            f"store {file} is a directory; give a file path inside it, e.g. {file / 'team.db'}"
        )
    if str(file).startswith(("/proc/", "/sys/", "/dev/")):
        raise StoreError(f"store {file} is in a system directory; use a path in a writable folder")


def _cannot_open(file: Path, exc: BaseException) -> StoreError:
    reason = getattr(exc, "strerror", None) or str(exc)
    text = str(exc).lower()
    read_only = getattr(exc, "errno", None) in (errno.EROFS, errno.EACCES, errno.EPERM)
    if isinstance(exc, PermissionError) or read_only or "readonly" in text or "read-only" in text:
        hint = "the location is not writable: choose a writable folder (or fix its permissions)"
    elif isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
        hint = "the file is not a toolcards store: give another path"
    else:
        hint = "check that the folder exists and is writable"
    return StoreError(f"cannot open store {file}: {reason}; {hint}")


class TeamStore(Store):
    """A thread-safe SQLite store (one connection, one re-entrant lock).

    ``path`` is a file path or ``":memory:"``. ``durable=True`` fsyncs every commit
    (power-loss safe); the default survives process kills.
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, durable: bool = False):
        super().__init__()
        self.location = str(path)
        self.in_memory = self.location == ":memory:"
        self._depth = 0
        self._after_commit: list[Callable[[], Any]] = []
        self._dirty: set[tuple[str, str]] = set()
        """(team, actor) pairs whose state or events the open transaction changed."""
        self._lockfile: _LockFile | None = None
        self._conn: sqlite3.Connection | None = None
        if not self.in_memory:
            file = Path(self.location).expanduser().resolve()
            _check_location(file)
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
                self._lockfile = _LockFile(file.with_name(file.name + ".lock"))
                self._lockfile.acquire(file)
            except OSError as exc:
                raise _cannot_open(file, exc) from None
            self.location = str(file)
        try:
            self._conn = sqlite3.connect(
                self.location, check_same_thread=False, isolation_level=None
            )
            self._setup(durable)
        except sqlite3.Error as exc:
            self._release()
            raise _cannot_open(Path(self.location), exc) from None
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
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._migrate(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _migrate(self, conn: sqlite3.Connection) -> None:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        row = None
        if exists:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = SCHEMA_VERSION if row is None else int(row[0])
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"store {self.location} has schema {version}, newer than this toolcards "
                f"({SCHEMA_VERSION}); upgrade toolcards to open it"
            )
        if version < 2:  # tables of version 1 lack columns the new CREATEs would add
            conn.execute("ALTER TABLE events ADD COLUMN payload_type TEXT")
            conn.execute("ALTER TABLE events ADD COLUMN team_pos INTEGER")
            conn.execute("ALTER TABLE teams ADD COLUMN last_pos INTEGER NOT NULL DEFAULT 0")
        for statement in [*_SCHEMA.split(";"), *applied_calls.statements("")]:
            conn.execute(statement)  # a store written before a table gains it here
        columns = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
        for name, ddl in EVENT_ENVELOPE_COLUMNS:  # older rows keep NULL there
            if name not in columns:
                conn.execute(f"ALTER TABLE events ADD COLUMN {name} {ddl}")
        if version < 2:
            for statement in _V1_TO_V2:
                conn.execute(statement)
        conn.execute(
            "CREATE UNIQUE INDEX IF NOT EXISTS events_team_pos2 ON events (team_id, team_pos)"
        )
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
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
                conn.execute("BEGIN IMMEDIATE")
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
        return None if row is None else json.loads(row[0])

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
        low, inclusive = (after, False) if after > prefix else (prefix, True)
        with self.lock:
            rows = self.conn.execute(
                f"SELECT key, value FROM state WHERE team_id=? AND actor=? "
                f"AND key{'>=' if inclusive else '>'}? AND key<? ORDER BY key LIMIT ?",
                (team_id, actor, low, prefix + _KEY_END, limit or -1),
            ).fetchall()
        return [(key, json.loads(value)) for key, value in rows]

    def state_count(self, team_id: str, actor: str, prefix: str = "") -> int:
        with self.lock:
            row = self.conn.execute(
                "SELECT COUNT(*) FROM state WHERE team_id=? AND actor=? AND key>=? AND key<?",
                (team_id, actor, prefix, prefix + _KEY_END),
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
        done: list[Compaction] = []
        with self.transaction():
            conn = self.conn
            tools = conn.execute(
                "SELECT tool_id, seq FROM tool_seqs WHERE team_id=? AND tool_id<>?",
                (team_id, LIFECYCLE_TOOL),
            ).fetchall()
            for tool_id, last in tools:
                through = 0 if keep_per_tool is None else int(last) - keep_per_tool
                if before is not None:
                    row = conn.execute(
                        "SELECT MAX(seq) FROM events WHERE team_id=? AND tool_id=? AND timestamp<?",
                        (team_id, tool_id, before),
                    ).fetchone()
                    through = max(through, int(row[0] or 0))
                if through <= 0:
                    continue
                removed = conn.execute(
                    "DELETE FROM events WHERE team_id=? AND tool_id=? AND seq<?",
                    (team_id, tool_id, through),
                ).rowcount
                marker = dumps(compaction_marker(through))
                replaced = conn.execute(
                    "UPDATE events SET payload=?, payload_type=NULL, sender=NULL WHERE team_id=? "
                    "AND tool_id=? AND seq=? AND payload<>?",
                    (marker, team_id, tool_id, through, marker),
                ).rowcount
                if removed or replaced:
                    done.append(Compaction(tool_id, through, removed + replaced))
        return done
