"""AuditLog: one row per decision and call, of one team, written by a background thread (the
table is a store: :mod:`toolcards.stores.sqlite.audit` or PostgreSQL)."""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from toolcards.core.threads import background_thread
from toolcards.governance.audit import shutdown
from toolcards.governance.audit.spill import AuditSpill
from toolcards.governance.redaction.redactor import DEFAULT_REDACTOR, Redactor
from toolcards.stores.base import AuditTable, StoreLocation
from toolcards.stores.open import open_audit_table

log = logging.getLogger(__name__)

_MAX_BATCH = 4096


class AuditRecord(NamedTuple):
    """What a caller hands to :meth:`AuditLog.record`: raw values, redacted and digested on
    the writer thread (a call pays microseconds).

    ``args`` are the arguments as received; ``sensitive`` names arguments to redact whole.
    ``args_digest`` is set only when ``args`` are already redacted (an approval decision
    recorded from its request); the digest is then taken as given. ``duration`` is in
    seconds. ``redactor`` is the policy's (None: the default patterns).
    ``approved_args_digest`` is the digest of the arguments an approver granted in place of
    the call's own (an edit): ``args`` are then those that ran and ``args_digest`` stays the
    digest of the arguments as called.
    """

    ts: float
    principal: str
    principal_type: str
    roles: Iterable[str]
    surface: str
    tool: str
    call_id: str | None
    args: Mapping[str, Any]
    decision: str
    outcome: str
    reason: str | None = None
    duration: float = 0.0
    error: str | None = None
    sensitive: Iterable[str] = ()
    args_digest: str | None = None
    redactor: Redactor | None = None
    approved_args_digest: str | None = None
    hook: str | None = None
    """The guardrail that refused the call, or those that changed it (comma-separated)."""
    grant_id: str | None = None
    """The grant (a remembered approval) that let the call run, or that a row is about."""


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
    approved_args_digest: str | None = None
    """Set when an approver edited the arguments: the digest of those that ran (``args``);
    ``args_digest`` is then the digest of the arguments as called."""
    hook: str | None = None
    """The guardrail hook that refused the call (outcome ``refused``), or the hooks that
    changed its arguments or its result (comma-separated; see :mod:`.guardrails`)."""
    grant_id: str | None = None
    """The grant that let the call run without asking anyone (a remembered approval), or the
    grant a ``grant_created``/``grant_revoked`` row is about."""


def _row(rec: AuditRecord) -> tuple[Any, ...]:
    redactor = rec.redactor or DEFAULT_REDACTOR
    if rec.args_digest is None:
        digest, args = redactor.digest_and_redacted(rec.args, rec.sensitive)
    else:
        digest, args = rec.args_digest, redactor.digest_and_redacted(rec.args, rec.sensitive)[1]
    return (
        rec.ts,
        rec.principal,
        rec.principal_type,
        ",".join(sorted(rec.roles)),
        rec.surface,
        redactor.name(rec.tool),  # an unknown tool's name is the caller's text
        rec.call_id,
        digest,
        args,
        rec.decision,
        rec.reason,
        rec.outcome,
        rec.duration * 1000.0,
        redactor.text(rec.error) if rec.error else None,
        rec.approved_args_digest,
        redactor.text(rec.hook) if rec.hook else None,
        rec.grant_id,
    )


def _safe_row(rec: AuditRecord) -> tuple[Any, ...]:
    try:
        return _row(rec)
    except Exception:  # an argument that cannot be made JSON: keep the row, drop the values
        return _row(rec._replace(args={"unserialisable": True}, sensitive=(), args_digest=None))


class AuditLog:
    """An append-only audit trail in a SQLite file (WAL), or in PostgreSQL when ``path`` is a
    ``postgresql://`` URL (one trail for every process of a distributed team).

    ``durability="batched"`` (default) queues rows for a background writer that commits in
    batches: a call pays microseconds. The writer gathers rows for up to ``linger`` seconds
    before a commit, so a busy process commits a few times a second, not once per row.
    ``"sync"`` commits each row before :meth:`record` returns. :meth:`flush` waits for queued
    rows; :meth:`close` flushes and stops the writer.

    Queued rows are kept on a clean shutdown: at interpreter exit (even without ``close``)
    and, with ``flush_on_signal=True`` (default), on SIGTERM, whose default action (ending
    the process) follows the flush; governed calls still running then get an ``interrupted``
    row first. A process killed with SIGKILL loses what was still
    queued (at most ``linger`` seconds of rows, plus one batch being written).
    """

    def __init__(
        self,
        path: str | Path,
        durability: Literal["batched", "sync"] = "batched",
        *,
        batch_size: int = 512,
        linger: float = 0.05,
        flush_on_signal: bool = True,
        team_id: str | None = None,
        spill_dir: str | Path | None = None,
    ) -> None:
        if durability not in ("batched", "sync"):
            raise ValueError("durability must be 'batched' or 'sync'")
        self.durability = durability
        self._batch_size = max(1, min(batch_size, _MAX_BATCH))
        self._linger = max(0.0, linger)
        location = StoreLocation.parse(path)
        self._db: AuditTable = open_audit_table(location, team_id, sync=durability == "sync")
        self.team_id = self._db.team_id
        """Whose rows this log writes and reads (every row carries it): ``team_id``, else the
        team owning a SQLite file, else ``"default"``."""
        spill = None if spill_dir is None else str(spill_dir)
        reopen = (location.target, durability, batch_size, linger, flush_on_signal, self.team_id)
        self._reopen = (*reopen, spill)
        self.path = Path(location.display)
        """The file, or (PostgreSQL) the database's printable URL."""
        where = Path(spill_dir) if spill_dir is not None else None
        self.spill = AuditSpill(location.display, self.team_id, where)
        """Rows the trail could not take yet (see :mod:`toolcards.governance.audit.spill`)."""
        self._lock = threading.RLock()  # a SIGTERM handler may write while its thread does
        self._queue: queue.SimpleQueue[AuditRecord | threading.Event | None] = queue.SimpleQueue()
        self._hurry = threading.Event()
        self._closed = False
        self._writer: threading.Thread | None = None
        if durability == "batched":
            self._writer = background_thread(self._run, name="toolcards-audit")
            self._writer.start()
        # also "sync": on SIGTERM, the calls still running get their rows before the end
        shutdown.register(self, signals=flush_on_signal)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as where it writes: unpickling (in another process) opens the same trail."""
        return (_reopen, self._reopen)

    # -- writing --------------------------------------------------------------------------

    def record(self, entry: AuditRecord) -> None:
        """Queue (batched) or write (sync) one entry. Never raises into the caller's call."""
        if self._closed:
            return
        if self._writer is not None:
            self._queue.put(entry)
            return
        with self._lock:
            try:
                self._write([entry])
            except Exception:
                log.exception("audit write failed; 1 entry lost")

    def _write(self, entries: list[AuditRecord]) -> None:
        """Write ``entries``, after any rows kept while the trail was down; rows the trail
        cannot take now go to the spill file."""
        rows = [_safe_row(rec) for rec in entries]
        try:
            if self.spill.pending:
                self.spill.replay(self._db.insert)
            self._db.insert(rows)
        except Exception as exc:
            log.warning("audit write failed (%s); keeping %d rows in the spill", exc, len(rows))
            self.spill.add(rows)

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if self._linger and first is not None and not isinstance(first, threading.Event):
                self._hurry.wait(self._linger)  # let a batch gather; flush/close cut it short
            batch: list[AuditRecord] = []
            waiters: list[threading.Event] = []
            item: AuditRecord | threading.Event | None = first
            while True:
                if item is None:
                    stop = True
                elif isinstance(item, threading.Event):
                    waiters.append(item)
                else:
                    batch.append(item)
                if len(batch) >= self._batch_size:
                    self._commit(batch)
                    batch = []
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._commit(batch)
            if self._queue.empty():
                self._hurry.clear()
            for waiter in waiters:
                waiter.set()

    def _commit(self, batch: list[AuditRecord]) -> None:
        with self._lock:
            try:
                self._write(batch)
            except Exception:
                log.exception("audit write failed; %d entries lost", len(batch))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued entry is committed; False on timeout."""
        if self._writer is None or not self._writer.is_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        self._hurry.set()
        return done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Flush, stop the writer and close the database. Idempotent."""
        if self._closed:
            return
        self._closed = True
        shutdown.unregister(self)
        if self._writer is not None and self._writer.is_alive():
            self._queue.put(None)
            self._hurry.set()
            self._writer.join(timeout=timeout)
        with self._lock:
            if self.spill.pending:  # the trail may be back: hand it what was kept
                with contextlib.suppress(Exception):
                    self.spill.replay(self._db.insert)
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
        before: int | None = None,
        grant_id: str | None = None,
    ) -> list[AuditEntry]:
        """Entries matching every given filter, oldest first (at most ``limit``, newest kept).

        ``before`` keeps entries whose ``id`` is below it: the next page back from a page whose
        oldest entry has that id. ``grant_id``: the calls a grant let through, and its own
        rows (made, revoked)."""
        self.flush()
        where: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("principal", principal),
            ("tool", tool),
            ("decision", decision),
            ("outcome", outcome),
            ("grant_id", grant_id),
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
        if before is not None:
            where.append("id < ?")
            params.append(int(before))
        with self._lock:
            rows = self._db.select(" AND ".join(where), params, int(limit))
        return [_entry(r) for r in reversed(rows)]

    def tail(self, n: int = 20) -> list[AuditEntry]:
        """The last ``n`` entries, oldest first."""
        return self.query(limit=n)


def _ts(value: float | datetime) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


def _entry(row: Iterable[Any]) -> AuditEntry:
    (rid, ts, principal, ptype, roles, surface, tool, call_id, digest, args, decision, reason,
     outcome, duration, error, approved, hook, grant_id) = row  # fmt: skip
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
        approved_args_digest=approved,
        hook=hook,
        grant_id=grant_id,
    )


def _reopen(
    location: str,
    durability: Any,
    batch_size: int,
    linger: float,
    flush_on_signal: bool,
    team_id: str | None = None,
    spill_dir: str | None = None,
) -> AuditLog:
    return AuditLog(
        location,
        durability,
        batch_size=batch_size,
        linger=linger,
        flush_on_signal=flush_on_signal,
        team_id=team_id,
        spill_dir=spill_dir,
    )
