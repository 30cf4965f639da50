"""Fixtures of the surface tests (helpers live in ``surfaces.surface_support``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from surfaces.surface_support import TABLE_PATH, HttpServer
from toolcards.governance import load_policy_table
from toolcards.governance.policy.table import PolicyTable


@pytest.fixture(scope="session")
def table() -> PolicyTable:
    return load_policy_table(TABLE_PATH)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def start_http() -> Iterator[type[HttpServer]]:
    started: list[HttpServer] = []

    class Tracked(HttpServer):
        def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
            super().__init__(config, env)
            started.append(self)

    yield Tracked
    for server in started:
        server.stop()
