"""The PostgreSQL team store: one team held by many processes and machines at once.

This module owns the PostgreSQL schema (a version table; created or migrated on first use)
and all of its SQL. Events are numbered by the store under a row lock of the team, so
positions and per-tool seqs stay gap-free under concurrent writers; commits of events are
announced with ``NOTIFY`` and a listener thread wakes this process's subscribers, without
polling. Connection loss surfaces as :class:`StoreUnavailable` (a retryable error) and the
next call reconnects. A URL's password never appears in ``location``, errors or ``repr``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from toolcards.stores import applied_calls
from toolcards.stores.base import (
    EVENT_ENVELOPE_COLUMNS,
    LIFECYCLE_TOOL,
    SCHEMA_VERSION,
    AppliedCall,
    Compaction,
    DatabaseClosed,
    DatabaseUnavailable,
    EventRow,
    SchemaTooNew,
    Store,
    StoreClosedError,
    StoreUnavailable,
    check_text,
    compaction_marker,
    dumps,
)
from toolcards.stores.postgres.connections import Connections, ThreadState
from toolcards.stores.postgres.limits import Timeouts

log = logging.getLogger(__name__)

CHANNEL = "toolcards_events"
_KEY_END = chr(0x10FFFF)
_SCHEMA_LOCK = 7_264_331_942  # advisory lock id guarding schema creation

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS toolcards_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS toolcards_teams (team_id TEXT PRIMARY KEY, "
    "created_at DOUBLE PRECISION NOT NULL, stopped_at DOUBLE PRECISION, "
    "last_pos BIGINT NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS toolcards_actors (team_id TEXT NOT NULL, name TEXT NOT NULL, "
    "tag TEXT NOT NULL, config TEXT, created_at DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (team_id, name))",
    "CREATE TABLE IF NOT EXISTS toolcards_state (team_id TEXT NOT NULL, actor TEXT NOT NULL, "
    'key TEXT COLLATE "C" NOT NULL, value TEXT NOT NULL, PRIMARY KEY (team_id, actor, key))',
    "CREATE TABLE IF NOT EXISTS toolcards_events (team_id TEXT NOT NULL, "
    "team_pos BIGINT NOT NULL, tool_id TEXT NOT NULL, seq BIGINT NOT NULL, "
    "payload TEXT NOT NULL, payload_type TEXT, timestamp DOUBLE PRECISION NOT NULL, "
    "event_id TEXT, sender TEXT, display_type TEXT, PRIMARY KEY (team_id, team_pos))",
    "CREATE UNIQUE INDEX IF NOT EXISTS toolcards_events_tool_seq "
    "ON toolcards_events (team_id, tool_id, seq)",
    "CREATE TABLE IF NOT EXISTS toolcards_tool_seqs (team_id TEXT NOT NULL, "
    "tool_id TEXT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (team_id, tool_id))",
    "CREATE TABLE IF NOT EXISTS toolcards_actor_versions (team_id TEXT NOT NULL, "
    "actor TEXT NOT NULL, version BIGINT NOT NULL, PRIMARY KEY (team_id, actor))",
    "CREATE TABLE IF NOT EXISTS toolcards_state_tombstones (team_id TEXT NOT NULL, "
    'actor TEXT NOT NULL, changed BIGINT NOT NULL, key TEXT COLLATE "C" NOT NULL, '
    "PRIMARY KEY (team_id, actor, changed, key))",
    "CREATE TABLE IF NOT EXISTS toolcards_state_pruned (team_id TEXT NOT NULL, "
    "actor TEXT NOT NULL, through BIGINT NOT NULL, PRIMARY KEY (team_id, actor))",
]
_STATE_CHANGED = [  # rows written before the column read 0: older than any copy's version
    "ALTER TABLE toolcards_state ADD COLUMN IF NOT EXISTS changed BIGINT NOT NULL DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS toolcards_state_changed "
    "ON toolcards_state (team_id, actor, changed)",
]


TOMBSTONES_KEPT = 10_000
"""Deleted keys remembered per actor (a copy older than the oldest one reloads fully)."""


def _bump_versions(state: ThreadState, cur: Any) -> None:
    """Before a commit: move the version of every actor the transaction changed by one, and
    stamp the state rows it wrote (and a tombstone per key it deleted) with that version."""
    for team_id, actor in sorted(state.dirty):
        cur.execute(
            "INSERT INTO toolcards_actor_versions VALUES (%s, %s, 1) "
            "ON CONFLICT (team_id, actor) DO UPDATE "
            "SET version = toolcards_actor_versions.version + 1 RETURNING version",
            (team_id, actor),
        )
        version = int(cur.fetchone()[0])
        keys = state.keys.get((team_id, actor), {})
        if put := sorted(key for key, gone in keys.items() if not gone):
            cur.execute(
                "UPDATE toolcards_state SET changed=%s "
                "WHERE team_id=%s AND actor=%s AND key = ANY(%s)",
                (version, team_id, actor, put),
            )
        if gone := sorted(key for key, gone in keys.items() if gone):
            cur.executemany(
                "INSERT INTO toolcards_state_tombstones VALUES (%s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                [(team_id, actor, version, key) for key in gone],
            )
            _prune_tombstones(cur, team_id, actor)


def _prune_tombstones(cur: Any, team_id: str, actor: str) -> None:
    """Keep about the newest :data:`TOMBSTONES_KEPT` tombstones of an actor; the version
    they are pruned through is recorded (changes since an older one cannot be told)."""
    cur.execute(
        "SELECT changed FROM toolcards_state_tombstones WHERE team_id=%s AND actor=%s "
        "ORDER BY changed DESC OFFSET %s LIMIT 1",
        (team_id, actor, TOMBSTONES_KEPT),
    )
    row = cur.fetchone()
    if row is None:
        return
    through = int(row[0])
    cur.execute(
        "DELETE FROM toolcards_state_tombstones WHERE team_id=%s AND actor=%s AND changed <= %s",
        (team_id, actor, through),
    )
    cur.execute(
        "INSERT INTO toolcards_state_pruned VALUES (%s, %s, %s) ON CONFLICT (team_id, actor) "
        "DO UPDATE SET through = GREATEST(toolcards_state_pruned.through, EXCLUDED.through)",
        (team_id, actor, through),
    )


def _placeholders(cur: Any) -> applied_calls.Execute:
    """Runs the shared SQL (``?`` placeholders) on a psycopg cursor."""

    def execute(sql: str, params: tuple[Any, ...]) -> Any:
        cur.execute(sql.replace("?", "%s"), params)
        return cur

    return execute


class _NoLock:
    """Stands in for the store lock: every thread has its own connection and transaction."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NoLock()


class PostgresStore(Store):
    """A team store in a PostgreSQL database (``postgresql://user[:password]@host:port/db``).

    Every thread that uses the store gets its own connection and transaction (an actor's call
    never waits for another actor's transaction in this process); ``connect_timeout`` bounds
    every (re)connection attempt and ``timeouts`` every statement (see
    :mod:`toolcards.stores.postgres.limits`; values in the URL win).
    """

    shared = True

    def __init__(
        self, url: str, *, connect_timeout: float = 5.0, timeouts: Timeouts | None = None
    ) -> None:
        super().__init__()
        self.lock = _NO_LOCK  # type: ignore[assignment]  # each thread has its own connection
        self._db = Connections(
            url,
            connect_timeout=connect_timeout,
            timeouts=timeouts,
            before_commit=_bump_versions,
            on_rollback=self._rolled_back,
        )
        self.location = self._db.location
        self._watchers: dict[str, list[Callable[[], Any]]] = {}
        self._watch_lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._stop_listening = threading.Event()
        try:
            self._migrate()
        except DatabaseUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None

    def __repr__(self) -> str:
        return f"<PostgresStore {self.location}>"

    def _rolled_back(self) -> None:
        for hook in self.rollback_hooks:
            hook()

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        try:
            with self._db.cursor() as cur:
                yield cur
        except DatabaseUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None
        except DatabaseClosed as exc:
            raise StoreClosedError(f"store {self.location} is closed") from exc

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of a read (a connection found lost is reopened once, outside a
        transaction)."""

        def query(cur: Any) -> list[tuple[Any, ...]]:
            cur.execute(sql, params)
            return list(cur.fetchall())

        try:
            return self._db.read(query)
        except DatabaseUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None
        except DatabaseClosed as exc:
            raise StoreClosedError(f"store {self.location} is closed") from exc

    def _migrate(self) -> None:
        with self.transaction(), self._cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in [*_SCHEMA, *applied_calls.statements("toolcards_")]:
                cur.execute(statement)  # a store written before a table gains it here
            cur.execute(
                "SELECT column_name FROM information_schema.columns WHERE "
                "table_schema = current_schema() AND table_name = 'toolcards_events'"
            )
            columns = {str(row[0]) for row in cur.fetchall()}
            for name, ddl in EVENT_ENVELOPE_COLUMNS:  # older rows keep NULL there
                if name not in columns:
                    cur.execute(f"ALTER TABLE toolcards_events ADD COLUMN {name} {ddl}")
            cur.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = 'toolcards_state' AND column_name = 'changed'"
            )
            if cur.fetchone() is None:  # checked first: the ALTER would lock out every writer
                for statement in _STATE_CHANGED:
                    cur.execute(statement)
            cur.execute("SELECT value FROM toolcards_meta WHERE key='schema_version'")
            row = cur.fetchone()
            if row is not None and int(row[0]) > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"store {self.location} has schema {row[0]}, newer than this toolcards "
                    f"({SCHEMA_VERSION}); upgrade toolcards to open it"
                )
            cur.execute(
                "INSERT INTO toolcards_meta VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(SCHEMA_VERSION),),
            )

    # ---- transactions ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._db.closed

    @contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            with self._db.transaction():
                yield
        except DatabaseUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None
        except DatabaseClosed as exc:
            raise StoreClosedError(f"store {self.location} is closed") from exc

    @contextmanager
    def _write(self, team_id: str, actor: str, **texts: str) -> Iterator[Any]:
        """A cursor inside a transaction that marks ``actor``'s version for a bump; ``texts``
        (named by field) are refused when PostgreSQL cannot store them."""
        with self.transaction():
            self._db.state().dirty.add((team_id, actor))  # a write was tried
            for field, text in texts.items():
                check_text(field.replace("_", " "), text)
            with self._cursor() as cur:
                yield cur

    def lost_writes(self) -> int:
        return self._db.state().lost_writes

    def after_commit(self, callback: Callable[[], Any]) -> None:
        self._db.after_commit(callback)

    def close(self) -> None:
        self._stop_listening.set()
        self._db.close()
        if self._listener is not None:
            self._listener.join(timeout=2.0)

    # ---- teams and actors --------------------------------------------------------------------

    def team_exists(self, team_id: str) -> bool:
        return bool(self._rows("SELECT 1 FROM toolcards_teams WHERE team_id=%s", (team_id,)))

    def open_team(self, team_id: str) -> None:
        with self._cursor() as cur:
            cur.execute(
                "INSERT INTO toolcards_teams (team_id, created_at) VALUES (%s, %s) "
                "ON CONFLICT (team_id) DO UPDATE SET stopped_at = NULL",
                (team_id, time.time()),
            )

    def mark_stopped(self, team_id: str) -> None:
        with self._cursor() as cur:
            cur.execute(
                "UPDATE toolcards_teams SET stopped_at=%s WHERE team_id=%s",
                (time.time(), team_id),
            )

    def record_actor(self, team_id: str, name: str, tag: str, config: str | None) -> None:
        check_text("actor name", name)
        with self._cursor() as cur:
            cur.execute(
                "INSERT INTO toolcards_actors VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (team_id, name) DO UPDATE SET tag = EXCLUDED.tag, "
                "config = EXCLUDED.config",
                (team_id, name, tag, config, time.time()),
            )

    def recorded_actors(self, team_id: str) -> list[tuple[str, str, str | None]]:
        rows = self._rows(
            "SELECT name, tag, config FROM toolcards_actors WHERE team_id=%s ORDER BY created_at",
            (team_id,),
        )
        return [(str(n), str(t), c) for n, t, c in rows]

    # ---- state -------------------------------------------------------------------------------

    def state_get(self, team_id: str, actor: str, key: str) -> Any | None:
        check_text("name or key", key)
        rows = self._rows(
            "SELECT value FROM toolcards_state WHERE team_id=%s AND actor=%s AND key=%s",
            (team_id, actor, key),
        )
        return json.loads(rows[0][0]) if rows else None

    def state_put(self, team_id: str, actor: str, key: str, value: Any) -> None:
        text = dumps(value)
        with self._write(team_id, actor, name_or_key=key) as cur:
            self._db.state().keys.setdefault((team_id, actor), {})[key] = False
            cur.execute(
                "INSERT INTO toolcards_state VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (team_id, actor, key) DO UPDATE SET value = EXCLUDED.value",
                (team_id, actor, key, text),
            )

    def state_delete(self, team_id: str, actor: str, key: str) -> None:
        with self._write(team_id, actor, name_or_key=key) as cur:
            self._db.state().keys.setdefault((team_id, actor), {})[key] = True
            cur.execute(
                "DELETE FROM toolcards_state WHERE team_id=%s AND actor=%s AND key=%s",
                (team_id, actor, key),
            )

    def state_items(
        self, team_id: str, actor: str, prefix: str = "", *, after: str = "", limit: int = 0
    ) -> list[tuple[str, Any]]:
        low, op = (after, ">") if after > prefix else (prefix, ">=")
        sql = (
            f"SELECT key, value FROM toolcards_state WHERE team_id=%s AND actor=%s "
            f"AND key {op} %s AND key < %s ORDER BY key"
        )
        params: tuple[Any, ...] = (team_id, actor, low, prefix + _KEY_END)
        if limit:
            sql += " LIMIT %s"
            params = (*params, limit)
        check_text("key prefix", prefix)
        check_text("key", after)
        return [(str(key), json.loads(value)) for key, value in self._rows(sql, params)]

    def state_count(self, team_id: str, actor: str, prefix: str = "") -> int:
        check_text("key prefix", prefix)
        rows = self._rows(
            "SELECT COUNT(*) FROM toolcards_state WHERE team_id=%s AND actor=%s "
            "AND key >= %s AND key < %s",
            (team_id, actor, prefix, prefix + _KEY_END),
        )
        return int(rows[0][0])

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
        texts = {"tool_id": tool_id} if sender is None else {"tool_id": tool_id, "sender": sender}
        with self._write(team_id, tool_id, **texts) as cur:
            cur.execute(
                "INSERT INTO toolcards_tool_seqs VALUES (%s, %s, 1) "
                "ON CONFLICT (team_id, tool_id) DO UPDATE SET seq = toolcards_tool_seqs.seq + 1 "
                "RETURNING seq",
                (team_id, tool_id),
            )
            seq = int(cur.fetchone()[0])
            cur.execute(
                "INSERT INTO toolcards_teams (team_id, created_at, last_pos) VALUES (%s, %s, 1) "
                "ON CONFLICT (team_id) DO UPDATE SET last_pos = toolcards_teams.last_pos + 1 "
                "RETURNING last_pos",
                (team_id, time.time()),
            )
            position = int(cur.fetchone()[0])
            cur.execute(
                "INSERT INTO toolcards_events (team_id, team_pos, tool_id, seq, payload, "
                "payload_type, timestamp, event_id, sender, display_type) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    team_id,
                    position,
                    tool_id,
                    seq,
                    payload,
                    payload_type,
                    timestamp,
                    event_id,
                    sender,
                    display_type,
                ),
            )
            cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, team_id))
        return position, seq

    def read_events(self, team_id: str, after: int, limit: int = 1000) -> list[EventRow]:
        rows = self._rows(
            "SELECT team_pos, tool_id, seq, payload, payload_type, timestamp, event_id, "
            "sender, display_type FROM toolcards_events WHERE team_id=%s AND team_pos > %s "
            "ORDER BY team_pos LIMIT %s",
            (team_id, after, limit),
        )
        return [
            EventRow(int(p), t, int(s), d, k, float(ts), i, who, dt)
            for p, t, s, d, k, ts, i, who, dt in rows
        ]

    def last_seq(self, team_id: str, tool_id: str) -> int:
        rows = self._rows(
            "SELECT seq FROM toolcards_tool_seqs WHERE team_id=%s AND tool_id=%s",
            (team_id, tool_id),
        )
        return int(rows[0][0]) if rows else 0

    def last_position(self, team_id: str) -> int:
        rows = self._rows("SELECT last_pos FROM toolcards_teams WHERE team_id=%s", (team_id,))
        return int(rows[0][0]) if rows else 0

    def compact_events(
        self, team_id: str, *, keep_per_tool: int | None, before: float | None
    ) -> list[Compaction]:
        done: list[Compaction] = []
        with self.transaction(), self._cursor() as cur:
            cur.execute(
                "SELECT tool_id, seq FROM toolcards_tool_seqs WHERE team_id=%s AND tool_id<>%s",
                (team_id, LIFECYCLE_TOOL),
            )
            for tool_id, last in cur.fetchall():
                through = 0 if keep_per_tool is None else int(last) - keep_per_tool
                if before is not None:
                    cur.execute(
                        "SELECT MAX(seq) FROM toolcards_events WHERE team_id=%s AND tool_id=%s "
                        "AND timestamp < %s",
                        (team_id, tool_id, before),
                    )
                    through = max(through, int(cur.fetchone()[0] or 0))
                if through <= 0:
                    continue
                cur.execute(
                    "DELETE FROM toolcards_events WHERE team_id=%s AND tool_id=%s AND seq < %s",
                    (team_id, tool_id, through),
                )
                removed = cur.rowcount
                marker = dumps(compaction_marker(through))
                cur.execute(
                    "UPDATE toolcards_events SET payload=%s, payload_type=NULL, sender=NULL WHERE "
                    "team_id=%s AND tool_id=%s AND seq=%s AND payload <> %s",
                    (marker, team_id, tool_id, through, marker),
                )
                if removed or cur.rowcount:
                    done.append(Compaction(str(tool_id), through, removed + cur.rowcount))
        return done

    # ---- cross-process coherence -------------------------------------------------------------

    def actor_version(self, team_id: str, actor: str) -> int:
        rows = self._rows(
            "SELECT version FROM toolcards_actor_versions WHERE team_id=%s AND actor=%s",
            (team_id, actor),
        )
        return int(rows[0][0]) if rows else 0

    def state_changes(
        self, team_id: str, actor: str, since: int
    ) -> tuple[list[tuple[str, Any]], list[str]] | None:
        rows = self._rows(
            "SELECT key, value FROM toolcards_state WHERE team_id=%s AND actor=%s "
            "AND changed > %s ORDER BY key",
            (team_id, actor, since),
        )
        gone = self._rows(
            "SELECT DISTINCT t.key FROM toolcards_state_tombstones t WHERE t.team_id=%s "
            "AND t.actor=%s AND t.changed > %s AND NOT EXISTS (SELECT 1 FROM toolcards_state s "
            "WHERE s.team_id=t.team_id AND s.actor=t.actor AND s.key=t.key) ORDER BY t.key",
            (team_id, actor, since),
        )
        pruned = self._rows(  # read last: a prune that raced the reads above shows here
            "SELECT through FROM toolcards_state_pruned WHERE team_id=%s AND actor=%s",
            (team_id, actor),
        )
        if pruned and since < int(pruned[0][0]):
            return None  # tombstones it would need are gone
        return [(str(k), json.loads(v)) for k, v in rows], [str(k) for (k,) in gone]

    def secret_location(self) -> str:
        return self._db.url

    def writes_pending(self, team_id: str, actor: str) -> bool:
        return (team_id, actor) in self._db.state().dirty

    def applied_call(self, team_id: str, key: str) -> AppliedCall | None:
        def query(cur: Any) -> AppliedCall | None:
            return applied_calls.find(_placeholders(cur), "toolcards_", team_id, key)

        try:
            return self._db.read(query)
        except DatabaseUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None
        except DatabaseClosed as exc:
            raise StoreClosedError(f"store {self.location} is closed") from exc

    def record_applied(self, team_id: str, key: str, actor: str, digest: str, result: str) -> None:
        check_text("call id", key)
        with self.transaction(), self._cursor() as cur:
            execute = _placeholders(cur)
            applied_calls.record(execute, "toolcards_", team_id, key, actor, digest, result)

    def lock_actor(self, team_id: str, actor: str) -> None:
        with self._cursor() as cur:
            cur.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{team_id}/{actor}",)
            )

    def watch(self, team_id: str, callback: Callable[[], Any]) -> Callable[[], None]:
        with self._watch_lock:
            self._watchers.setdefault(team_id, []).append(callback)
            if self._listener is None:
                self._listener = threading.Thread(
                    target=self._listen, name="toolcards-pg-listen", daemon=True
                )
                self._listener.start()

        def unwatch() -> None:
            with self._watch_lock:
                found = self._watchers.get(team_id, [])
                if callback in found:
                    found.remove(callback)

        return unwatch

    def _listen(self) -> None:
        """Wake the watchers of a team on each NOTIFY; reconnect (backing off) when the
        connection drops, and wake everyone after a reconnect (a notice may have been lost)."""
        delay = 0.1
        while not self._stop_listening.is_set():
            try:
                conn = self._db.open()
            except DatabaseUnavailable:
                self._stop_listening.wait(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.1
            try:
                conn.execute(f"LISTEN {CHANNEL}")
                self._wake_all()
                while not self._stop_listening.is_set():
                    for note in conn.notifies(timeout=0.5):
                        self._wake(note.payload)
            except Exception:  # the connection dropped: reconnect
                log.debug("event listener of %s lost its connection", self.location)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()

    def _wake(self, team_id: str) -> None:
        with self._watch_lock:
            callbacks = list(self._watchers.get(team_id, ()))
        for callback in callbacks:
            callback()

    def _wake_all(self) -> None:
        with self._watch_lock:
            teams = list(self._watchers)
        for team_id in teams:
            self._wake(team_id)
