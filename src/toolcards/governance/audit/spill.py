"""Audit rows that could not be written, kept in a local file until the trail takes them.

When the audit database is down (PostgreSQL restarting, a SQLite disk full), governed calls
go on; their rows must not be lost. :class:`AuditSpill` appends the redacted rows the
writer could not commit to one JSON-lines file per process and team, and hands them back
(oldest first) once a write succeeds again. A file left by a process that ended before its
trail came back is taken over by the next process of the same team and trail.

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
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from toolcards.stores import audit_sql

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_OLDEST_WIDTH = 14  # values in a row kept before the audit table gained a column
_REPLAY_BATCH = 500


def default_spill_dir() -> Path:
    """Where spill files go unless told otherwise."""
    explicit = os.environ.get("TOOLCARDS_AUDIT_SPILL")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "toolcards" / "audit-spill"


class AuditSpill:
    """The spill file of one process for one audit trail (a team in one database)."""

    def __init__(
        self, trail: str, team_id: str, directory: Path | None = None, max_bytes: int = 0
    ) -> None:
        self.directory = directory or default_spill_dir()
        self.max_bytes = max_bytes or DEFAULT_MAX_BYTES
        key = hashlib.sha256(f"{trail}\0{team_id}".encode()).hexdigest()[:16]
        self.prefix = f"audit-{key}-"
        self.path = self.directory / f"{self.prefix}{os.getpid()}.jsonl"
        self.spilled = 0
        """Rows written to the spill file by this process."""
        self.dropped = 0
        """Rows lost because the spill file was full (or could not be written)."""
        self.replayed = 0
        """Rows handed back to the trail from spill files."""
        self.pending = self._others_exist()
        """Whether rows may be waiting in a spill file of this trail."""

    def add(self, rows: list[tuple[Any, ...]]) -> None:
        """Keep ``rows`` (redacted audit rows) until the trail takes them."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            size = self.path.stat().st_size if self.path.exists() else 0
            lines = [json.dumps(list(row), separators=(",", ":")) + "\n" for row in rows]
            kept = []
            for line in lines:
                if size + len(line) > self.max_bytes:
                    break
                kept.append(line)
                size += len(line)
            if kept:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as out:
                    out.writelines(kept)
                    out.flush()
                    os.fsync(out.fileno())
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

    def replay(self, insert: Callable[[list[tuple[Any, ...]]], None]) -> None:
        """Hand every kept row to ``insert`` (oldest file first, in batches) and remove each
        file once all its rows were taken. An ``insert`` that raises is re-raised; the rows
        not taken stay for the next time (those taken are not offered again)."""
        for found in self._files():
            path = self._claim(found)
            if path is None:  # another process of this trail took it first
                continue
            rows = list(_read(path))
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
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            log.warning("audit trail back: %d kept rows written from %s", len(rows), path.name)
        self.pending = self._others_exist()

    def _claim(self, path: Path) -> Path | None:
        """``path`` made this process's: a file of an ended process is renamed first (one
        rename wins), so two processes never replay the same rows."""
        if path == self.path or path.name.startswith(f"{self.prefix}{os.getpid()}."):
            return path
        claimed = self.directory / f"{self.prefix}{os.getpid()}.{path.name}"
        try:
            os.rename(path, claimed)
        except FileNotFoundError:
            return None
        return claimed

    def _files(self) -> list[Path]:
        """This process's files and those of processes of this trail that have ended."""
        try:
            found = list(self.directory.glob(f"{self.prefix}*.jsonl"))
        except OSError:
            return []
        ours = [p for p in found if not _alive(_pid_of(p, self.prefix)) or _mine(p, self)]
        return sorted(ours, key=_mtime)

    def _others_exist(self) -> bool:
        return bool(self._files())


def _mine(path: Path, spill: AuditSpill) -> bool:
    return _pid_of(path, spill.prefix) == os.getpid()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _rewrite(path: Path, rows: list[tuple[Any, ...]]) -> None:
    """Replace the file's rows by ``rows`` (atomically: a crash keeps one version)."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(list(row), separators=(",", ":")) + "\n" for row in rows)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def _pid_of(path: Path, prefix: str) -> int:
    """The process a spill file belongs to (``<prefix><pid>[.<claimed name>].jsonl``)."""
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
    """The rows of a spill file; a torn last line (a crash mid-append) is skipped."""
    with open(path, encoding="utf-8") as spill:
        for line in spill:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, list) and _OLDEST_WIDTH <= len(row) <= audit_sql.WIDTH:
                yield (*row, *[None] * (audit_sql.WIDTH - len(row)))  # kept by an older version
