"""A PostgreSQL server of this folder's own: the fault tests restart, stop and freeze it, so
they never disturb the session's shared server."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from support.servers import PostgresServer, running_postgres

_databases = itertools.count(1)


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    """A private PostgreSQL cluster on 127.0.0.1 (skipped when it cannot start here)."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def pg_url(pg: PostgresServer) -> Iterator[str]:
    """A new, empty database on the private server; the server runs again after the test."""
    url = pg.fresh_database(f"f{next(_databases)}")
    try:
        yield url
    finally:
        pg.thaw()
        if pg.process is None or pg.process.poll() is not None:
            pg.start()
