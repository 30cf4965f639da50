"""One team's audit trail in a SQLite file (WAL): several processes may append to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from toolcards.stores import audit_sql
from toolcards.stores.migrate import sqlite_setup
from toolcards.stores.sqlite.connect import shared_connection

_ROWS = 500 if sqlite3.sqlite_version_info >= (3, 32) else 45
"""Rows one INSERT carries: SQLite before 3.32 takes at most 999 values a statement."""


class SqliteAuditTable:
    """The audit table of a SQLite file, seen as one team's rows."""

    def __init__(self, path: str | Path, *, sync: bool, team_id: str | None = None) -> None:
        self.location = str(path)
        self._db = shared_connection(path, sync=sync)
        self.team_id = sqlite_setup(
            self._db, audit_sql.TABLE, audit_sql.MIGRATION, audit_sql.INDEXES, team_id
        )
        """``team_id``, or (None) the team that owns the file."""

    def insert(
        self,
        rows: list[tuple[Any, ...]],
        *,
        replay: bool = False,
        texts: list[bytes] | None = None,
    ) -> int:
        # IMMEDIATE: the chain head is read and moved under the file's write lock
        self._db.execute("BEGIN IMMEDIATE")
        try:
            written = audit_sql.write(
                self._db,
                self.team_id,
                rows,
                replay=replay,
                lock="",
                texts=texts,
                per_statement=_ROWS,
            )
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return written

    def select(self, where: str, params: list[Any], limit: int) -> list[tuple[Any, ...]]:
        sql = audit_sql.select(where)
        return list(self._db.execute(sql, [self.team_id, *params, limit]).fetchall())

    def chain_page(self, after: int, limit: int) -> list[Any]:
        return audit_sql.chain_page(self._db, self.team_id, after, limit)

    def chain_row(self, seq: int) -> int | None:
        return audit_sql.chain_row(self._db, self.team_id, seq)

    def chain_head(self) -> tuple[int, str] | None:
        return audit_sql.chain_head(self._db, self.team_id)

    def unchained(self) -> tuple[int, int | None, int | None]:
        return audit_sql.unchained(self._db, self.team_id)

    def other_teams(self) -> list[str]:
        return audit_sql.other_teams(self._db, self.team_id)

    def close(self) -> None:
        self._db.close()
