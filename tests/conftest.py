"""Session-wide fixtures: real servers started once per test session."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from support.servers import PostgresServer

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL 15 cluster on 127.0.0.1 (skipped when it cannot start here)."""
    try:
        server = PostgresServer().start()
    except Exception as exc:  # no server binaries, or not startable on this machine
        pytest.skip(f"PostgreSQL is not available: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database (one per test)."""
    return postgres_server.fresh_database(f"t{next(_databases)}")
