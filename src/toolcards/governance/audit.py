"""AuditLog: one SQLite (WAL) row per decision and call, written by a background thread."""

from __future__ import annotations

import json
import logging
import queue
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from toolcards.governance.redact import digest_and_redacted, redact_text

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    principal TEXT NOT NULL,
    principal_type TEXT NOT NULL,
    roles TEXT NOT NULL,
    surface TEXT NOT NULL,
    tool TEXT NOT NULL,
    call_id TEXT,
    args_digest TEXT NOT NULL,
    args TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT,
    outcome TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS audit_principal_ts ON audit(principal, ts);
CREATE INDEX IF NOT EXISTS audit_tool_ts ON audit(tool, ts);
CREATE INDEX IF NOT EXISTS audit_ts ON audit(ts);
"""
_COLUMNS = (
    "ts, principal, principal_type, roles, surface, tool, call_id, args_digest, args, "
    "decision, reason, outcome, duration_ms, error"
)
_INSERT = f"INSERT INTO audit ({_COLUMNS}) VALUES ({', '.join('?' * 14)})"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One recorded decision or call, as read back by :meth:`AuditLog.query`."""

    id: int
    ts: float
    principal: str
    principal_type: str
    roles: tuple[str, ...]
    surface: str
    tool: str
    call_id: str | None
    args_digest: str
    args: dict[str, Any]
    decision: str
    reason: str | None
    outcome: str
    duration_ms: float
    error: str | None


# What the executor hands over: raw values; redaction and digests happen on the writer.
RawEntry = tuple[
    float,
    str,
    str,
    frozenset[str],
    str,
    str,
    "str | None",
    Any,
    tuple[str, ...],
    str,
    "str | None",
    str,
    float,
    "str | None",
]


def _row(raw: RawEntry) -> tuple[Any, ...]:
    ts, principal, ptype, roles, surface, tool, call_id, args, sensitive = raw[:9]
    decision, reason, outcome, duration, error = raw[9:]
    return (
        ts,
        principal,
        ptype,
        ",".join(sorted(roles)),
        surface,
        tool,
        call_id,
        *digest_and_redacted(args, sensitive),
        decision,
        reason,
        outcome,
        duration * 1000.0,
        redact_text(error) if error else None,
    )


class AuditLog:
    """An append-only audit trail in a SQLite file (WAL).

    ``durability="batched"`` (default) queues rows for a background writer that commits in
    batches: a call pays microseconds. ``"sync"`` commits each row before :meth:`record`
    returns. :meth:`flush` waits for queued rows; :meth:`close` flushes and stops the writer.
    """

    def __init__(
        self,
        path: str | Path,
        durability: Literal["batched", "sync"] = "batched",
        *,
        batch_size: int = 512,
    ) -> None:
        if durability not in ("batched", "sync"):
            raise ValueError("durability must be 'batched' or 'sync'")
        self.path = Path(path)
        self.durability = durability
        self._batch_size = batch_size
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        sync_mode = "NORMAL" if durability == "batched" else "FULL"
        self._db.execute(f"PRAGMA synchronous={sync_mode}")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[RawEntry | threading.Event | None] = queue.SimpleQueue()
        self._closed = False
        self._writer: threading.Thread | None = None
        if durability == "batched":
            self._writer = threading.Thread(target=self._run, name="toolcards-audit", daemon=True)
            self._writer.start()

    # -- writing --------------------------------------------------------------------------

    def record(self, entry: RawEntry) -> None:
        """Queue (batched) or write (sync) one entry. Never raises into the caller's call."""
        if self._closed:
            return
        if self._writer is not None:
            self._queue.put(entry)
            return
        with self._lock:
            self._write([entry])

    def _write(self, entries: list[RawEntry]) -> None:
        rows = []
        for raw in entries:
            try:
                rows.append(_row(raw))
            except Exception:
                fallback = (*raw[:7], {"unserialisable": True}, (), *raw[9:])
                rows.append(_row(fallback))
        self._db.execute("BEGIN")
        self._db.executemany(_INSERT, rows)
        self._db.execute("COMMIT")

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            batch: list[RawEntry] = []
            waiters: list[threading.Event] = []
            stop = False
            while True:
                if item is None:
                    stop = True
                elif isinstance(item, threading.Event):
                    waiters.append(item)
                else:
                    batch.append(item)
                if len(batch) >= self._batch_size:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                with self._lock:
                    try:
                        self._write(batch)
                    except sqlite3.Error:
                        log.exception("audit write failed; %d entries lost", len(batch))
                        if self._db.in_transaction:
                            self._db.execute("ROLLBACK")
            for waiter in waiters:
                waiter.set()
            if stop:
                return

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued entry is committed; False on timeout."""
        if self._writer is None or not self._writer.is_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def close(self) -> None:
        """Flush, stop the writer and close the database. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None and self._writer.is_alive():
            self._queue.put(None)
            self._writer.join(timeout=10.0)
        with self._lock:
            self._db.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading --------------------------------------------------------------------------

    def query(
        self,
        principal: str | None = None,
        tool: str | None = None,
        since: float | datetime | None = None,
        until: float | datetime | None = None,
        decision: str | None = None,
        outcome: str | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """Entries matching every given filter, oldest first (at most ``limit``, newest kept)."""
        self.flush()
        where: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("principal", principal),
            ("tool", tool),
            ("decision", decision),
            ("outcome", outcome),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if since is not None:
            where.append("ts >= ?")
            params.append(_ts(since))
        if until is not None:
            where.append("ts <= ?")
            params.append(_ts(until))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT id, {_COLUMNS} FROM audit {clause} ORDER BY id DESC LIMIT ?"
        params.append(int(limit))
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return [_entry(r) for r in reversed(rows)]

    def tail(self, n: int = 20) -> list[AuditEntry]:
        """The last ``n`` entries, oldest first."""
        return self.query(limit=n)


def _ts(value: float | datetime) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


def _entry(row: Iterable[Any]) -> AuditEntry:
    (rid, ts, principal, ptype, roles, surface, tool, call_id, digest, args, decision, reason,
     outcome, duration, error) = row  # fmt: skip
    return AuditEntry(
        id=rid,
        ts=ts,
        principal=principal,
        principal_type=ptype,
        roles=tuple(r for r in roles.split(",") if r),
        surface=surface,
        tool=tool,
        call_id=call_id,
        args_digest=digest,
        args=json.loads(args),
        decision=decision,
        reason=reason,
        outcome=outcome,
        duration_ms=duration,
        error=error,
    )
