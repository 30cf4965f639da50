"""Recorded results of governed calls in PostgreSQL (the SQL of
:mod:`toolcards.stores.call_results`): every process and machine of a team answers a replayed
call from one record."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolcards.stores.call_results import INDEXES, MIGRATION, TABLE, SqlCallResults
from toolcards.stores.postgres.connections import Connections
from toolcards.stores.postgres.governance import create_table, named_team


class QmarkCursor:
    """A psycopg cursor speaking the ``?`` placeholders of the shared SQL."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: str, params: Any = ()) -> Any:
        self._cursor.execute(sql.replace("?", "%s"), params)
        return self._cursor

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)


class PostgresCallResults(SqlCallResults):
    """One team's recorded call results in a PostgreSQL database."""

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        self.team_id = named_team(team_id)
        self._db = Connections(url, connect_timeout=connect_timeout)
        self.location = self._db.location
        # under the schema lock: concurrent first opens make it once
        create_table(self._db, TABLE, MIGRATION, INDEXES)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._db.transaction(), self._db.cursor() as cur:
            yield QmarkCursor(cur)

    def close(self) -> None:
        self._db.close()
