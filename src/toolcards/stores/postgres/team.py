"""The PostgreSQL team store: one team held by many processes and machines at once.

Its schema (a version table; created or migrated on first use) is
:mod:`toolcards.stores.postgres.schema`'s, the actor versions that let copies catch up
:mod:`toolcards.stores.postgres.versions`'. Events are numbered by the store under a row lock
of the team, so positions and per-tool seqs stay gap-free under concurrent writers; the events
of a larger transaction are numbered just before its ``COMMIT``, with the version bumps in one
round trip, so the team's row stays locked only for that and the commit (every writer of the
team waits on it). Commits of events are announced with ``NOTIFY`` and a listener thread
(:mod:`toolcards.stores.postgres.listener`) wakes this process's subscribers, without
polling. Connection loss surfaces as :class:`StoreUnavailable` (a retryable error) and the
next call reconnects. A URL's password never appears in ``location``, errors or ``repr``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from toolcards.stores import applied_calls
from toolcards.stores.base import (
    AppliedCall,
    Compaction,
    DatabaseClosed,
    DatabaseUnavailable,
    EventRow,
    Store,
    StoreClosedError,
    StoreUnavailable,
    check_text,
    dumps,
    key_end,
)
from toolcards.stores.events_sql import compact
from toolcards.stores.postgres.connections import Connections, Later, ThreadState, placeholders
from toolcards.stores.postgres.limits import Timeouts
from toolcards.stores.postgres.listener import CHANNEL, EventListener
from toolcards.stores.postgres.schema import keyed_lock, migrate
from toolcards.stores.postgres.versions import (
    TOMBSTONES_KEPT,
    bump_versions,
    changes_query,
    read_changes,
    state_changes,
)
from toolcards.stores.rows import read_page, read_value

__all__ = ["CHANNEL", "TOMBSTONES_KEPT", "PostgresStore"]


class _NoLock:
    """Stands in for the store lock: every thread has its own connection and transaction."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NoLock()


def _below(prefix: str) -> tuple[str, tuple[str, ...]]:
    """The condition (and its parameter) keeping keys under ``prefix``'s end: none when no
    key is above them all (:func:`~toolcards.stores.rows.key_end`; keys compare by code
    point, the ``"C"`` collation of the key column)."""
    end = key_end(prefix)
    return ("", ()) if end is None else (" AND key < %s", (end,))


Changes = tuple[list[tuple[str, Any]], list[str]]


@dataclass(slots=True)
class _Held:
    """What a transaction read of an actor when its lock was granted (see ``lock_actor``)."""

    version: int
    seq: int
    """The seq of the actor's last event (its own events are numbered from it)."""
    since: int | None
    changes: Changes | None


class PostgresStore(Store):
    """A team store in a PostgreSQL database (``postgresql://user[:password]@host:port/db``).

    Every thread that uses the store gets its own connection and transaction (an actor's call
    never waits for another actor's transaction in this process); ``connect_timeout`` bounds
    every (re)connection attempt and ``timeouts`` every statement (see
    :mod:`toolcards.stores.postgres.limits`; values in the URL win).
    """

    shared = True
    transaction_per_thread = True

    def __init__(
        self, url: str, *, connect_timeout: float = 5.0, timeouts: Timeouts | None = None
    ) -> None:
        super().__init__()
        self.lock = _NO_LOCK  # type: ignore[assignment]  # each thread has its own connection
        self._db = Connections(
            url,
            connect_timeout=connect_timeout,
            timeouts=timeouts,
            before_commit=self._before_commit,
            on_rollback=self._rolled_back,
        )
        self.location = self._db.location
        self._events = EventListener(self._db, self.location)
        try:
            with self.transaction(), self._cursor() as cur:
                migrate(cur, self.location)
        except DatabaseUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None

    def __repr__(self) -> str:
        return f"<PostgresStore {self.location}>"

    @staticmethod
    def _before_commit(state: ThreadState, later: Later) -> None:
        """Just before ``COMMIT``, queued with the transaction's waiting writes and the
        ``COMMIT`` (one round trip): the version bumps of the actors it changed, then its
        events, numbered under the team's row lock, and their notices (the lock is taken
        last: the server holds it through the commit, without waiting on the client)."""
        bump_versions(state, later)
        for team_id in dict.fromkeys(team for team, _ in state.events):
            _insert_events(later, team_id, [row for team, row in state.events if team == team_id])
            later("SELECT pg_notify(%s, %s)", (CHANNEL, team_id))

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
    def _write(self, team_id: str, actor: str, **texts: str) -> Iterator[ThreadState]:
        """Inside a transaction that marks ``actor``'s version for a bump, its state; ``texts``
        (named by field) are refused when PostgreSQL cannot store them."""
        with self.transaction():
            state = self._db.state()
            state.dirty.add((team_id, actor))  # a write was tried
            for field, text in texts.items():
                check_text(field.replace("_", " "), text)
            yield state

    def _later(self, sql: str, params: tuple[Any, ...]) -> None:
        """A write nobody reads the result of, sent with the transaction's next statement."""
        try:
            self._db.later(sql, params)
        except DatabaseUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None
        except DatabaseClosed as exc:
            raise StoreClosedError(f"store {self.location} is closed") from exc

    def lost_writes(self) -> int:
        return self._db.state().lost_writes

    def after_commit(self, callback: Callable[[], Any]) -> None:
        self._db.after_commit(callback)

    def close(self) -> None:
        self._events.stop()
        self._db.close()
        self._events.join()

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
        return read_value(actor, key, rows[0][0] if rows else None)

    def state_put(self, team_id: str, actor: str, key: str, value: Any) -> None:
        text = dumps(value)
        with self._write(team_id, actor, name_or_key=key) as state:
            state.keys.setdefault((team_id, actor), {})[key] = False
            self._later(
                "INSERT INTO toolcards_state VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (team_id, actor, key) DO UPDATE SET value = EXCLUDED.value",
                (team_id, actor, key, text),
            )

    def state_delete(self, team_id: str, actor: str, key: str) -> None:
        with self._write(team_id, actor, name_or_key=key) as state:
            state.keys.setdefault((team_id, actor), {})[key] = True
            self._later(
                "DELETE FROM toolcards_state WHERE team_id=%s AND actor=%s AND key=%s",
                (team_id, actor, key),
            )

    def state_items(
        self, team_id: str, actor: str, prefix: str = "", *, after: str = "", limit: int = 0
    ) -> list[tuple[str, Any]]:
        check_text("key prefix", prefix)
        check_text("key", after)
        below, end = _below(prefix)

        def fetch(low: str, inclusive: bool, limit: int) -> list[tuple[str, str]]:
            sql = (
                f"SELECT key, value FROM toolcards_state WHERE team_id=%s AND actor=%s "
                f"AND key {'>=' if inclusive else '>'} %s{below} ORDER BY key"
            )
            params: tuple[Any, ...] = (team_id, actor, low, *end)
            if limit:
                sql += " LIMIT %s"
                params = (*params, limit)
            return [(str(key), value) for key, value in self._rows(sql, params)]

        low, inclusive = (after, False) if after > prefix else (prefix, True)
        return read_page(fetch, actor, low, inclusive, limit)

    def state_count(self, team_id: str, actor: str, prefix: str = "") -> int:
        check_text("key prefix", prefix)
        below, end = _below(prefix)
        rows = self._rows(
            f"SELECT COUNT(*) FROM toolcards_state WHERE team_id=%s AND actor=%s "
            f"AND key >= %s{below}",
            (team_id, actor, prefix, *end),
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
        """Append one event; ``(position, seq)``. Inside a larger transaction the event is
        numbered when that transaction commits (its position then reads 0 here); one that
        holds the lock of the actor named ``tool_id`` knows its last seq and sends nothing
        before the commit."""
        texts = {"tool_id": tool_id} if sender is None else {"tool_id": tool_id, "sender": sender}
        with self._write(team_id, tool_id, **texts) as state:
            held = self._held(team_id, tool_id)
            if held is not None:  # no other writer of its events: the next seq is known
                held.seq += 1
                seq = held.seq
                self._later(
                    "INSERT INTO toolcards_tool_seqs VALUES (%s, %s, %s) ON CONFLICT "
                    "(team_id, tool_id) DO UPDATE SET seq = EXCLUDED.seq",
                    (team_id, tool_id, seq),
                )
            else:
                with self._cursor() as cur:
                    cur.execute(
                        "INSERT INTO toolcards_tool_seqs VALUES (%s, %s, 1) ON CONFLICT "
                        "(team_id, tool_id) DO UPDATE SET seq = toolcards_tool_seqs.seq + 1 "
                        "RETURNING seq",
                        (team_id, tool_id),
                    )
                    seq = int(cur.fetchone()[0])
            row = (tool_id, seq, payload, payload_type, timestamp, event_id, sender, display_type)
            if state.depth > 1:  # numbered just before the larger transaction commits
                state.events.append((team_id, row))
                return 0, seq
            with self._cursor() as cur:
                _insert_events(cur.execute, team_id, [row])
                position = int(cur.fetchone()[0])
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
        with self.transaction(), self._cursor() as cur:
            return compact(
                placeholders(cur),
                "toolcards_",
                team_id,
                keep_per_tool=keep_per_tool,
                before=before,
            )

    # ---- cross-process coherence -------------------------------------------------------------

    def actor_version(self, team_id: str, actor: str) -> int:
        held = self._held(team_id, actor)
        if held is not None:
            return held.version
        rows = self._rows(
            "SELECT version FROM toolcards_actor_versions WHERE team_id=%s AND actor=%s",
            (team_id, actor),
        )
        return int(rows[0][0]) if rows else 0

    def state_changes(
        self, team_id: str, actor: str, since: int
    ) -> tuple[list[tuple[str, Any]], list[str]] | None:
        held = self._held(team_id, actor)
        if held is not None and held.since == since:
            return held.changes
        return state_changes(self._rows, team_id, actor, since)

    def _held(self, team_id: str, actor: str) -> _Held | None:
        """What :meth:`lock_actor` read, while this thread's transaction holds the lock."""
        state = self._db.state()
        held: _Held | None = state.locked.get((team_id, actor)) if state.depth else None
        return held

    def secret_location(self) -> str:
        return self._db.url

    def writes_pending(self, team_id: str, actor: str) -> bool:
        return (team_id, actor) in self._db.state().dirty

    def applied_call(self, team_id: str, key: str) -> AppliedCall | None:
        def query(cur: Any) -> AppliedCall | None:
            return applied_calls.find(placeholders(cur), "toolcards_", team_id, key)

        try:
            return self._db.read(query)
        except DatabaseUnavailable as exc:
            raise StoreUnavailable(str(exc)) from None
        except DatabaseClosed as exc:
            raise StoreClosedError(f"store {self.location} is closed") from exc

    def record_applied(self, team_id: str, key: str, actor: str, digest: str, result: str) -> None:
        check_text("call id", key)

        def later(sql: str, params: tuple[Any, ...]) -> None:  # its result is never read
            self._later(sql.replace("?", "%s"), params)

        with self.transaction():
            applied_calls.record(later, "toolcards_", team_id, key, actor, digest, result)

    def lock_actor(self, team_id: str, actor: str, *, since: int | None = None) -> None:
        """Take the actor's lock and, in the same round trip, read as of the grant its
        version, the seq of its last event and (``since`` given) its changes since that
        version: until the transaction ends, :meth:`actor_version`, :meth:`state_changes`
        for ``since`` and the numbering of its events answer from this read."""
        state = self._db.state()
        if (team_id, actor) in state.locked:
            return  # held until the transaction ends
        with self._cursor() as cur, cur.connection.cursor() as changes:
            with cur.connection.pipeline():
                keyed_lock(cur, "actor", team_id, actor)
                cur.execute(  # statements of their own: they see what committed before the grant
                    "SELECT (SELECT version FROM toolcards_actor_versions WHERE team_id = %s "
                    "AND actor = %s), (SELECT seq FROM toolcards_tool_seqs WHERE team_id = %s "
                    "AND tool_id = %s)",
                    (team_id, actor, team_id, actor),
                )
                if since is not None:
                    changes.execute(*changes_query(team_id, actor, since))
            version, seq = cur.fetchone()
            changed = read_changes(changes.fetchall(), since, actor) if since is not None else None
        if state.depth:
            state.locked[team_id, actor] = _Held(int(version or 0), int(seq or 0), since, changed)

    def watch(self, team_id: str, callback: Callable[[], Any]) -> Callable[[], None]:
        return self._events.watch(team_id, callback)


def _insert_events(execute: Later, team_id: str, rows: list[tuple[Any, ...]]) -> None:
    """Number ``rows`` (tool, seq, payload, payload type, timestamp, id, sender, display type)
    after the team's last position and insert them, in one statement that returns their
    positions. The team's row stays locked until the transaction ends."""
    columns = list(zip(*rows, strict=True))
    execute(
        "WITH pos AS (INSERT INTO toolcards_teams (team_id, created_at, last_pos) "
        "VALUES (%s, %s, %s) ON CONFLICT (team_id) "
        "DO UPDATE SET last_pos = toolcards_teams.last_pos + EXCLUDED.last_pos "
        "RETURNING last_pos) "
        "INSERT INTO toolcards_events (team_id, team_pos, tool_id, seq, payload, payload_type, "
        "timestamp, event_id, sender, display_type) "
        "SELECT %s, pos.last_pos - %s + e.n, e.tool_id, e.seq, e.payload, e.payload_type, e.ts, "
        "e.event_id, e.sender, e.display_type FROM pos, unnest(%s::text[], %s::bigint[], "
        "%s::text[], %s::text[], %s::float8[], %s::text[], %s::text[], %s::text[]) "
        "WITH ORDINALITY AS e(tool_id, seq, payload, payload_type, ts, event_id, sender, "
        "display_type, n) RETURNING team_pos",
        (team_id, time.time(), len(rows), team_id, len(rows), *(list(c) for c in columns)),
    )
