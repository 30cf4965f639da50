"""Fixtures for the MCP tests: real server processes, always terminated after the test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mcp_support import ServerProcess


@pytest.fixture
def start_server() -> Iterator[type[ServerProcess]]:
    """Start servers with ``start_server(script, mode, env).start()``; all are stopped after."""
    started: list[ServerProcess] = []

    class Tracked(ServerProcess):
        def start(self) -> ServerProcess:
            started.append(self)
            return super().start()

    yield Tracked
    for server in started:
        server.stop()
