"""Pending approvals in a SQLite file (WAL): an MCP server waiting for a decision and a
``toolcards approvals grant`` process on the same machine share it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolcards.stores.approvals import INDEXES, MIGRATION, TABLE, SqlApprovalStore
from toolcards.stores.migrate import sqlite_setup
from toolcards.stores.sqlite.connect import shared_connection


class SqliteApprovalStore(SqlApprovalStore):
    """One team's approvals in a SQLite file, safe for several processes on one machine. It
    may be the audit log's file (its own table) or a file beside it."""

    def __init__(self, path: str | Path, team_id: str | None = None) -> None:
        self.path = Path(path)
        self._db = shared_connection(self.path, sync=True)
        self.team_id = sqlite_setup(self._db, TABLE, MIGRATION, INDEXES, team_id)
        """``team_id``, or (None) the team that owns the file."""
        self._lock = threading.Lock()

    @contextmanager
    def _tx(self) -> Iterator[Any]:
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
    def _read(self) -> Iterator[Any]:
        with self._lock:
            yield self._db

    def close(self) -> None:
        with self._lock:
            self._db.close()
