"""MCP sessions over HTTP are bounded: per caller (429) and in total (503), both with a
JSON-RPC error body; idle sessions expire; a live session keeps its caller binding however
many other sessions come and go (the HTTP app in process, raw HTTP through an ASGI client;
``test_mcp_http.py`` serves the same app from a real ``toolcards serve``). 2026-07-28 requests
open no session: they are bounded by the requests in flight of their caller, whatever session
id they carry, and share no bound with sessions; the tool calls running in a caller's sessions
count with them, however soon their POSTs close (a real ``toolcards serve``, raw HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from starlette.testclient import TestClient

from surfaces.surface_support import HEADERS, INIT, HttpServer, token_for, write_config
from toolcards.governance import AuditLog, Identity
from toolcards.surfaces.config import SessionLimits, load_config
from toolcards.surfaces.mcp_server.http import http_app
from toolcards.surfaces.mcp_server.server import GovernedMCPServer
from toolcards.surfaces.mcp_server.sessions import Message, SessionGuard
from toolcards.surfaces.runtime import SurfaceRuntime

pytestmark = [pytest.mark.timeout(60), pytest.mark.anyio]

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


async def test_an_unknown_session_id_is_refused_before_the_sdk_sees_it() -> None:
    reached: list[str | None] = []

    async def sdk(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(dict(scope["headers"]).get(b"mcp-session-id", b"").decode())

    guard = SessionGuard(sdk, lambda: {"live"}, SessionLimits(), "identity")  # type: ignore[arg-type]
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    for session in ("made-up", "live"):
        scope = {"type": "http", "headers": [(b"mcp-session-id", session.encode())]}
        await guard(scope, None, send)  # type: ignore[arg-type]
    assert sent[0]["status"] == 404  # as the SDK answers an unknown session
    assert reached == ["live"]


async def test_a_session_bound_while_its_opening_answer_streams_counts_once() -> None:
    """The SDK names a new session at the start of its answer, which may stream on."""
    live: set[str] = set()
    answered, finish = asyncio.Event(), asyncio.Event()

    async def sdk(scope: dict[str, Any], receive: Any, send: Any) -> None:
        session = f"session-{len(live)}"
        live.add(session)
        headers = [(b"mcp-session-id", session.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await finish.wait()
        await send({"type": "http.response.body", "body": b""})

    guard = SessionGuard(sdk, lambda: live, SessionLimits(per_principal=2), "identity")  # type: ignore[arg-type]
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
            answered.set()

    async with asyncio.TaskGroup() as openings:
        for _ in range(3):  # each one while the answers before it still stream
            answered.clear()
            openings.create_task(guard({"type": "http", "headers": []}, None, send))  # type: ignore[arg-type]
            await answered.wait()
        finish.set()
    assert statuses == [200, 200, 429]


async def test_a_user_whose_id_reads_anonymous_shares_nothing_with_tokenless_callers() -> None:
    """Sessions and requests in flight belong to a caller's type and id: a user ``anonymous``
    (the config refuses one, another source might not) is not the caller with no token."""
    user = Identity("anonymous", "user")
    held, release = asyncio.Event(), asyncio.Event()

    async def sdk(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if dict(scope["headers"]).get(b"mcp-protocol-version") == b"2026-07-28":
            held.set()
            await release.wait()  # a 2026-07-28 request of the user, in flight
        headers = [] if scope["headers"] else [(b"mcp-session-id", b"theirs")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

    limits = SessionLimits(per_principal=1)
    guard = SessionGuard(sdk, lambda: {"theirs"}, limits, "identity")  # type: ignore[arg-type]
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def request(who: Identity | None, *headers: tuple[bytes, bytes]) -> None:
        scope = {"type": "http", "headers": list(headers), "identity": who}
        await guard(scope, None, send)  # type: ignore[arg-type]

    await request(user)  # opens "theirs"
    await request(None, (b"mcp-session-id", b"theirs"))
    await request(user, (b"mcp-session-id", b"theirs"))
    modern = (b"mcp-protocol-version", b"2026-07-28")
    async with asyncio.TaskGroup() as running:
        running.create_task(request(user, modern))
        await held.wait()
        held.clear()
        running.create_task(request(None, modern))  # not counted as the user's
        await held.wait()
        release.set()
    assert statuses[:2] == [200, 403]
    assert sorted(statuses[2:]) == [200, 200, 200]


# -- 2026-07-28 requests (no session) on a real `toolcards serve` --------------------------

CAROL = Identity("carol", "user", ["finance"])
DAVE = Identity("dave", "user", ["sales"])
MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}
HELD = 60
"""The seconds a held call would sleep: it outlasts its test, which ends it by disconnecting."""


@pytest.fixture(scope="module")
def modern_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the server's config and its audit log (``audit.db``)."""
    return tmp_path_factory.mktemp("modern")


@pytest.fixture(scope="module")
def modern_server(modern_base: Path) -> Iterator[HttpServer]:
    """Each test below uses callers of its own: a held call may outlive its test a moment."""
    base = modern_base
    policy = base / "allow.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    limits = {"max": 100, "per_principal": 2, "idle_timeout": 600}
    config = write_config(
        base, tokens=[ALICE, BOB, CAROL, DAVE], policy=policy, tools=["slow_tools:TOOLS"],
        sessions=limits,
    )  # fmt: skip
    server = HttpServer(config)
    yield server
    server.stop()


def modern_call(who: Identity | None, seconds: float, session: str | None = None) -> dict[str, Any]:
    """The arguments of a 2026-07-28 ``nap_async`` call (it reports progress as it starts)."""
    meta = {**ENVELOPE, "progressToken": 1}
    params = {"name": "nap_async", "arguments": {"seconds": seconds}, "_meta": meta}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "nap_async"}
    return {"json": body, "headers": {**auth(who, session), **headers}}


@contextlib.asynccontextmanager
async def held_calls(
    client: httpx.AsyncClient, url: str, who: Identity, count: int
) -> AsyncIterator[None]:
    """``count`` 2026-07-28 calls of ``who`` running (each has reported its start) until
    the block ends, which disconnects them."""
    readers: list[AsyncIterator[str]] = []  # kept: a reader let go closes its stream
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(count):
            response = await stack.enter_async_context(
                client.stream("POST", url, **modern_call(who, HELD))
            )
            assert response.status_code == 200, await response.aread()
            readers.append(response.aiter_lines())
            while not (await anext(readers[-1])).startswith("data:"):
                pass  # until the progress of the call that started
        yield


async def post_modern(
    client: httpx.AsyncClient, url: str, who: Identity | None, session: str | None = None
) -> httpx.Response:
    return await client.post(url, **modern_call(who, 0, session))


def open_real_session(url: str, who: Identity) -> httpx.Response:
    return httpx.post(url, json=INIT, headers=auth(who), timeout=10)


async def test_a_made_up_session_id_gives_a_2026_caller_no_more_calls_in_flight(
    modern_server: HttpServer,
) -> None:
    url = modern_server.url
    async with httpx.AsyncClient(timeout=30) as client, held_calls(client, url, ALICE, 2):
        with_ids = await asyncio.gather(
            *(post_modern(client, url, ALICE, f"made-up-{i}") for i in range(5))
        )
        without_id = await post_modern(client, url, ALICE)
        assert [r.status_code for r in with_ids] == [429] * 5
        assert without_id.status_code == 429
        assert "too many requests in flight for alice" in without_id.json()["error"]["message"]
        assert (await post_modern(client, url, BOB)).status_code == 200  # others unaffected


async def test_2026_calls_are_not_refused_for_the_sessions_their_caller_holds(
    modern_server: HttpServer,
) -> None:
    url = modern_server.url
    opened = [await asyncio.to_thread(open_real_session, url, CAROL) for _ in range(3)]
    assert [r.status_code for r in opened] == [200, 200, 429]  # the session cap still holds
    async with httpx.AsyncClient(timeout=30) as client, held_calls(client, url, CAROL, 2):
        assert (await post_modern(client, url, CAROL)).status_code == 429  # the in-flight cap


async def test_2026_calls_in_flight_take_no_session_of_their_caller(
    modern_server: HttpServer,
) -> None:
    url = modern_server.url
    async with httpx.AsyncClient(timeout=30) as client, held_calls(client, url, DAVE, 2):
        opened = [await asyncio.to_thread(open_real_session, url, DAVE) for _ in range(3)]
        assert [r.status_code for r in opened] == [200, 200, 429]
        refused = opened[-1].json()["error"]["message"]
        assert "too many open sessions for dave" in refused


LEGACY = "2025-11-25"


async def open_legacy_session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    """An anonymous 2025-11-25 session, initialized: the headers of a request in it."""
    client_info = {"name": "raw", "version": "0"}
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": client_info}
    init = {**INIT, "params": params}
    opened = await client.post(url, json=init, headers=auth(None))
    assert opened.status_code == 200, opened.text
    headers = {**auth(None, opened.headers["mcp-session-id"]), "mcp-protocol-version": LEGACY}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.post(url, json=done, headers=headers)).status_code == 202
    return headers


async def dropped_call(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    call: int,
    seconds: float,
    *,
    progress: bool = True,
) -> dict[str, Any]:
    """The first message of ``nap_async(seconds)`` called as request ``call``, whose POST is
    then closed: its progress when the call started (it runs on in the session), else (or
    without ``progress``) its answer."""
    params: dict[str, Any] = {"name": "nap_async", "arguments": {"seconds": seconds}}
    if progress:
        params["_meta"] = {"progressToken": call}
    body = {"jsonrpc": "2.0", "id": call, "method": "tools/call", "params": params}
    async with client.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])  # type: ignore[no-any-return]
    raise AssertionError(f"call {call} sent nothing")


def anonymous_outcomes(audit: Path) -> list[str]:
    with AuditLog(audit) as log:
        return sorted(e.outcome for e in log.query(limit=1000) if e.principal == "anonymous")


async def test_calls_a_session_runs_at_once_are_bounded_however_soon_their_posts_close(
    modern_server: HttpServer, modern_base: Path
) -> None:
    """One session may not run more calls than its caller's in-flight bound (2) by closing
    each POST once its call starts; a refused call is answered at once and not audited."""
    url, audit = modern_server.url, modern_base / "audit.db"
    async with httpx.AsyncClient(timeout=30) as client:
        session = await open_legacy_session(client, url)
        first = [await dropped_call(client, url, session, call, HELD) for call in range(10, 15)]
        started = [m.get("method") == "notifications/progress" for m in first]
        assert started == [True, True, False, False, False]
        refused = [m["result"] for m in first[2:]]
        assert [r["isError"] for r in refused] == [True] * 3
        assert (
            "too many calls in flight for anonymous (at most 2)" in refused[0]["content"][0]["text"]
        )
        modern = await post_modern(client, url, None)  # one count for both revisions
        assert modern.status_code == 429
        assert anonymous_outcomes(audit) == []  # the refused calls left no row
        for call in (10, 11):  # the running calls end: their places are free again
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": call}}  # fmt: skip
            assert (await client.post(url, json=cancel, headers=session)).status_code == 202
        deadline = time.monotonic() + 20
        for call in itertools.count(20):  # refused until a cancelled call has ended
            done = (await dropped_call(client, url, session, call, 0, progress=False))["result"]
            if not done["isError"]:
                break
            assert time.monotonic() < deadline, f"no place came free: {done}"
            await asyncio.sleep(0.05)
        assert done["content"][0]["text"] == "slept 0.0"
        while anonymous_outcomes(audit).count("cancelled") < 2:
            assert time.monotonic() < deadline, "the cancelled calls were never audited"
            await asyncio.sleep(0.05)
        assert anonymous_outcomes(audit) == ["cancelled", "cancelled", "ok"]


PER_RUN = """default_effect: allow
budgets:
  - {name: finishes per run, per: run, targets: [finish], calls: 1}
"""


def per_run_config(tmp_path: Path) -> Path:
    """``finish`` (long-running: a task when asked) under a ``per: run`` budget of one call."""
    policy = tmp_path / "per_run.yaml"
    policy.write_text(PER_RUN, encoding="utf-8")
    config: Path = write_config(
        tmp_path, local=BOB, tokens=[BOB], policy=policy, tools=["ending_tools:TOOLS"]
    )
    return config


def finish(i: int) -> dict[str, Any]:
    return {"name": "finish", "arguments": {"how": "ok", "tag": f"t{i}"}}


def outcome(result: Any) -> str:
    """The outcome of a call's result (an SDK result, or its JSON)."""
    meta = result.meta if hasattr(result, "meta") else result.get("_meta")
    return str(((meta or {}).get("toolcards/outcome") or {}).get("outcome", "ok"))


async def test_a_per_run_budget_counts_every_call_of_one_session_and_no_other_session(
    tmp_path: Path,
) -> None:
    """An MCP 2025-11-25 session is one run: the SDK makes a new session object for every
    request, and a run named by it let each call of one session through a budget of one."""
    with SurfaceRuntime.from_config(load_config(per_run_config(tmp_path))) as runtime:
        server = GovernedMCPServer(runtime)
        async with server.running(), Client(server.server, mode="legacy") as first:
            calls = [await first.call_tool(**finish(i)) for i in range(3)]
            async with Client(server.server, mode="legacy") as second:
                other = await second.call_tool(**finish(9))
            again = await first.call_tool(**finish(4))
    assert [outcome(r) for r in calls] == ["ok", "over_budget", "over_budget"]
    assert outcome(other) == "ok"  # another session is another run
    assert outcome(again) == "over_budget"


def rpc_result(response: Any) -> dict[str, Any]:
    """The JSON-RPC result of a POST answered as JSON or as an event stream."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        return response.json()["result"]  # type: ignore[no-any-return]
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])["result"]  # type: ignore[no-any-return]


def test_a_per_run_budget_counts_the_calls_and_tasks_of_one_http_session(
    tmp_path: Path,
) -> None:
    """Over HTTP a session's run is named by its ``mcp-session-id``; a task's call counts in
    the session that created it (it counted in no run: a per-run budget never saw it)."""
    config = load_config(per_run_config(tmp_path))
    with (
        SurfaceRuntime.from_config(config) as rt,
        TestClient(http_app(rt), base_url="http://127.0.0.1:8765") as server,
    ):
        first, second = (session_of(server, BOB) for _ in range(2))

        def post(session: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 10, "method": method, "params": params}
            return rpc_result(server.post("/mcp", json=body, headers=auth(BOB, session)))

        task = post(first, "tools/call", {**finish(1), "task": {"ttl": 60000}})["task"]
        tasked = post(first, "tasks/result", {"taskId": task["taskId"]})
        plain = [post(first, "tools/call", finish(i)) for i in (2, 3)]
        other = post(second, "tools/call", finish(4))
    assert outcome(tasked) == "ok"
    assert [outcome(r) for r in plain] == ["over_budget", "over_budget"]
    assert outcome(other) == "ok"
