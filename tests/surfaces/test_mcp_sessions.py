"""MCP sessions over HTTP are bounded: per caller (429) and in total (503), both with a
JSON-RPC error body; idle sessions expire; a live session keeps its caller binding however
many other sessions come and go (real `toolcards serve` processes, raw HTTP)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from surfaces.surface_support import HEADERS, INIT, HttpServer, token_for, write_config
from toolcards.governance import Identity

pytestmark = pytest.mark.timeout(90)

ALICE = Identity("alice", "user", ["data_admin"])
BOB = Identity("bob", "user", ["sales"])
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
IDLE = 1.5


def served(start_http: type[HttpServer], tmp_path: Path, **sessions: Any) -> HttpServer:
    limits = {"max": 5, "per_principal": 2, "idle_timeout": IDLE, **sessions}
    return start_http(write_config(tmp_path, tokens=[ALICE, BOB], sessions=limits))


def auth(who: Identity | None, session: str | None = None) -> dict[str, str]:
    headers = dict(HEADERS)
    if who is not None:
        headers["Authorization"] = f"Bearer {token_for(who)}"
    if session is not None:
        headers["mcp-session-id"] = session
    return headers


def open_session(server: HttpServer, who: Identity | None) -> httpx.Response:
    return httpx.post(server.url, json=INIT, headers=auth(who), timeout=10)


def session_of(server: HttpServer, who: Identity | None) -> str:
    opened = open_session(server, who)
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def use(server: HttpServer, who: Identity | None, session: str) -> httpx.Response:
    return httpx.post(server.url, json=LIST, headers=auth(who, session), timeout=10)


def test_one_caller_beyond_its_session_cap_gets_429_with_a_jsonrpc_error(
    start_http: type[HttpServer], tmp_path: Path
) -> None:
    server = served(start_http, tmp_path)
    session_of(server, ALICE), session_of(server, ALICE)
    refused = open_session(server, ALICE)
    assert refused.status_code == 429
    body = refused.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert "too many open sessions for alice" in body["error"]["message"]
    assert open_session(server, BOB).status_code == 200  # other callers are not affected


def test_beyond_the_total_cap_a_new_session_gets_503_with_a_jsonrpc_error(
    start_http: type[HttpServer], tmp_path: Path
) -> None:
    server = served(start_http, tmp_path, max=3)
    session_of(server, ALICE), session_of(server, BOB), session_of(server, None)
    refused = open_session(server, None)
    assert refused.status_code == 503
    assert "maximum of 3 sessions" in refused.json()["error"]["message"]


def test_anonymous_callers_share_one_cap(start_http: type[HttpServer], tmp_path: Path) -> None:
    server = served(start_http, tmp_path)
    session_of(server, None), session_of(server, None)
    assert open_session(server, None).status_code == 429


def test_an_idle_session_expires_and_frees_its_place(
    start_http: type[HttpServer], tmp_path: Path
) -> None:
    server = served(start_http, tmp_path)
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
    start_http: type[HttpServer], tmp_path: Path
) -> None:
    server = served(start_http, tmp_path)
    session = session_of(server, ALICE)
    until = time.monotonic() + 3 * IDLE
    while time.monotonic() < until:  # used more often than the idle timeout
        assert use(server, ALICE, session).status_code == 200
        time.sleep(IDLE / 4)
    assert use(server, BOB, session).status_code == 403
    assert use(server, None, session).status_code == 403
    assert use(server, ALICE, session).status_code == 200


def test_sessions_that_come_and_go_never_unbind_a_live_one(
    start_http: type[HttpServer], tmp_path: Path
) -> None:
    server = served(start_http, tmp_path, idle_timeout=60)
    kept = session_of(server, ALICE)
    for _ in range(20):  # more sessions than the whole cap, each ended by its caller
        other = session_of(server, BOB)
        ended = httpx.delete(server.url, headers=auth(BOB, other), timeout=10)
        assert ended.status_code == 200
    assert use(server, BOB, kept).status_code == 403
    assert use(server, ALICE, kept).status_code == 200
