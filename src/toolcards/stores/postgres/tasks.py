"""MCP task rows in PostgreSQL (the SQL of :mod:`toolcards.stores.tasks`): a task started on
one server is read, cancelled and answered from any process or machine of the team."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolcards.stores.postgres.call_results import QmarkCursor
from toolcards.stores.postgres.connections import Connections
from toolcards.stores.postgres.governance import create_table, named_team
from toolcards.stores.tasks import INDEX, TABLE, SqlTasks


class PostgresTasks(SqlTasks):
    """One team's task rows in a PostgreSQL database."""

    principal_lock = "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))"

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        self.team_id = named_team(team_id)
        self._db = Connections(url, connect_timeout=connect_timeout)
        self.location = self._db.location
        create_table(self._db, TABLE, None, INDEX)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._db.transaction(), self._db.cursor() as cur:
            yield QmarkCursor(cur)

    def close(self) -> None:
        self._db.close()
