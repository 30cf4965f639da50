"""Where pending approvals live: one small contract, an in-memory store (the default) and a
SQLite-file store that several processes on one machine share (an MCP server waiting for a
decision, and a ``toolcards approvals grant`` process making it).

Every method is atomic. A store for another database implements the same six methods and
passes the same contract tests (``tests/governance/test_approval_store.py``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from toolcards.core.approvals import ApprovalRecord, ApprovalRequest, ApprovalState
from toolcards.core.identity import Identity

Binding = tuple[str, str, str, str]
"""(call id, tool id, argument digest, principal id)."""


@runtime_checkable
class ApprovalStore(Protocol):
    def add(self, request: ApprovalRequest, now: float) -> ApprovalRecord:
        """Store ``request`` as pending, unless an unexpired record with the same binding
        exists: then return that one unchanged (a request is never replaced)."""
        ...

    def get(self, approval_id: str) -> ApprovalRecord | None:
        """The record, expired or not (None when unknown or removed)."""
        ...

    def decide(
        self, approval_id: str, state: ApprovalState, approver: str, now: float
    ) -> ApprovalRecord | None:
        """Move a pending, unexpired record to ``state``; None when it is not pending."""
        ...

    def take(self, binding: Binding, *, approved: bool, now: float) -> ApprovalRecord | None:
        """The unexpired record for ``binding``. A decided one is removed (spent) and returned;
        a pending one is returned and kept, unless ``approved``: then it is removed and
        returned as granted. None when there is none (expired ones are removed)."""
        ...

    def remove(self, approval_id: str) -> bool:
        """Forget a record; True when there was one."""
        ...

    def pending(self, now: float) -> list[ApprovalRecord]:
        """Unexpired pending records, oldest first (expired ones are removed)."""
        ...


class MemoryApprovalStore:
    """Approvals in this process's memory."""

    def __init__(self) -> None:
        self._records: dict[str, ApprovalRecord] = {}
        self._by_binding: dict[Binding, str] = {}
        self._lock = threading.Lock()

    def add(self, request: ApprovalRequest, now: float) -> ApprovalRecord:
        with self._lock:
            self._prune(now)
            existing = self._by_binding.get(request.binding)
            if existing is not None:
                return self._records[existing]
            record = ApprovalRecord(request)
            self._records[request.approval_id] = record
            self._by_binding[request.binding] = request.approval_id
            return record

    def get(self, approval_id: str) -> ApprovalRecord | None:
        with self._lock:
            return self._records.get(approval_id)

    def decide(
        self, approval_id: str, state: ApprovalState, approver: str, now: float
    ) -> ApprovalRecord | None:
        with self._lock:
            record = self._records.get(approval_id)
            if (
                record is None
                or record.state is not ApprovalState.PENDING
                or record.request.expires_at <= now
            ):
                return None
            record = replace(record, state=state, approver=approver, decided_at=now)
            self._records[approval_id] = record
            return record

    def take(self, binding: Binding, *, approved: bool, now: float) -> ApprovalRecord | None:
        with self._lock:
            approval_id = self._by_binding.get(binding)
            if approval_id is None:
                return None
            record = self._records[approval_id]
            if record.request.expires_at <= now:
                self._drop(approval_id)
                return None
            if record.state is ApprovalState.PENDING:
                if not approved:
                    return record
                record = replace(record, state=ApprovalState.GRANTED, decided_at=now)
            self._drop(approval_id)
            return record

    def remove(self, approval_id: str) -> bool:
        with self._lock:
            return self._drop(approval_id)

    def pending(self, now: float) -> list[ApprovalRecord]:
        with self._lock:
            self._prune(now)
            records = [r for r in self._records.values() if r.state is ApprovalState.PENDING]
        return sorted(records, key=lambda r: r.request.created_at)

    def _drop(self, approval_id: str) -> bool:
        record = self._records.pop(approval_id, None)
        if record is None:
            return False
        if self._by_binding.get(record.request.binding) == approval_id:
            del self._by_binding[record.request.binding]
        return True

    def _prune(self, now: float) -> None:
        expired = [k for k, r in self._records.items() if r.request.expires_at <= now]
        for approval_id in expired:
            self._drop(approval_id)


SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT PRIMARY KEY,
    call_id TEXT NOT NULL,
    tool_id TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    principal TEXT NOT NULL,
    principal_type TEXT NOT NULL,
    roles TEXT NOT NULL,
    args TEXT NOT NULL,
    reason TEXT NOT NULL,
    surface TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    state TEXT NOT NULL,
    approver TEXT,
    decided_at REAL,
    args_exact TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS approvals_binding
    ON approvals(call_id, tool_id, args_digest, principal);
CREATE INDEX IF NOT EXISTS approvals_expiry ON approvals(expires_at);
"""
_FIELDS = (
    "approval_id, call_id, tool_id, args_digest, principal, principal_type, roles, args, "
    "reason, surface, created_at, expires_at, state, approver, decided_at, args_exact"
)
ADDED_COLUMNS = (("args_exact", "TEXT NOT NULL DEFAULT ''"),)
"""Columns added since the first schema: a table made before gets them when opened."""
_BY_BINDING = "call_id = ? AND tool_id = ? AND args_digest = ? AND principal = ?"


class SqlApprovalStore:
    """The approval logic in SQL, shared by the SQLite store below and the PostgreSQL one
    (:mod:`toolcards.stores.postgres.governance`). A subclass gives :meth:`_tx` (a write
    transaction that is atomic across processes) and :meth:`_read`, both yielding an object
    with ``execute(sql, params)`` speaking ``?`` placeholders."""

    table = "approvals"

    def _tx(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def add(self, request: ApprovalRequest, now: float) -> ApprovalRecord:
        who = request.identity
        with self._tx() as db:
            db.execute(f"DELETE FROM {self.table} WHERE {_BY_BINDING} AND expires_at <= ?",
                       (*request.binding, now))  # fmt: skip
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE {_BY_BINDING}", request.binding
            ).fetchone()
            if row is not None:
                return _record(row)
            db.execute(
                f"INSERT INTO {self.table} ({_FIELDS}) VALUES ({', '.join('?' * 16)})",
                (
                    request.approval_id,
                    *request.binding,
                    who.type if who else "user",
                    ",".join(sorted(who.roles)) if who else "",
                    json.dumps(dict(request.args), sort_keys=True, default=str),
                    request.reason,
                    request.surface,
                    request.created_at,
                    request.expires_at,
                    ApprovalState.PENDING.value,
                    None,
                    None,
                    request.args_json,
                ),
            )
        return ApprovalRecord(request)

    def get(self, approval_id: str) -> ApprovalRecord | None:
        with self._read() as db:
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE approval_id = ?", (approval_id,)
            ).fetchone()
        return None if row is None else _record(row)

    def decide(
        self, approval_id: str, state: ApprovalState, approver: str, now: float
    ) -> ApprovalRecord | None:
        with self._tx() as db:
            changed = db.execute(
                f"UPDATE {self.table} SET state = ?, approver = ?, decided_at = ? "
                "WHERE approval_id = ? AND state = 'pending' AND expires_at > ?",
                (state.value, approver, now, approval_id, now),
            ).rowcount
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE approval_id = ?", (approval_id,)
            ).fetchone()
        return _record(row) if changed and row is not None else None

    def take(self, binding: Binding, *, approved: bool, now: float) -> ApprovalRecord | None:
        with self._tx() as db:
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE {_BY_BINDING}", binding
            ).fetchone()
            if row is None:
                return None
            record = _record(row)
            approval_id = record.request.approval_id
            if record.request.expires_at <= now:
                db.execute(f"DELETE FROM {self.table} WHERE approval_id = ?", (approval_id,))
                return None
            if record.state is ApprovalState.PENDING:
                if not approved:
                    return record
                record = replace(record, state=ApprovalState.GRANTED, decided_at=now)
            db.execute(f"DELETE FROM {self.table} WHERE approval_id = ?", (approval_id,))
            return record

    def remove(self, approval_id: str) -> bool:
        with self._tx() as db:
            count = db.execute(
                f"DELETE FROM {self.table} WHERE approval_id = ?", (approval_id,)
            ).rowcount
        return bool(count)

    def pending(self, now: float) -> list[ApprovalRecord]:
        with self._tx() as db:
            db.execute(f"DELETE FROM {self.table} WHERE expires_at <= ?", (now,))
            rows = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE state = 'pending' "
                "ORDER BY created_at, approval_id"
            ).fetchall()
        return [_record(row) for row in rows]


class SqliteApprovalStore(SqlApprovalStore):
    """Approvals in a SQLite file (WAL), safe for several processes on one machine. It may be
    the audit log's file (its own table) or a file beside it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(
            str(self.path), check_same_thread=False, isolation_level=None, timeout=10.0
        )
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        known = {row[1] for row in self._db.execute("PRAGMA table_info(approvals)")}
        for name, ddl in ADDED_COLUMNS:
            if name not in known:
                self._db.execute(f"ALTER TABLE approvals ADD COLUMN {name} {ddl}")
        self._lock = threading.Lock()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front so that a read-then-write is atomic across
        processes."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _record(row: tuple[object, ...]) -> ApprovalRecord:
    (approval_id, call_id, tool_id, digest, principal, ptype, roles, args, reason, surface,
     created_at, expires_at, state, approver, decided_at, exact) = row  # fmt: skip
    identity = Identity(str(principal), str(ptype), [r for r in str(roles).split(",") if r])
    request = ApprovalRequest(
        call_id=str(call_id),
        tool_id=str(tool_id),
        args_digest=str(digest),
        principal=str(principal),
        args=json.loads(str(args)),
        reason=str(reason),
        expires_at=float(expires_at),  # type: ignore[arg-type]
        surface=str(surface),
        identity=identity,
        approval_id=str(approval_id),
        created_at=float(created_at),  # type: ignore[arg-type]
        args_json=str(exact or ""),
    )
    return ApprovalRecord(
        request,
        ApprovalState(str(state)),
        None if approver is None else str(approver),
        None if decided_at is None else float(decided_at),  # type: ignore[arg-type]
    )
