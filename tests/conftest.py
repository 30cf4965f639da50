"""Session-wide fixtures: real servers started once per test session."""

from __future__ import annotations

import itertools
import os
import tempfile

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before anything imports ray
# audit rows kept while a trail is down go to this session's own folder, not the home folder
os.environ.setdefault("TOOLCARDS_AUDIT_SPILL", tempfile.mkdtemp(prefix="toolcards-spill-"))
from collections.abc import Iterator

import pytest

from support.servers import PostgresServer, RayCluster

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
        server.remove()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database (one per test)."""
    return postgres_server.fresh_database(f"t{next(_databases)}")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """A two-node Ray cluster on 127.0.0.1, started once (skipped without the ray extra)."""
    pytest.importorskip("ray")
    try:
        cluster = RayCluster().start()
    except Exception as exc:
        pytest.skip(f"a Ray cluster cannot start here: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()
