"""A team store in this process's memory, in pure Python: one half at a time
(:class:`MemoryStateStore`, :class:`MemoryEventStore`) or whole (:class:`MemoryStore`, both
over one :class:`MemoryTransactions`). It behaves as the SQLite store does (real transactions
that roll back, versions, call keys, gap-free positions, compaction markers) and keeps every
row under its team: the double the store contract suites run beside SQLite and PostgreSQL, and
a start for a new backend written one half at a time."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from toolcards.stores import applied_calls
from toolcards.stores.base import (
    LIFECYCLE_TOOL,
    AppliedCall,
    Compaction,
    EventRow,
    EventStore,
    StateStore,
    Store,
    StoreClosedError,
    compaction_marker,
    dumps,
    key_end,
)
from toolcards.stores.location import MEMORY
from toolcards.stores.rows import read_page, read_value

K = TypeVar("K")
V = TypeVar("V")


class MemoryTransactions:
    """The transactions of a team store in this process's memory, shared by its two halves:
    one re-entrant lock (held by a transaction until it ends, as SQLite's is), an undo log a
    rollback runs backwards, the callbacks waiting for the commit, and the version of every
    actor whose state or events a committed transaction changed."""

    def __init__(self, location: str, rolled_back: Callable[[], Any] | None = None) -> None:
        self.location = location
        self.lock = threading.RLock()
        self.closed = False
        self.versions: dict[tuple[str, str], int] = {}
        self.dirty: set[tuple[str, str]] = set()
        """(team, actor) pairs whose state or events the open transaction changed."""
        self._rolled_back = rolled_back
        self._depth = 0
        self._undo: list[Callable[[], object]] = []
        self._after: list[Callable[[], Any]] = []

    @contextmanager
    def reading(self) -> Iterator[None]:
        """The lock, for a read of an open store."""
        with self.lock:
            self._check_open()
            yield

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic transaction; nested blocks join the outer one."""
        with self.lock:
            self._check_open()
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    self._roll_back()
                raise
            self._depth -= 1
            if self._depth:
                return
            for actor in self.dirty:
                self.versions[actor] = self.versions.get(actor, 0) + 1
            self.dirty.clear()
            self._undo.clear()
            callbacks, self._after = self._after, []
        for callback in callbacks:
            callback()

    def undo(self, step: Callable[[], object]) -> None:
        """Inside a transaction: what takes back the write just made, if it rolls back."""
        self._undo.append(step)

    def after_commit(self, callback: Callable[[], Any]) -> None:
        with self.lock:
            if self._depth:
                self._after.append(callback)
                return
        callback()

    def close(self) -> None:
        with self.lock:
            self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise StoreClosedError(f"store {self.location} is closed")

    def _roll_back(self) -> None:
        undo, self._undo = self._undo, []
        for step in reversed(undo):
            step()
        self.dirty.clear()
        self._after.clear()
        if self._rolled_back is not None:
            self._rolled_back()


def put_back(mapping: dict[K, V], key: K) -> Callable[[], None]:
    """What puts ``mapping[key]`` back as it is now (absent, or its value)."""
    absent = key not in mapping
    before = mapping.get(key)

    def step() -> None:
        if absent:
            mapping.pop(key, None)
        else:
            mapping[key] = before  # type: ignore[assignment]  # present: a V

    return step


class SortedRows:
    """One actor's state rows: JSON text by key, and the keys in order (range reads)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.keys: list[str] = []

    def put(self, key: str, text: str | None) -> str | None:
        """Store ``text`` under ``key`` (None: remove it); returns the text it replaced."""
        old = self.values.get(key)
        if text is None:
            if old is not None:
                del self.values[key]
                del self.keys[bisect.bisect_left(self.keys, key)]
        else:
            if old is None:
                bisect.insort(self.keys, key)
            self.values[key] = text
        return old

    def between(self, low: str, inclusive: bool, high: str | None) -> list[str]:
        """The keys from ``low`` (itself too when ``inclusive``) up to ``high`` (excluded;
        None: to the last)."""
        start = (bisect.bisect_left if inclusive else bisect.bisect_right)(self.keys, low)
        if high is None:
            return self.keys[start:]
        return self.keys[start : bisect.bisect_left(self.keys, high, lo=start)]


class MemoryStateStore(StateStore):
    """The state half of a team store, in this process's memory (a double with the
    behaviour of the SQLite store: real transactions, versions and call keys, every row
    under its team). Alone it serves a :class:`StateNamespace`; with
    :class:`MemoryEventStore` it is :class:`MemoryStore`."""

    in_memory = True

    def __init__(self, transactions: MemoryTransactions | None = None) -> None:
        StateStore.__init__(self)
        self._tx = transactions or MemoryTransactions(MEMORY, self._rolled_back)
        self.location = self._tx.location
        self.lock = self._tx.lock
        self._teams: dict[str, float | None] = {}
        """team id -> when it stopped (None while it runs)."""
        self._actors: dict[tuple[str, str], tuple[str, str | None]] = {}
        """(team, name) -> (tag, config), in the order first recorded."""
        self._rows: dict[tuple[str, str], SortedRows] = {}
        """(team, actor) -> its state rows."""
        self._applied: dict[str, dict[str, AppliedCall]] = {}
        """team -> call key -> record, oldest first."""

    def _rolled_back(self) -> None:
        self.note_lost_write()
        for hook in self.rollback_hooks:
            hook()

    def transaction(self) -> AbstractContextManager[None]:
        return self._tx.transaction()

    def after_commit(self, callback: Callable[[], Any]) -> None:
        self._tx.after_commit(callback)

    @property
    def closed(self) -> bool:
        return self._tx.closed

    def close(self) -> None:
        self._tx.close()

    # ---- teams and actors --------------------------------------------------------------------

    def team_exists(self, team_id: str) -> bool:
        with self._tx.reading():
            return team_id in self._teams

    def open_team(self, team_id: str) -> None:
        self._set_team(team_id, None)

    def mark_stopped(self, team_id: str) -> None:
        with self._tx.transaction():
            if team_id in self._teams:
                self._set_team(team_id, time.time())

    def _set_team(self, team_id: str, stopped: float | None) -> None:
        with self._tx.transaction():
            self._tx.undo(put_back(self._teams, team_id))
            self._teams[team_id] = stopped

    def record_actor(self, team_id: str, name: str, tag: str, config: str | None) -> None:
        key = (team_id, name)
        with self._tx.transaction():
            self._tx.undo(put_back(self._actors, key))
            self._actors[key] = (tag, config)

    def recorded_actors(self, team_id: str) -> list[tuple[str, str, str | None]]:
        with self._tx.reading():
            return [(n, t, c) for (team, n), (t, c) in self._actors.items() if team == team_id]

    # ---- state -------------------------------------------------------------------------------

    def state_get(self, team_id: str, actor: str, key: str) -> Any | None:
        with self._tx.reading():
            rows = self._rows.get((team_id, actor))
            text = None if rows is None else rows.values.get(key)
        return read_value(actor, key, text)

    def state_put(self, team_id: str, actor: str, key: str, value: Any) -> None:
        self._write(team_id, actor, key, dumps(value))

    def state_delete(self, team_id: str, actor: str, key: str) -> None:
        self._write(team_id, actor, key, None)

    def _write(self, team_id: str, actor: str, key: str, text: str | None) -> None:
        with self._tx.transaction():
            rows = self._rows.setdefault((team_id, actor), SortedRows())
            before = rows.put(key, text)
            self._tx.undo(lambda: rows.put(key, before))
            self._tx.dirty.add((team_id, actor))

    def state_items(
        self, team_id: str, actor: str, prefix: str = "", *, after: str = "", limit: int = 0
    ) -> list[tuple[str, Any]]:

        def fetch(low: str, inclusive: bool, limit: int) -> list[tuple[str, str]]:
            with self._tx.reading():
                rows = self._rows.get((team_id, actor))
                if rows is None:
                    return []
                keys = rows.between(low, inclusive, key_end(prefix))
                return [(k, rows.values[k]) for k in (keys[:limit] if limit else keys)]

        low, inclusive = (after, False) if after > prefix else (prefix, True)
        return read_page(fetch, actor, low, inclusive, limit)

    def state_count(self, team_id: str, actor: str, prefix: str = "") -> int:
        with self._tx.reading():
            rows = self._rows.get((team_id, actor))
            return 0 if rows is None else len(rows.between(prefix, True, key_end(prefix)))

    def state_version(self, team_id: str, actor: str) -> int:
        with self._tx.reading():
            return self._tx.versions.get((team_id, actor), 0)

    def writes_pending(self, team_id: str, actor: str) -> bool:
        return (team_id, actor) in self._tx.dirty

    # ---- idempotency keys of mutations -------------------------------------------------------

    def applied_call(self, team_id: str, key: str) -> AppliedCall | None:
        with self._tx.reading():
            found = self._applied.get(team_id, {}).get(key)
        if found is None or found.at < time.time() - applied_calls.KEEP_SECONDS:
            return None
        return found

    def record_applied(self, team_id: str, key: str, actor: str, digest: str, result: str) -> None:
        now = time.time()
        with self._tx.transaction():
            before = self._applied.get(team_id)
            kept = {
                k: r
                for k, r in (before or {}).items()
                if k != key and r.at >= now - applied_calls.KEEP_SECONDS
            }
            kept[key] = AppliedCall(actor, digest, result, now)
            while len(kept) > applied_calls.KEEP_PER_TEAM:
                del kept[next(iter(kept))]
            self._tx.undo(put_back(self._applied, team_id))
            self._applied[team_id] = kept


class TeamLog:
    """One team's events in memory: rows in position order, the last position, the last seq
    of each tool."""

    def __init__(self, team_id: str) -> None:
        self.team_id = team_id
        self.rows: list[EventRow] = []
        self.position = 0
        self.seqs: dict[str, int] = {}

    def restore(self, rows: list[EventRow]) -> Callable[[], None]:
        """What puts ``rows`` back as the log's rows."""

        def step() -> None:
            self.rows = rows

        return step


class MemoryEventStore(EventStore):
    """The event half of a team store, in this process's memory (a double with the behaviour
    of the SQLite store: gap-free positions and seqs, compaction markers, appends that roll
    back with their transaction). Every log is its team's."""

    def __init__(self, transactions: MemoryTransactions | None = None) -> None:
        self._tx = transactions or MemoryTransactions(MEMORY)
        self._logs: dict[str, TeamLog] = {}

    def _log(self, team_id: str) -> TeamLog:
        found = self._logs.get(team_id)
        if found is None:
            self._tx.undo(put_back(self._logs, team_id))
            found = self._logs[team_id] = TeamLog(team_id)
        return found

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
        with self._tx.transaction():
            log = self._log(team_id)
            seq, position = log.seqs.get(tool_id, 0) + 1, log.position + 1
            log.rows.append(
                EventRow(
                    position,
                    tool_id,
                    seq,
                    payload,
                    payload_type,
                    timestamp,
                    event_id,
                    sender,
                    display_type,
                )
            )
            log.seqs[tool_id], log.position = seq, position
            self._tx.undo(lambda: self._unappend(log, tool_id))
            self._tx.dirty.add((team_id, tool_id))
        return position, seq

    @staticmethod
    def _unappend(log: TeamLog, tool_id: str) -> None:
        log.rows.pop()
        log.position -= 1
        if log.seqs[tool_id] == 1:
            del log.seqs[tool_id]
        else:
            log.seqs[tool_id] -= 1

    def read_events(self, team_id: str, after: int, limit: int = 1000) -> list[EventRow]:
        with self._tx.reading():
            log = self._logs.get(team_id)
            if log is None:
                return []
            start = bisect.bisect_right(log.rows, after, key=lambda row: row.position)
            return log.rows[start : start + limit]

    def last_seq(self, team_id: str, tool_id: str) -> int:
        with self._tx.reading():
            log = self._logs.get(team_id)
            return 0 if log is None else log.seqs.get(tool_id, 0)

    def last_position(self, team_id: str) -> int:
        with self._tx.reading():
            log = self._logs.get(team_id)
            return 0 if log is None else log.position

    def compact_events(
        self, team_id: str, *, keep_per_tool: int | None, before: float | None
    ) -> list[Compaction]:
        with self._tx.transaction():
            log = self._logs.get(team_id)
            if log is None:
                return []
            rows, done = log.rows, []
            for tool_id, last in sorted(log.seqs.items()):
                if tool_id == LIFECYCLE_TOOL:
                    continue
                through = 0 if keep_per_tool is None else last - keep_per_tool
                if before is not None:
                    old = [r.seq for r in rows if r.tool_id == tool_id and r.timestamp < before]
                    through = max([through, *old])
                if through <= 0:
                    continue
                marker = dumps(compaction_marker(through))
                kept: list[EventRow] = []
                removed = replaced = 0
                for row in rows:
                    if row.tool_id != tool_id or row.seq > through:
                        kept.append(row)
                    elif row.seq < through:
                        removed += 1
                    else:
                        if row.payload != marker:
                            replaced = 1
                            row = row._replace(payload=marker, payload_type=None, sender=None)
                        kept.append(row)
                rows = kept
                if removed or replaced:
                    done.append(Compaction(tool_id, through, removed + replaced))
            self._tx.undo(log.restore(log.rows))
            log.rows = rows
            return done


class MemoryStore(MemoryStateStore, MemoryEventStore, Store):
    """A whole team store in this process's memory: :class:`MemoryStateStore` and
    :class:`MemoryEventStore` over one :class:`MemoryTransactions`, so events appended in a
    transaction commit or roll back with its state rows and move their actor's version. The
    stand-in for a backend in tests (in the spirit of an HTTP client's mock transport), or a
    team that keeps nothing when its process ends."""

    def __init__(self, location: str = MEMORY) -> None:
        transactions = MemoryTransactions(location, self._rolled_back)
        MemoryStateStore.__init__(self, transactions)
        MemoryEventStore.__init__(self, transactions)
