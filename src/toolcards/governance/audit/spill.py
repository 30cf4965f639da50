"""Audit rows on disk until the trail has them: this process's journal, and the spill.

**The journal** (:class:`AuditJournal`): a batched log writes each row to its process's
journal file before the row is queued for the writer, so the row outlives the process once
its call is answered: a process killed with SIGKILL leaves the rows its writer had not
committed in its journal. The writer seals the current journal file before each batch and
removes it once the batch is committed (or spilled); the next process of the same trail finds
a dead process's journal and writes its rows (rows the killed writer had committed are found
by their key and left out). Journal files are not synced to the disk: they outlive the
process, not the machine (``durability="sync"`` commits each row with ``synchronous=FULL``).

**The spill** (:class:`AuditSpill`): when the audit database is down (PostgreSQL restarting,
a SQLite disk full), governed calls go on; their rows must not be lost. The rows the writer
could not commit are appended (and synced to the disk) to one JSON-lines file per process and
trail, and handed back (oldest first) once a write succeeds again. A file left by a process
that ended before its trail came back is taken over by the next process of the same team and
trail, as a journal is.

The spill is bounded (``max_bytes``, 64 MiB by default): past it, rows are counted as
dropped and logged loudly, never held in memory. Files are private to the user (0600 in a
0700 directory). The default directory is ``$TOOLCARDS_AUDIT_SPILL``, else
``$XDG_STATE_HOME/toolcards/audit-spill`` (``~/.local/state/...``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
import secrets
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from toolcards.stores import audit_sql
from toolcards.stores.audit_sql import join, row_json

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_OLDEST_WIDTH = 14  # values in a row kept before the audit table gained a column
_REPLAY_BATCH = 500
_JOURNAL = ".journal"
_SPILL = ".jsonl"
_JOURNAL_BYTES = 1024 * 1024  # a journal file's room: the rows between two batches, and more
_SPARES = 2  # journal files kept, cleared, for the rows of later batches


def default_spill_dir() -> Path:
    """Where spill files go unless told otherwise."""
    explicit = os.environ.get("TOOLCARDS_AUDIT_SPILL")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "toolcards" / "audit-spill"


def row_line(row: tuple[Any, ...]) -> bytes:
    """One row as a line of a journal or spill file."""
    return row_json(row) + b"\n"


class AuditSpill:
    """The spill file of one process for one audit trail (a team in one database), and the
    files of ended processes of the trail (spills and journals) it takes over."""

    def __init__(
        self, trail: str, team_id: str, directory: Path | None = None, max_bytes: int = 0
    ) -> None:
        self.directory = directory or default_spill_dir()
        self.max_bytes = max_bytes or DEFAULT_MAX_BYTES
        key = hashlib.sha256(f"{trail}\0{team_id}".encode()).hexdigest()[:16]
        self.prefix = f"audit-{key}-"
        """Every file of this trail starts with it (then the process id)."""
        self.path = self.directory / f"{self.prefix}{os.getpid()}{_SPILL}"
        self.spilled = 0
        """Rows written to the spill file by this process."""
        self.dropped = 0
        """Rows lost because the spill file was full (or could not be written)."""
        self.replayed = 0
        """Rows handed back to the trail from spill and journal files."""
        self._failed: set[str] = set()  # files already logged as not replayable
        self.pending = self._others_exist()
        """Whether rows may be waiting in a file of this trail."""

    def journal(self) -> AuditJournal:
        """This process's journal for the trail."""
        return AuditJournal(self.directory, self.prefix)

    def add(self, rows: list[tuple[Any, ...]]) -> None:
        """Keep ``rows`` (redacted audit rows) until the trail takes them."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            size = self.path.stat().st_size if self.path.exists() else 0
            kept = []
            for row in rows:
                line = row_line(row)
                if size + len(line) > self.max_bytes:
                    break
                kept.append(line)
                size += len(line)
            if kept:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    _write_all(fd, b"".join(kept))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self.pending = True
        except OSError:
            log.exception("audit spill %s cannot be written; %d rows lost", self.path, len(rows))
            self.dropped += len(rows)
            return
        self.spilled += len(kept)
        if len(kept) < len(rows):
            lost = len(rows) - len(kept)
            self.dropped += lost
            log.error(
                "audit spill %s is full (%d bytes): %d rows lost", self.path, self.max_bytes, lost
            )
        else:
            log.warning("audit trail unavailable: %d rows kept in %s", len(kept), self.path)

    def replay(self, insert: Callable[[list[tuple[Any, ...]]], object]) -> None:
        """Hand every kept row to ``insert`` (oldest file first, in batches) and remove each
        file once all its rows were taken. An ``insert`` that raises is re-raised; the rows
        not taken stay for the next time (those taken are not offered again). ``insert``
        leaves out rows already in the trail (a COMMIT whose answer was lost, a journal
        whose rows were committed before its process was killed). A file that cannot be
        taken over, read or removed is logged and skipped: it never holds up the others, nor
        the rows written after it."""
        for found in self._files():
            try:
                path = self._claim(found)
                rows = list(_read(path)) if path is not None else []
            except OSError as exc:
                self._skip(found, exc)
                continue
            if path is None:  # another process of this trail took it first
                continue
            taken = 0
            try:
                while taken < len(rows):
                    batch = rows[taken : taken + _REPLAY_BATCH]
                    insert(batch)
                    taken += len(batch)
                    self.replayed += len(batch)
            except Exception:
                if taken:
                    _rewrite(path, rows[taken:])
                self.pending = True
                raise
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:  # its rows are offered again, and left out as written
                self._skip(path, exc)
            if rows:
                log.warning("audit trail: %d kept rows written from %s", len(rows), path.name)
        self.pending = self._others_exist()

    def _skip(self, path: Path, exc: OSError) -> None:
        """Logged once: the file stays, and every write tries it again."""
        if path.name not in self._failed:
            self._failed.add(path.name)
            log.error("audit spill file %s skipped: %s", path, exc)

    def _claim(self, path: Path) -> Path | None:
        """``path`` made this process's: a file of an ended process is renamed first (one
        rename wins), so two processes never replay the same rows. The new name is
        ``<prefix><pid>.<prefix><token><kind>``, not the old name lengthened: a file taken
        over by process after process (a long outage) would pass the longest name allowed."""
        if path == self.path or path.name.startswith(f"{self.prefix}{os.getpid()}."):
            return path
        kind = _JOURNAL if path.name.endswith(_JOURNAL) else _SPILL
        name = f"{self.prefix}{os.getpid()}.{self.prefix}{secrets.token_hex(8)}{kind}"
        claimed = self.directory / name
        try:
            os.rename(path, claimed)
        except FileNotFoundError:
            return None
        return claimed

    def _files(self) -> list[Path]:
        """This process's spill file, and the files of processes of this trail that have
        ended (this process's own journal is its writer's, never replayed here)."""
        try:
            found = list(self.directory.glob(f"{self.prefix}*"))
        except OSError:
            return []
        mine = f"{self.prefix}{os.getpid()}."
        claimed = f"{mine}{self.prefix}"
        ours = []
        for path in found:
            name = path.name
            if not name.endswith((_SPILL, _JOURNAL)):
                continue  # a rewrite's temporary file
            if name.startswith(mine):
                if name.endswith(_SPILL) or name.startswith(claimed):
                    ours.append(path)
            elif not _alive(_pid_of(path, self.prefix)):
                ours.append(path)
        return sorted(ours, key=_mtime)

    def _others_exist(self) -> bool:
        return bool(self._files())


class JournalFile(NamedTuple):
    """A sealed journal file: its rows are queued; ``used`` bytes of it hold them."""

    path: Path
    map: mmap.mmap
    used: int


class AuditJournal:
    """This process's journal for one trail: the rows queued for the writer, on disk before
    their call is answered. A journal file is allocated up front and mapped into memory: a
    row is copied into the file's pages (no system call, which would also hand the
    interpreter lock to the writer thread), and the kernel keeps them when the process dies.
    The log appends and seals under its own lock (a sealed file's rows are all queued before
    the seal); the writer releases the sealed files once their rows are committed or spilled:
    a released file is cleared (zeros, which a reader skips) and written again by a later
    batch (a new file costs a page fault and a block allocation per page written), or
    removed. A journal that cannot be written (no room, a file system without shared
    mappings) is logged once and given up: rows then outlive the process once committed."""

    def __init__(self, directory: Path, prefix: str, size: int = _JOURNAL_BYTES) -> None:
        _JOURNALS.add(self)
        self.directory = directory
        self._prefix = prefix
        self._size = size
        self._name = secrets.token_hex(4)  # two logs of one trail in a process: two journals
        self._map: mmap.mmap | None = None
        self._path: Path | None = None
        self._used = 0
        self._full: list[JournalFile] = []
        self._spares: list[tuple[Path, mmap.mmap]] = []
        self._spares_lock = threading.Lock()  # released by the writer, taken by the caller
        self._number = 0
        self.failed: str | None = None
        """Why the journal was given up (None: it works)."""

    def append(self, row: bytes) -> None:
        """Copy one row (its JSON, :func:`~toolcards.stores.audit_sql.row_json`) into the
        journal as a line (a failure is logged, never raised: the row is still queued)."""
        if self.failed is not None:
            return
        try:
            used = self._used
            end = used + len(row) + 1
            mapped = self._map
            if mapped is None or end > len(mapped):
                mapped = self._start(len(row) + 1)
                used, end = 0, len(row) + 1
            mapped[used : end - 1] = row
            mapped[end - 1] = 10  # the line's end
            self._used = end
        except (OSError, ValueError) as exc:
            self.failed = str(exc)
            log.error(
                "the audit journal in %s cannot be written (%s): rows outlive this process "
                "only once committed",
                self.directory,
                exc,
            )

    def seal(self) -> list[JournalFile]:
        """End the current file (the next row starts another); returns the files written
        since the last seal."""
        self._end()
        sealed, self._full = self._full, []
        return sealed

    def release(self, sealed: list[JournalFile]) -> None:
        """Sealed files whose rows the trail has (committed, or in the spill): cleared and
        kept for later rows (a few), or removed."""
        for file in sealed:
            if len(self._spares) < _SPARES and _cleared(file):
                with self._spares_lock:
                    self._spares.append((file.path, file.map))
            else:
                _close(file.map)
                with contextlib.suppress(OSError):
                    file.path.unlink()

    def keep(self, sealed: list[JournalFile]) -> None:
        """Sealed files whose rows may not be committed (a log closed before its writer
        was done): left to the next process of the trail, cut to their rows."""
        for file in sealed:
            _close(file.map)
            with contextlib.suppress(OSError):
                os.truncate(file.path, file.used)

    def close(self) -> None:
        """Remove the cleared files kept for later rows."""
        with self._spares_lock:
            spares, self._spares = self._spares, []
        for path, mapped in spares:
            _close(mapped)
            with contextlib.suppress(OSError):
                path.unlink()

    def _start(self, need: int) -> mmap.mmap:
        self._end()
        if need <= self._size and self._spares:
            with self._spares_lock:
                spare = self._spares.pop() if self._spares else None
            if spare is not None:
                self._path, self._map = spare
                return spare[1]
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._number += 1
        name = f"{self._prefix}{os.getpid()}.{self._name}-{self._number}{_JOURNAL}"
        path = self.directory / name
        size = max(self._size, need)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)  # no room: an error here, not a SIGBUS later
            mapped = mmap.mmap(fd, size)
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        finally:
            os.close(fd)
        self._path, self._map = path, mapped
        return mapped

    def forget(self) -> None:
        """In a forked child: leave the parent's files to the parent (the child's rows start
        a file of its own, written by the next process of the trail once the child ends)."""
        maps = [self._map, *(f.map for f in self._full), *(m for _, m in self._spares)]
        self._map, self._path, self._used, self._full, self._spares = None, None, 0, [], []
        self._spares_lock = threading.Lock()
        for mapped in maps:
            _close(mapped)  # the child's view only: the parent's file is untouched

    def _end(self) -> None:
        """End the current file: sealed with the next :meth:`seal`."""
        mapped, path, used = self._map, self._path, self._used
        self._map, self._path, self._used = None, None, 0
        if mapped is not None and path is not None:
            self._full.append(JournalFile(path, mapped, used))


def _cleared(file: JournalFile) -> bool:
    """``file``'s rows overwritten with zeros (a reader skips them); False when it cannot
    be written."""
    try:
        file.map[: file.used] = bytes(file.used)
    except (OSError, ValueError):
        return False
    return True


def _close(mapped: mmap.mmap | None) -> None:
    if mapped is not None:
        with contextlib.suppress(OSError, ValueError):
            mapped.close()


_JOURNALS: weakref.WeakSet[AuditJournal] = weakref.WeakSet()


def _forget_in_child() -> None:
    for journal in list(_JOURNALS):
        journal.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _rewrite(path: Path, rows: list[tuple[Any, ...]]) -> None:
    """Replace the file's rows by ``rows`` (atomically: a crash keeps one version)."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_all(fd, b"".join(row_line(row) for row in rows))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def _pid_of(path: Path, prefix: str) -> int:
    """The process a file belongs to (``<prefix><pid>.[<prefix><token>|<name>-<n>]<kind>``:
    a file taken over, or a journal)."""
    try:
        return int(path.name.removeprefix(prefix).split(".", 1)[0])
    except ValueError:
        return -1


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path) -> Iterator[tuple[Any, ...]]:
    """The rows of a spill or journal file; a torn last line (a crash mid-append) is skipped.
    A journal keeps a row but its arguments (:func:`~toolcards.stores.audit_sql.split`; their
    digest is kept): its row says so in their place (``audit_sql.NOT_KEPT``)."""
    journal = path.name.endswith(_JOURNAL)
    with open(path, "rb") as kept:
        for line in kept:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, list):
                continue
            if journal and len(row) == audit_sql.WIDTH - 1:
                yield join(row, audit_sql.NOT_KEPT)
            elif not journal and _OLDEST_WIDTH <= len(row) <= audit_sql.WIDTH:
                yield (*row, *[None] * (audit_sql.WIDTH - len(row)))  # kept by an older version
