"""AuditLog: one row per decision and call, of one team: journaled when the call ends, written
by a background thread, chained to the team's rows before it (the table is a store:
:mod:`toolcards.stores.audit_sql` or PostgreSQL; the chain :mod:`toolcards.stores.audit_sql`
and its check :mod:`toolcards.stores.audit_chain`)."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import queue
import secrets
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from toolcards.core.identity import Identity
from toolcards.core.threads import background_thread
from toolcards.governance.audit import shutdown
from toolcards.governance.audit.spill import AuditJournal, AuditSpill
from toolcards.governance.redaction.redactor import (
    DEFAULT_REDACTOR,
    Redactor,
    canonical_json,
    storable,
)
from toolcards.stores.audit_chain import ChainCheck, ChainReport
from toolcards.stores.audit_sql import join, keys_of, row_json
from toolcards.stores.base import AuditTable
from toolcards.stores.location import StoreLocation
from toolcards.stores.open import open_audit_table

log = logging.getLogger(__name__)

_MAX_BATCH = 4096
_VERIFY_PAGE = 5000
_VERIFY_ROUNDS = 100
_KEYS_A_STATEMENT = 400  # within the 999 values SQLite before 3.32 takes a statement


class AuditRecord(NamedTuple):
    """What a caller hands to :meth:`AuditLog.record`: raw values, redacted and digested
    when the row is made (a call pays microseconds).

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
    key: str | None = None
    """The row's key (None: one of its own): a caller whose row may be made again gives the
    same key each time, and finds a row written before by it (:meth:`AuditLog.query`)."""


def made_by(who: Identity | None) -> tuple[str, str, frozenset[str]]:
    """The principal, its type and its roles of a row ``who`` made (None: anonymous), in the
    order :class:`AuditRecord` takes them after its time:
    ``AuditRecord(time.time(), *made_by(who), surface=..., ...)``."""
    if who is None:
        return "anonymous", "anonymous", frozenset()
    return who.id, who.type, who.roles


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
    key: str | None = None
    """The row's own key, made with the row: a row written again is found by it."""
    grant_id: str | None = None
    """The grant that let the call run without asking anyone (a remembered approval), or the
    grant a ``grant_created``/``grant_revoked`` row is about."""


def _rest(rec: AuditRecord, key: str) -> tuple[tuple[Any, ...], str]:
    """The values of ``rec``'s row but its arguments (see
    :func:`toolcards.stores.audit_sql.split`), made when the call ends: what its journal
    keeps; and the canonical JSON of its arguments (digested here, redacted on the writer:
    the costly part of a row)."""
    redactor = rec.redactor or DEFAULT_REDACTOR
    try:
        canonical = canonical_json(rec.args)
    except Exception:  # an argument that cannot be made JSON: keep the row, drop the values
        canonical = ""
    digest = rec.args_digest or hashlib.sha256((canonical or _UNSERIALISABLE).encode()).hexdigest()
    # text a caller may have chosen is made storable (no NUL, no lone surrogate): one row
    # no store takes would hold up every row after it
    rest = (
        float(rec.ts),
        storable(rec.principal),
        rec.principal_type,
        storable(",".join(sorted(rec.roles))),
        rec.surface,
        shown_name(redactor, rec.tool),  # an unknown tool's name is the caller's text
        storable(rec.call_id) if rec.call_id else rec.call_id,
        rec.decision,
        storable(rec.reason) if rec.reason else rec.reason,
        rec.outcome,
        float(rec.duration) * 1000.0,
        storable(redactor.error(rec.error, rec.args, rec.sensitive)) if rec.error else None,
        rec.approved_args_digest or None,
        storable(redactor.error(rec.hook, rec.args, rec.sensitive)) if rec.hook else None,
        rec.grant_id or None,
        key,
        digest,
    )
    return rest, canonical


def _arguments(
    args: Mapping[str, Any], sensitive: Iterable[str], redactor: Redactor | None, canonical: str
) -> str:
    """A record's arguments, redacted, as JSON (``canonical``: their canonical JSON, empty
    when they cannot be made JSON)."""
    if not canonical:
        return _UNSERIALISABLE
    try:
        return (redactor or DEFAULT_REDACTOR).redacted_json(args, sensitive, canonical)
    except Exception:  # keep the row, drop the values
        return _UNSERIALISABLE


_UNSERIALISABLE = '{"unserialisable":true}'


_NAMES: dict[tuple[Redactor, str], str] = {}
_MAX_NAMES = 4096
_MAX_REMEMBERED = 256
"""Longer names are not remembered: a name a caller makes up may be megabytes long, and
4,096 of them would stay in memory whole (the row keeps the redactor's cut of it)."""


def shown_name(redactor: Redactor, tool: str) -> str:
    """``redactor.name(tool)``, remembered (a few tools make most rows; the names a caller
    makes up are bounded: the memory starts over when full, and keeps only short names).
    The shown name is cut to a bounded length by the redactor."""
    if len(tool) > _MAX_REMEMBERED:
        return storable(redactor.name(tool))
    shown = _NAMES.get((redactor, tool))
    if shown is None:
        if len(_NAMES) >= _MAX_NAMES:
            _NAMES.clear()
        shown = _NAMES[(redactor, tool)] = storable(redactor.name(tool))
    return shown


_Queued = tuple[
    tuple[Any, ...], str, bytes | None, Mapping[str, Any], Iterable[str], Redactor | None
]
"""A row's values but its arguments, the canonical JSON of its arguments, the JSON of those
values (None: not made yet), and what redacts the arguments: the arguments, the names to
redact whole and the redactor (None: the default). Not the record itself: a row waiting for
the writer then holds no object the garbage collector walks (with the default redactor and
plain arguments), where a queued record was walked by every collection until the writer
took it, and moved to the oldest generation on the way."""


class AuditLog:
    """An append-only audit trail in a SQLite file (WAL), or in PostgreSQL when ``path`` is a
    ``postgresql://`` URL (one trail for every process of a distributed team). Each team's
    rows form a hash chain (:meth:`verify`).

    ``durability="batched"`` (default): :meth:`record` writes the row to this process's
    journal file (:mod:`.spill`) and queues it for a background writer that commits in
    batches: a call pays microseconds, and its row outlives the process from the moment the
    call is answered, also when the process is killed (SIGKILL): the next process of the trail
    writes what a killed one's writer had not committed. The writer gathers rows for up to
    ``linger`` seconds before a commit, so a busy process commits a few times a second, not
    once per row. ``"sync"`` commits each row (``synchronous=FULL`` on SQLite) before
    :meth:`record` returns: it outlives the machine too. :meth:`flush` waits for queued rows;
    :meth:`close` flushes and stops the writer.

    Queued rows are committed on a clean shutdown: at interpreter exit (even without
    ``close``) and, with ``flush_on_signal=True`` (default), on SIGTERM, whose default action
    (ending the process) follows the flush; governed calls still running then get an
    ``interrupted`` row first. Rows the trail cannot take (the database is down) are kept in
    a spill file until it can.

    ``read_only=True``: a trail to be looked at, whose writer is another process (``toolcards
    dashboard --store``): no journal, no writer, :meth:`record` writes nothing, rows kept in
    spill files are left to that writer, and the trail is opened read only (a trail that
    does not exist or needs migrating is refused: :class:`StoreError`).
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
        read_only: bool = False,
    ) -> None:
        if durability not in ("batched", "sync"):
            raise ValueError("durability must be 'batched' or 'sync'")
        self.durability = durability
        self._batch_size = max(1, min(batch_size, _MAX_BATCH))
        self._linger = max(0.0, linger)
        location = StoreLocation.parse(path)
        sync = durability == "sync"
        self._db: AuditTable = open_audit_table(location, team_id, sync=sync, read_only=read_only)
        self.team_id = self._db.team_id
        """Whose rows this log writes and reads (every row carries it): ``team_id``, else the
        team owning a SQLite file, else ``"toolcards"`` (the default team of every store and
        config)."""
        spill = None if spill_dir is None else str(spill_dir)
        reopen = (location.target, durability, batch_size, linger, flush_on_signal, self.team_id)
        self._reopen = (*reopen, spill, read_only)
        self.path = Path(location.display)
        """The file, or (PostgreSQL) the database's printable URL."""
        where = Path(spill_dir) if spill_dir is not None else None
        trail = location.key if location.path is not None else location.display
        self.spill = AuditSpill(trail, self.team_id, where)
        """Rows the trail could not take yet (see :mod:`toolcards.governance.audit.spill`)."""
        self.read_only = read_only
        self._journal: AuditJournal | None = None
        self._memory = location.is_memory
        writes = durability == "batched" and not read_only
        if writes and not location.is_memory:
            self._journal = self.spill.journal()
        self._keys = itertools.count(1)
        self._key_prefix = secrets.token_hex(8)
        self._lock = threading.RLock()  # a SIGTERM handler may write while its thread does
        self._append = threading.RLock()  # journal and queue in one order (also a handler's)
        self._queue: queue.SimpleQueue[_Queued | threading.Event | None] = queue.SimpleQueue()
        self._hurry = threading.Event()
        self._closed = False
        self._unqueued = False  # rows journaled after close: the next process writes them
        self._writer: threading.Thread | None = None
        if writes:
            self._writer = background_thread(self._run, name="toolcards-audit")
            self._writer.start()
        if not read_only:  # also "sync": on SIGTERM, the calls still running get their rows
            shutdown.register(self, signals=flush_on_signal)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as where it writes: unpickling (in another process) opens the same trail."""
        return (_reopen, self._reopen)

    # -- writing --------------------------------------------------------------------------

    def record(self, entry: AuditRecord) -> None:
        """Write (sync) one entry, or journal and queue it (batched), as a row with a key of
        its own. Never raises into the caller's call. After :meth:`close` (a SIGTERM closed
        the log while other threads' calls ended) the row is still kept: in the journal, or
        (sync) the spill; the next process of the trail writes it."""
        if self.read_only or (self._closed and self._memory):
            return  # a trail only looked at, or a log in memory that nothing outlives
        try:
            key = entry.key or f"{self._key_prefix}-{next(self._keys)}"
            rest, canonical = _rest(entry, key)
            redactor = entry.redactor
            if redactor is DEFAULT_REDACTOR:
                redactor = None
            journal = self._journal
            if journal is not None:  # batched: on disk before the call is answered
                text = row_json(rest)
                queued = (rest, canonical, text, entry.args, entry.sensitive, redactor)
                with self._append:
                    journal.append(text)
                    if self._closed:  # no writer any more: the next process writes it
                        self._unqueued = True
                    else:
                        self._queue.put(queued)
            elif self._writer is not None:
                self._queue.put((rest, canonical, None, entry.args, entry.sensitive, redactor))
            else:  # sync: once closed, the database fails and the row goes to the spill
                with self._lock:
                    self._write([(rest, canonical, None, entry.args, entry.sensitive, redactor)])
        except Exception:
            log.exception("audit write failed; 1 entry lost")

    def _write(self, queued: list[_Queued]) -> None:
        """Write the rows of ``queued``, after any rows kept while the trail was down; rows
        the trail cannot take now go to the spill file."""
        rows = [
            join(rest, _arguments(args, sensitive, redactor, canonical))
            for rest, canonical, _, args, sensitive, redactor in queued
        ]
        try:
            if self.spill.pending:
                self.spill.replay(self._rewrite)
            if rows:
                texts = [item[2] or row_json(item[0]) for item in queued]
                self._db.insert(rows, texts=texts)
        except Exception as exc:
            if rows:
                log.warning("audit write failed (%s); keeping %d rows in the spill", exc, len(rows))
                self.spill.add(rows)

    def _rewrite(self, rows: list[tuple[Any, ...]]) -> None:
        """Rows kept on disk, written again: those the trail has already are left out."""
        self._db.insert(rows, replay=True)

    def _run(self) -> None:
        if self.spill.pending:  # rows an ended process of this trail left
            self._commit([])
        stop = False
        while not stop:
            first = self._queue.get()
            if self._linger and isinstance(first, tuple):
                self._hurry.wait(self._linger)  # let a batch gather; flush/close cut it short
            with self._append:  # every row in the sealed journal files is queued by now
                sealed = self._journal.seal() if self._journal is not None else []
            batch: list[_Queued] = []
            waiters: list[threading.Event] = []
            item: _Queued | threading.Event | None = first
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
            if sealed and self._journal is not None:  # its rows are committed, or spilled
                self._journal.release(sealed)
            if self._queue.empty():
                self._hurry.clear()
            for waiter in waiters:
                waiter.set()

    def _commit(self, batch: list[_Queued]) -> None:
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
        """Flush, stop the writer and close the database. Idempotent. Rows still queued
        when ``timeout`` passes stay in the journal (the next process of the trail writes
        them)."""
        if self._closed:
            return
        self._closed = True
        shutdown.unregister(self)
        if self._writer is not None and self._writer.is_alive():
            self._queue.put(None)
            self._hurry.set()
            self._writer.join(timeout=timeout)
        with self._lock:
            if self.spill.pending and not self.read_only:  # hand the trail what was kept
                with contextlib.suppress(Exception):
                    self.spill.replay(self._rewrite)
            self._db.close()
        journal = self._journal
        if journal is not None:
            with self._append:
                sealed = journal.seal()
                written = self._queue.empty() and not self._unqueued
            if written and self._writer is not None and not self._writer.is_alive():
                journal.release(sealed)
            else:
                journal.keep(sealed)
            journal.close()

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
        call_id: str | None = None,
        grant_id: str | None = None,
        key: str | None = None,
    ) -> list[AuditEntry]:
        """Entries matching every given filter, oldest first (at most ``limit``, newest kept).

        ``before`` keeps entries whose ``id`` is below it: the next page back from a page whose
        oldest entry has that id. ``grant_id``: the calls a grant let through, and its own
        rows (made, revoked). ``key``: the row made under that key (:attr:`AuditRecord.key`;
        :meth:`keyed` asks for many). Nothing found where the team has no row at all: see
        :meth:`elsewhere`."""
        self._caught_up()
        where: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("principal", principal),
            ("tool", tool),
            ("decision", decision),
            ("outcome", outcome),
            ("call_id", call_id),
            ("grant_id", grant_id),
            ("row_key", key),
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

    def keyed(self, principal: str, keys: Iterable[str], timeout: float) -> set[str]:
        """Which of ``keys`` (each starting with :data:`~toolcards.stores.audit_sql.KEYED`)
        are keys of ``principal``'s committed rows (:attr:`AuditRecord.key`), looked up by the
        key index, hundreds a statement. Unlike :meth:`query` it waits
        for no queued row: a caller remembers the keys it gave. :class:`TimeoutError` when the
        log stays busy ``timeout`` seconds (its writer waiting for another process's lock)."""
        if not self._lock.acquire(timeout=timeout):
            raise TimeoutError(f"audit log busy for {timeout:g}s")
        found: set[str] = set()
        rest = list(keys)
        try:
            while rest:
                chunk, rest = rest[:_KEYS_A_STATEMENT], rest[_KEYS_A_STATEMENT:]
                rows = self._db.select(keys_of(len(chunk)), [principal, *chunk], len(chunk))
                found.update(row[-1] for row in rows)
                if len(rows) == len(chunk):  # rows of one key may have kept another's out
                    rest = [key for key in chunk if key not in found] + rest
        finally:
            self._lock.release()
        return found

    def tail(self, n: int = 20) -> list[AuditEntry]:
        """The last ``n`` entries, oldest first."""
        return self.query(limit=n)

    def elsewhere(self) -> list[str]:
        """Other teams with rows in this log's table (a few, sorted) when its own team has
        none: where the rows went that a reader of this team does not see (empty otherwise).
        A reader that finds nothing says so (:func:`other_teams_line`)."""
        self._caught_up()
        with self._lock:
            if self._db.select("", [], 1):
                return []
            return self._db.other_teams()

    def verify(self) -> ChainReport:
        """Check the team's hash chain (every row committed so far): its report names the
        first row changed, removed or reordered, in one line."""
        self._caught_up()
        check = ChainCheck(self.team_id, self._chain_row)
        head = None
        for _ in range(_VERIFY_ROUNDS):  # writers of other processes may add rows meanwhile
            while True:
                with self._lock:
                    page = self._db.chain_page(check.after, _VERIFY_PAGE)
                if not check.feed(page) or len(page) < _VERIFY_PAGE:
                    break
            with self._lock:
                head = self._db.chain_head()
                more = check.behind(head) and self._db.chain_page(check.after, 1)
            if not more:
                break
        with self._lock:
            unchained = self._db.unchained()
        return check.finish(head, unchained)

    def _chain_row(self, seq: int) -> int | None:
        with self._lock:
            return self._db.chain_row(seq)

    def _caught_up(self) -> None:
        """Queued rows committed, and rows kept on disk written, before a read."""
        self.flush()
        if self._writer is None and self.spill.pending and not self.read_only:
            with self._lock:
                self._write([])


def other_teams_line(log: AuditLog, others: list[str], how: str) -> str:
    """The one line a reader says when ``log``'s trail holds rows of other teams and none of
    its own: the teams, and ``how`` to select one (``{team}`` stands for the first)."""
    teams = ", ".join(repr(team) for team in others)
    return (
        f"{log.path} has no audit rows of team {log.team_id!r}; it has rows of team {teams}: "
        f"select one with {how.format(team=others[0])}"
    )


def _ts(value: float | datetime) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


def _entry(row: Iterable[Any]) -> AuditEntry:
    (rid, ts, principal, ptype, roles, surface, tool, call_id, digest, args, decision, reason,
     outcome, duration, error, approved, hook, grant_id, key) = row  # fmt: skip
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
        key=key,
    )


def _reopen(
    location: str,
    durability: Any,
    batch_size: int,
    linger: float,
    flush_on_signal: bool,
    team_id: str | None = None,
    spill_dir: str | None = None,
    read_only: bool = False,
) -> AuditLog:
    return AuditLog(
        location,
        durability,
        batch_size=batch_size,
        linger=linger,
        flush_on_signal=flush_on_signal,
        team_id=team_id,
        spill_dir=spill_dir,
        read_only=read_only,
    )
