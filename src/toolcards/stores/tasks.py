"""MCP tasks: governed calls that run in the background of a server, by task id.

A row is created when a client asks for a task and updated by the process running the call
(its ``owner``), which renews a lease on its running rows while it lives: a row whose lease
ran out belongs to a server that stopped, and reads as ``failed`` with that reason (never
silently lost). Any process of the team reads a row (another connection, another server), but
only for the principal that created it: every statement filters by ``team_id``, and every
read by the principal too. Rows expire ``ttl`` after their creation and are deleted then, but
never while their task is live: a running call keeps counting against its principal's bound,
and stays listable and cancellable, however short the ttl its client asked for. A cancel is a
request (the row's ``answer`` is :data:`CANCEL`): the owner stops the call and ends the row
with what the call did, so a row's ending is always its call's. A read takes no write lock (a
row whose lease ran out is failed first, in a short write of its own) and reads a stored
result only when asked for it.

The SQL is shared by :class:`SqliteTasks` and
:class:`toolcards.stores.postgres.tasks.PostgresTasks` (``?`` placeholders).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolcards.core.errors import ToolcardsError
from toolcards.core.identity import joined_key
from toolcards.stores.base import DEFAULT_TEAM
from toolcards.stores.sqlite.connect import shared_connection

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
LIVE = (WORKING, INPUT_REQUIRED)
TERMINAL = (COMPLETED, FAILED, CANCELLED)
ORPHANED = "the server running this task stopped before it finished"
CANCEL = "cancel"
"""The ``answer`` of a live task its caller asked to cancel, for its owner to act on."""

TABLE = """
CREATE TABLE IF NOT EXISTS toolcards_tasks (
    team_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    tool_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    status TEXT NOT NULL,
    status_message TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    owner TEXT NOT NULL,
    lease_until DOUBLE PRECISION NOT NULL,
    result TEXT,
    input_requests TEXT,
    approval_id TEXT,
    answer TEXT,
    PRIMARY KEY (team_id, task_id)
)
"""
INDEX = (
    "CREATE INDEX IF NOT EXISTS toolcards_tasks_principal "
    "ON toolcards_tasks (team_id, principal, created_at)"
)

_STATUS = (
    "task_id, principal, tool_id, call_id, status, status_message, created_at, updated_at, "
    "expires_at, owner, lease_until"
)
"""What a listing reads of a task (the first fields of :class:`TaskRecord`)."""
_COLUMNS = f"{_STATUS}, result, input_requests, approval_id, answer"
_BUT_RESULT = f"{_STATUS}, NULL, input_requests, approval_id, answer"
_INSERT = f"INSERT INTO toolcards_tasks (team_id, {_COLUMNS}) VALUES ({', '.join('?' * 16)})"
_LIVE_ONLY = "status IN ('working', 'input_required')"
_KEPT = f"(expires_at > ? OR {_LIVE_ONLY})"
_COUNT = "SELECT COUNT(*) FROM toolcards_tasks WHERE team_id = ? AND principal = ?"
_PURGE = f"DELETE FROM toolcards_tasks WHERE team_id = ? AND NOT {_KEPT}"
_ORPHANS = (
    "UPDATE toolcards_tasks SET status = 'failed', status_message = ?, updated_at = ?, "
    "input_requests = NULL WHERE team_id = ? AND status IN ('working', 'input_required') "
    "AND lease_until < ?"
)
_GET = "SELECT {} FROM toolcards_tasks WHERE team_id = ? AND task_id = ? AND principal = ?"
_PAGE = (
    f"SELECT {_STATUS} FROM toolcards_tasks WHERE team_id = ? AND principal = ? "
    f"AND {_KEPT} AND (created_at > ? OR (created_at = ? AND task_id > ?)) "
    "ORDER BY created_at, task_id LIMIT ?"
)
_UPDATE = "UPDATE toolcards_tasks SET {sets}, updated_at = ? WHERE team_id = ? AND task_id = ?"
_RENEW = (
    "UPDATE toolcards_tasks SET lease_until = ? WHERE team_id = ? AND owner = ? "
    "AND status IN ('working', 'input_required')"
)
_OWNED = (
    "SELECT task_id, answer FROM toolcards_tasks WHERE team_id = ? AND owner = ? "
    "AND updated_at >= ?"
)


class TooManyTasks(ToolcardsError):
    """The principal already holds as many tasks as the store keeps for one principal."""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task as stored. ``result`` is the JSON text of what ``tasks/result`` answers (a
    tool call's result, or an error; None as well when the read did not ask for it);
    ``input_requests`` the JSON of what the task waits for (``input_required``); ``answer``
    the caller's answer to it (or :data:`CANCEL`), for the owner to read."""

    task_id: str
    principal: str
    tool_id: str
    call_id: str
    status: str
    status_message: str | None
    created_at: float
    updated_at: float
    expires_at: float
    owner: str
    lease_until: float
    result: str | None = None
    input_requests: str | None = None
    approval_id: str | None = None
    answer: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def ttl(self) -> float:
        """Seconds it is kept, from its creation (and for as long as it is live)."""
        return self.expires_at - self.created_at

    def row(self) -> tuple[Any, ...]:
        return (
            self.task_id, self.principal, self.tool_id, self.call_id, self.status,
            self.status_message, self.created_at, self.updated_at, self.expires_at, self.owner,
            self.lease_until, self.result, self.input_requests, self.approval_id, self.answer,
        )  # fmt: skip


class SqlTasks(ABC):
    """The task rows of one team over ``_tx()`` (one write transaction yielding a cursor
    that speaks ``?`` placeholders)."""

    team_id: str

    @abstractmethod
    def _tx(self) -> AbstractContextManager[Any]: ...

    def _read(self) -> AbstractContextManager[Any]:
        """A transaction that only reads (:meth:`_tx` where a read takes no write lock)."""
        return self._tx()

    principal_lock: str | None = None
    """A statement taking a lock on ``?`` (team and principal) for the transaction, so
    concurrent creations for one principal count one after the other (SQLite's write
    transaction already does)."""

    def create(self, task: TaskRecord, *, per_principal: int) -> None:
        """Record a new task; :class:`TooManyTasks` when ``task.principal`` already holds
        ``per_principal`` tasks that are live or have not expired (a stopped server's live
        tasks fail first, so they free their place once expired)."""
        now = time.time()
        with self._tx() as cur:
            cur.execute(_ORPHANS, (ORPHANED, now, self.team_id, now))
            cur.execute(_PURGE, (self.team_id, now))
            self._lock_principal(cur, task.principal)
            (count,) = cur.execute(_COUNT, (self.team_id, task.principal)).fetchone()
            if count >= per_principal:
                raise TooManyTasks(f"at most {per_principal} tasks are kept per principal")
            cur.execute(_INSERT, (self.team_id, *task.row()))

    def _lock_principal(self, cur: Any, principal: str) -> None:
        """Take the lock of ``principal``'s creations in this team for the transaction (its
        name unambiguous: team ``a`` and principal ``b/c`` is not team ``a/b`` and ``c``)."""
        if self.principal_lock is not None:
            cur.execute(self.principal_lock, (joined_key("tasks", self.team_id, principal),))

    def get(
        self, task_id: str, principal: str, *, expired: bool = False, result: bool = False
    ) -> TaskRecord | None:
        """The task, for the principal that created it (None for anyone else, and when it
        is unknown or ended and expired: the three read the same). ``expired=True``: also
        one ended past its ttl and not yet deleted (what a cancel ended with). ``result=True``:
        with its stored result (else ``result`` is None: a status needs none)."""
        now = time.time()
        sql = _GET.format(_COLUMNS if result else _BUT_RESULT)
        sql, args = (sql, ()) if expired else (f"{sql} AND {_KEPT}", (now,))
        found = self._swept(now, sql, (self.team_id, task_id, principal, *args))
        return found[0] if found else None

    def page(self, principal: str, after: TaskRecord | None, limit: int) -> list[TaskRecord]:
        """``principal``'s tasks, oldest first, after ``after`` (the last of a page): their
        status only (``result``, ``input_requests``, ``approval_id`` and ``answer`` None)."""
        now = time.time()
        since, last = (after.created_at, after.task_id) if after is not None else (-1.0, "")
        return self._swept(now, _PAGE, (self.team_id, principal, now, since, since, last, limit))

    def _swept(self, now: float, sql: str, args: tuple[Any, ...]) -> list[TaskRecord]:
        """The tasks ``sql`` reads. When a live one's lease ran out before ``now``, the
        team's such tasks are failed first (:data:`ORPHANED`, a write of its own) and read
        again."""

        def read() -> list[TaskRecord]:
            with self._read() as cur:
                return [TaskRecord(*row) for row in cur.execute(sql, args).fetchall()]

        found = read()
        if any(task.status in LIVE and task.lease_until < now for task in found):
            with self._tx() as cur:
                cur.execute(_ORPHANS, (ORPHANED, now, self.team_id, now))
            found = read()
        return found

    def update(self, task_id: str, *, live_only: bool = True, **fields: Any) -> bool:
        """Set ``fields`` of the task (by its owner, or a caller's answer): only while it is
        live unless ``live_only=False``. False when nothing changed (it ended meanwhile)."""
        sets = ", ".join(f"{name} = ?" for name in fields)
        sql = _UPDATE.format(sets=sets) + (f" AND {_LIVE_ONLY}" if live_only else "")
        with self._tx() as cur:
            cur.execute(sql, (*fields.values(), time.time(), self.team_id, task_id))
            return bool(cur.rowcount == 1)

    def renew(self, owner: str, until: float) -> None:
        """Extend the lease of ``owner``'s live tasks to ``until``."""
        with self._tx() as cur:
            cur.execute(_RENEW, (until, self.team_id, owner))

    def changed(self, owner: str, since: float) -> list[tuple[str, str | None]]:
        """(task id, answer) of ``owner``'s tasks updated since ``since``: how the owner
        learns of a cancel or an answer made by another process."""
        with self._read() as cur:
            return [tuple(r) for r in cur.execute(_OWNED, (self.team_id, owner, since))]

    def end_owned(self, owner: str, task_ids: Iterable[str], message: str) -> None:
        """Fail the live tasks ``task_ids`` of ``owner`` (its process stops)."""
        for task_id in task_ids:
            self.update(task_id, status=FAILED, status_message=message, input_requests=None)

    @abstractmethod
    def close(self) -> None: ...


class SqliteTasks(SqlTasks):
    """Task rows in a SQLite file (WAL), shared by the processes of one machine; ``:memory:``
    keeps them in this process only."""

    def __init__(self, path: str | Path, team_id: str | None = None) -> None:
        self.path = str(path)
        self.team_id = team_id or DEFAULT_TEAM
        self._db = shared_connection(self.path, sync=False)
        self._lock = threading.Lock()
        with self._tx() as cur:
            cur.execute(TABLE)
            cur.execute(INDEX)

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

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._lock:  # a statement is its own read transaction, which waits for no writer
            yield self._db.cursor()

    def close(self) -> None:
        with self._lock:
            self._db.close()
