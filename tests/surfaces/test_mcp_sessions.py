"""MCP sessions over HTTP are bounded: per caller (429) and in total (503), both with a
JSON-RPC error body; idle sessions expire; a live session keeps its caller binding however
many other sessions come and go (the HTTP app in process, raw HTTP through an ASGI client;
``test_mcp_http.py`` serves the same app from a real ``toolcards serve``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from surfaces.surface_support import HEADERS, INIT, token_for, write_config
from toolcards.governance import Identity
from toolcards.surfaces.config import load_config
from toolcards.surfaces.mcp_server.http import http_app
from toolcards.surfaces.runtime import SurfaceRuntime

pytestmark = pytest.mark.timeout(60)

ALICE = Identity("alice", "user", ["data_admin"])
BOB = Identity("bob", "user", ["sales"])
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
IDLE = 0.3
"""The idle timeout of the expiry test; the others keep theirs far beyond the test, so that no
session of theirs expires under load."""
IN_USE_IDLE = 1.0
"""The idle timeout of the session kept in use: its gaps between requests stay well within it."""


@contextlib.contextmanager
def served(tmp_path: Path, **sessions: Any) -> Iterator[TestClient]:
    limits = {"max": 5, "per_principal": 2, "idle_timeout": 600, **sessions}
    config = load_config(write_config(tmp_path, tokens=[ALICE, BOB], sessions=limits))
    with (
        SurfaceRuntime.from_config(config) as rt,
        TestClient(http_app(rt), base_url="http://127.0.0.1:8765") as client,
    ):
        yield client


def auth(who: Identity | None, session: str | None = None) -> dict[str, str]:
    headers = dict(HEADERS)
    if who is not None:
        headers["Authorization"] = f"Bearer {token_for(who)}"
    if session is not None:
        headers["mcp-session-id"] = session
    return headers


def open_session(server: TestClient, who: Identity | None) -> httpx.Response:
    return server.post("/mcp", json=INIT, headers=auth(who))


def session_of(server: TestClient, who: Identity | None) -> str:
    opened = open_session(server, who)
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def use(server: TestClient, who: Identity | None, session: str) -> httpx.Response:
    return server.post("/mcp", json=LIST, headers=auth(who, session))


def test_one_caller_beyond_its_session_cap_gets_429_with_a_jsonrpc_error(
    tmp_path: Path,
) -> None:
    with served(tmp_path) as server:
        session_of(server, ALICE), session_of(server, ALICE)
        refused = open_session(server, ALICE)
        assert refused.status_code == 429
        body = refused.json()
        assert body["jsonrpc"] == "2.0" and body["id"] is None
        assert "too many open sessions for alice" in body["error"]["message"]
        assert open_session(server, BOB).status_code == 200  # other callers are not affected


def test_beyond_the_total_cap_a_new_session_gets_503_with_a_jsonrpc_error(
    tmp_path: Path,
) -> None:
    with served(tmp_path, max=3) as server:
        session_of(server, ALICE), session_of(server, BOB), session_of(server, None)
        refused = open_session(server, None)
        assert refused.status_code == 503
        assert "maximum of 3 sessions" in refused.json()["error"]["message"]


def test_anonymous_callers_share_one_cap(tmp_path: Path) -> None:
    with served(tmp_path) as server:
        session_of(server, None), session_of(server, None)
        assert open_session(server, None).status_code == 429


def test_an_idle_session_expires_and_frees_its_place(
    tmp_path: Path,
) -> None:
    with served(tmp_path, idle_timeout=IDLE) as server:
        first, second = session_of(server, ALICE), session_of(server, ALICE)
        assert open_session(server, ALICE).status_code == 429
        deadline = time.monotonic() + 20  # a bound: expiry comes IDLE seconds after the last use
        opened: list[str] = []
        while len(opened) < 2:  # both idle sessions expire (one may go a moment before the other)
            assert time.monotonic() < deadline, "idle sessions never expired"
            response = open_session(server, ALICE)
            if response.status_code == 200:
                opened.append(response.headers["mcp-session-id"])
            else:
                time.sleep(0.2)
        assert use(server, ALICE, first).status_code == 404
        assert use(server, ALICE, second).status_code == 404
        assert use(server, ALICE, opened[-1]).status_code == 200


def test_a_session_in_use_outlives_the_idle_timeout_with_its_caller(
    tmp_path: Path,
) -> None:
    with served(tmp_path, idle_timeout=IN_USE_IDLE) as server:
        session = session_of(server, ALICE)
        until = time.monotonic() + 3 * IN_USE_IDLE
        while time.monotonic() < until:  # used more often than the idle timeout
            assert use(server, ALICE, session).status_code == 200
            time.sleep(IN_USE_IDLE / 10)
        assert use(server, BOB, session).status_code == 403
        assert use(server, None, session).status_code == 403
        assert use(server, ALICE, session).status_code == 200


def test_sessions_that_come_and_go_never_unbind_a_live_one(
    tmp_path: Path,
) -> None:
    with served(tmp_path) as server:
        kept = session_of(server, ALICE)
        for _ in range(20):  # more sessions than the whole cap, each ended by its caller
            other = session_of(server, BOB)
            ended = server.delete("/mcp", headers=auth(BOB, other))
            assert ended.status_code == 200
        assert use(server, BOB, kept).status_code == 403
        assert use(server, ALICE, kept).status_code == 200
