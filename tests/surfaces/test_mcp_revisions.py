"""`toolcards serve` speaks two MCP revisions: a client asking for 2026-07-28 gets it (no
handshake, per-request envelopes, no server-initiated requests), a client opening with the
initialize handshake gets 2025-11-25 (or the older revision it asked for) and today's
behaviour; an unsupported version gets the server's latest of that era. With
``approval: client``, a 2026-07-28 caller cannot be asked by elicitation: its call waits for
the out-of-band approver instead, and the caller is told so (official SDK clients, real stdio
subprocesses and HTTP servers on 127.0.0.1, the `toolcards approvals` CLI in process)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, closing
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.client import Client
from revision_clients import (
    LEGACY,
    MODERN,
    StdioLines,
    envelope,
    http_client,
    in_process_client,
    stdio_client,
)

from surfaces.surface_support import HttpServer, token_for, write_config
from surfaces.surface_support import toolcards_in_process as toolcards
from toolcards.governance import AuditLog, Identity
from toolcards.stores.governance import PENDING_PER_PRINCIPAL
from toolcards.stores.sqlite.approvals import SqliteApprovalStore

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

BOB = Identity("bob", "user", ["sales"])
CAROL = Identity("carol", "user", ["finance"])
AGENT = Identity("agent.crawler", "agent", ["worker"])
ANN = Identity("ann", "user", ["approver"])
BIG_TRANSFER = {"amount": 500, "currency": "EUR", "to": "acct-9"}
STARTUP = 120.0  # seconds a server may take to listen on a loaded machine

Connect = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture(params=["stdio", "http"])
async def connect(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[str], AbstractAsyncContextManager[Client]]]:
    """``connect(mode)``: a client in ``mode`` to a server of Bob's (over the transport of the
    parameter)."""
    config = write_config(tmp_path, local=BOB, tokens=[BOB])
    if request.param == "stdio":
        yield lambda mode: stdio_client(config, mode)
        return
    server = HttpServer(config, timeout=STARTUP)
    try:
        yield lambda mode: http_client(server.url, mode, token_for(BOB))
    finally:
        server.stop()


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_a_client_asking_for_2026_07_28_gets_it(connect: Connect) -> None:
    async with connect(MODERN) as client:
        tools = await client.list_tools()
        assert client.session.protocol_version == "2026-07-28"
    assert {t.name for t in tools.tools} == {"crm_read", "crm_search", "send_email"}


async def test_a_client_opening_with_the_handshake_gets_2025_11_25(connect: Connect) -> None:
    async with connect(LEGACY) as client:
        tools = await client.list_tools()
        assert client.session.protocol_version == "2025-11-25"
    assert {t.name for t in tools.tools} == {"crm_read", "crm_search", "send_email"}


@pytest.fixture
def lines(tmp_path: Path) -> Iterator[StdioLines]:
    served = StdioLines(write_config(tmp_path, local=BOB))
    yield served
    served.close()


def initialize(version: str) -> dict[str, Any]:
    client = {"name": "raw", "version": "0"}
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": client}


def test_an_older_handshake_revision_is_answered_in_kind(lines: StdioLines) -> None:
    found = lines.request(1, "initialize", initialize("2025-06-18"))
    assert found["result"]["protocolVersion"] == "2025-06-18"


def test_an_unsupported_handshake_version_gets_the_latest_handshake_revision(
    lines: StdioLines,
) -> None:
    found = lines.request(1, "initialize", initialize("2099-01-01"))
    assert found["result"]["protocolVersion"] == "2025-11-25"


def test_an_unsupported_envelope_version_is_refused_naming_2026_07_28(
    lines: StdioLines,
) -> None:
    found = lines.request(1, "tools/list", {"_meta": envelope("2099-01-01")})
    assert found["error"]["code"] == -32022  # UNSUPPORTED_PROTOCOL_VERSION
    assert found["error"]["data"]["supported"] == ["2026-07-28"]


def test_on_2026_07_28_resources_are_subscribed_by_listening_not_by_resources_subscribe(
    lines: StdioLines,
) -> None:
    meta = {"_meta": envelope(MODERN)}
    found = lines.request(1, "server/discover", meta)
    assert found["result"]["supportedVersions"] == ["2026-07-28"]
    # the revision's subscriptions/listen delivers resource updates (the capability says so)
    assert found["result"]["capabilities"]["resources"]["subscribe"] is True
    refused = lines.request(2, "resources/subscribe", {"uri": "toolcards://x", **meta})
    assert refused["error"]["code"] == types.METHOD_NOT_FOUND


def test_on_2025_11_25_resources_subscribe_is_offered(lines: StdioLines) -> None:
    found = lines.request(1, "initialize", initialize("2025-11-25"))
    assert found["result"]["capabilities"]["resources"]["subscribe"] is True


# -- approval: client on a 2026-07-28 connection ---------------------------------------------


def approval_config(base: Path, *, approver: bool) -> Path:
    """``approval: client`` for the agent's ``send_note`` (the CLI's principal is Ann, an
    approver, when ``approver``; a clerk without the role otherwise)."""
    policy = base / "policy.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    return write_config(
        base,
        local=ANN if approver else Identity("clerk", "user", ["sales"]),
        tokens=[AGENT],
        policy=policy,
        tools=["approval_tools:TOOLS"],
        approvals=str(base / "approvals.db"),
        approval="client",
        approval_timeout=60,
    )


class Asked:
    """What the client was asked (elicitation) and told (log messages); it says yes, once
    ``after`` is set when given."""

    def __init__(self, after: anyio.Event | None = None) -> None:
        self.elicited: list[str] = []
        self.told: list[str] = []
        self.after = after

    async def elicit(self, _ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicited.append(params.message)
        if self.after is not None:
            with anyio.fail_after(60):
                await self.after.wait()
        return types.ElicitResult(action="accept", content={"approve": True})

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.told.append(str(params.data))

    def options(self) -> dict[str, Any]:
        return {"elicitation_callback": self.elicit, "logging_callback": self.log,
                "log_level": "info"}  # fmt: skip


async def pending(config: Path) -> list[dict[str, Any]]:
    """The inbox as `toolcards approvals list` shows it, once it holds a call."""
    with anyio.fail_after(60):
        while True:
            done = await anyio.to_thread.run_sync(toolcards, config, "approvals", "list")
            assert done.returncode == 0, done.stderr
            rows: list[dict[str, Any]] = json.loads(done.stdout)
            if rows:
                return rows
            await anyio.sleep(0.1)


async def test_approval_client_on_2026_07_28_the_inbox_may_answer_first(tmp_path: Path) -> None:
    """The 2026-07-28 client is asked through ``InputRequiredResult`` and the inbox sees the
    same request: the approver's grant there answers first; the client's later yes changes
    nothing (the call runs once, one grant is audited)."""
    config = approval_config(tmp_path, approver=True)
    notes = tmp_path / "notes.txt"
    server = HttpServer(config, env={"NOTES_FILE": str(notes)}, timeout=STARTUP)
    granted = anyio.Event()
    asked = Asked(after=granted)
    results: list[Any] = []
    try:
        async with (
            http_client(server.url, MODERN, token_for(AGENT), **asked.options()) as client,
            anyio.create_task_group() as tasks,
        ):

            async def call() -> None:
                args = {"to": "ops", "body": "modern"}
                results.append(await client.call_tool("send_note", args))

            tasks.start_soon(call)
            (row,) = await pending(config)
            done = await anyio.to_thread.run_sync(
                toolcards, config, "approvals", "grant", row["approval_id"]
            )
            assert done.returncode == 0, done.stderr
            granted.set()
    finally:
        server.stop()
    assert len(asked.elicited) == 1 and "send_note" in asked.elicited[0]
    assert results[0].is_error is False
    assert notes.read_text(encoding="utf-8") == "ops: modern\n"
    with AuditLog(tmp_path / "audit.db") as log:
        (entry,) = log.query(outcome="approval_granted", limit=10)
    assert entry.principal == "ann"


async def test_approval_client_on_2026_07_28_asks_the_client_through_input_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = approval_config(tmp_path, approver=False)
    notes = tmp_path / "notes.txt"
    asked = Asked()
    monkeypatch.setenv("NOTES_FILE", str(notes))
    async with in_process_client(config, MODERN, **asked.options()) as client:
        result = await client.call_tool("send_note", {"to": "ops", "body": "asked"})
    assert len(asked.elicited) == 1 and "send_note" in asked.elicited[0]
    assert '{"body":"asked","to":"ops"}' in asked.elicited[0]  # the exact arguments
    assert result.is_error is False
    assert notes.read_text(encoding="utf-8") == "ops: asked\n"


async def test_approval_client_on_2025_11_25_still_asks_the_calling_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = approval_config(tmp_path, approver=True)
    notes = tmp_path / "notes.txt"
    asked = Asked()
    monkeypatch.setenv("NOTES_FILE", str(notes))
    async with in_process_client(config, LEGACY, **asked.options()) as client:
        result = await client.call_tool("send_note", {"to": "ops", "body": "asked"})
    assert len(asked.elicited) == 1 and "send_note" in asked.elicited[0]
    assert result.is_error is False
    assert notes.read_text(encoding="utf-8") == "ops: asked\n"


async def test_a_retry_naming_another_calls_request_is_a_call_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry named call A's request but sent other arguments: it took A's call id (two
    requests, two grants and two runs under one id). It is a fresh call now, with its own id."""
    config = approval_config(tmp_path, approver=False)
    monkeypatch.setenv("NOTES_FILE", str(tmp_path / "notes.txt"))
    yes = {"approval": {"action": "accept", "content": {"approve": True}}}
    a, b = {"to": "ops", "body": "A"}, {"to": "ops", "body": "B"}
    async with in_process_client(config, MODERN) as client:
        s = client.session
        first = await s.call_tool("send_note", a, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        state = first.request_state
        other = await s.call_tool(
            "send_note", b, allow_input_required=True, request_state=state, input_responses=yes
        )
        assert isinstance(other, types.InputRequiredResult)  # asked anew, not A's yes
        assert other.request_state != state
        done = await s.call_tool(
            "send_note", a, allow_input_required=True, request_state=state, input_responses=yes
        )
        assert isinstance(done, types.CallToolResult) and done.is_error is False
    with AuditLog(tmp_path / "audit.db") as log:
        rows = log.query(tool="send_note", limit=100)
    ids = Counter(r.call_id for r in rows if r.outcome == "needs_approval")
    assert len(ids) == 2 and set(ids.values()) == {1}  # one call id per call


async def test_approval_client_on_2026_07_28_refuses_a_principals_requests_past_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2026-07-28 client is answered at once and its request waits in the inbox until it
    expires: one principal holds at most ``PENDING_PER_PRINCIPAL`` of them in the team's
    store, past it a call is refused at once (and audited); another principal of the team,
    served by another server on the same store, is still asked."""
    shared, policy = tmp_path / "approvals.db", tmp_path / "policy.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    configs = [
        write_config(
            tmp_path / who,
            local=Identity(who, "user", ["sales"]),
            policy=policy,
            tools=["approval_tools:TOOLS"],
            approvals=str(shared),
            approval="client",
        )
        for who in ("clerk", "dora")
    ]
    monkeypatch.setenv("NOTES_FILE", str(tmp_path / "notes.txt"))

    async def call(client: Client, i: int) -> Any:
        args = {"to": "ops", "body": f"note {i}"}
        return await client.session.call_tool("send_note", args, allow_input_required=True)

    async with in_process_client(configs[0], MODERN) as client:
        for i in range(PENDING_PER_PRINCIPAL):
            assert isinstance(await call(client, i), types.InputRequiredResult)
        refused = await call(client, PENDING_PER_PRINCIPAL)
    assert isinstance(refused, types.CallToolResult) and refused.is_error
    assert text(refused) == (
        "denied: send_note cannot be asked for approval: clerk already has 100 requests waiting"
    )
    async with in_process_client(configs[1], MODERN) as client:
        assert isinstance(await call(client, 0), types.InputRequiredResult)
    with closing(SqliteApprovalStore(shared, "surfaces")) as store:
        waiting = Counter(r.request.principal for r in store.pending(time.time()))
    assert waiting == {"clerk": PENDING_PER_PRINCIPAL, "dora": 1}
    with AuditLog(tmp_path / "clerk" / "audit.db") as log:
        (entry,) = log.query(outcome="denied", limit=10)
    assert entry.principal == "clerk" and "100 requests waiting" in (entry.error or "")
    assert not (tmp_path / "notes.txt").exists()


# -- logging: a per-request opt-in on 2026-07-28 ---------------------------------------------

CONFORMANCE = Path(__file__).resolve().parent / "conformance"
LOGGING_TOOL = "test_tool_with_logging"  # logs three info records while it runs


@pytest.fixture
def logged_call(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``await logged_call(mode, **options)``: the log messages one call of the logging tool
    brings its client in ``mode``."""
    monkeypatch.syspath_prepend(str(CONFORMANCE))

    async def call(mode: str, **options: Any) -> list[str]:
        told: list[str] = []

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            told.append(str(params.data))

        config = CONFORMANCE / "toolcards.yaml"
        async with in_process_client(config, mode, logging_callback=on_log, **options) as client:
            result = await client.call_tool(LOGGING_TOOL, {})
        assert result.is_error is False
        return told

    return call


async def test_on_2026_07_28_a_call_that_did_not_opt_in_gets_no_log_messages(
    logged_call: Callable[..., Any],
) -> None:
    assert await logged_call(MODERN) == []


async def test_on_2026_07_28_a_call_that_opted_in_gets_its_log_messages(
    logged_call: Callable[..., Any],
) -> None:
    told = await logged_call(MODERN, log_level="info")
    assert told == ["Tool execution started", "Tool processing data", "Tool execution completed"]


async def test_on_2025_11_25_a_call_gets_its_log_messages_without_asking(
    logged_call: Callable[..., Any],
) -> None:
    told = await logged_call(LEGACY)
    assert told == ["Tool execution started", "Tool processing data", "Tool execution completed"]
