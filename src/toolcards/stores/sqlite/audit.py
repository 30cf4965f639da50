"""One team's audit trail in a SQLite file (WAL): several processes may append to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolcards.stores import audit_sql
from toolcards.stores.migrate import sqlite_setup
from toolcards.stores.sqlite.connect import shared_connection


class SqliteAuditTable:
    """The audit table of a SQLite file, seen as one team's rows."""

    def __init__(self, path: str | Path, *, sync: bool, team_id: str | None = None) -> None:
        self.location = str(path)
        self._db = shared_connection(path, sync=sync)
        self.team_id = sqlite_setup(
            self._db, audit_sql.TABLE, audit_sql.MIGRATION, audit_sql.INDEXES, team_id
        )
        """``team_id``, or (None) the team that owns the file."""

    def insert(self, rows: list[tuple[Any, ...]]) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany(audit_sql.INSERT, [(*row, self.team_id) for row in rows])
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def select(self, where: str, params: list[Any], limit: int) -> list[tuple[Any, ...]]:
        sql = audit_sql.select(where)
        return list(self._db.execute(sql, [self.team_id, *params, limit]).fetchall())

    def close(self) -> None:
        self._db.close()
