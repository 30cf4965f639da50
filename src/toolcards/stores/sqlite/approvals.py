"""Pending approvals and remembered ones (grants) in a SQLite file (WAL): an MCP server waiting
for a decision and a ``toolcards approvals grant`` process on the same machine share it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from toolcards.stores import grants
from toolcards.stores.approvals import INDEXES, MIGRATION, TABLE, SqlApprovalStore
from toolcards.stores.grants import CounterStamp, FileStamp, SqlGrants, Stamp
from toolcards.stores.migrate import sqlite_setup
from toolcards.stores.sqlite.connect import database_path, immediate, shared_connection


class SqliteApprovalStore(SqlApprovalStore):
    """One team's approvals in a SQLite file, safe for several processes on one machine. It
    may be the audit log's file (its own table) or a file beside it. Its ``grants`` are the
    team's remembered approvals in the same file; every process sharing the file sees a grant
    made or revoked at its next call (through ``<file>.grants``, see
    :class:`~toolcards.stores.grants.FileStamp`)."""

    def __init__(self, path: str | Path, team_id: str | None = None) -> None:
        self.path = Path(path)
        self._db = shared_connection(self.path, sync=True)
        self.team_id = sqlite_setup(self._db, TABLE, MIGRATION, INDEXES, team_id)
        """``team_id``, or (None) the team that owns the file."""
        sqlite_setup(self._db, grants.TABLE, grants.MIGRATION, grants.INDEXES, self.team_id)
        self._lock = threading.Lock()
        in_memory = str(path) in ("", ":memory:") or str(path).startswith("file::memory:")
        # named from the file itself: processes opening it by other names (a symlink) share it
        stamp: Stamp = (
            CounterStamp() if in_memory else FileStamp(Path(f"{database_path(self.path)}.grants"))
        )
        self.grants = SqlGrants("grants", self.team_id, self._tx, self._read, stamp, fresh=True)

    def _tx(self) -> AbstractContextManager[Any]:
        return immediate(self._db, self._lock)

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._lock:
            yield self._db

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self.grants.close()
