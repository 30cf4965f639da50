"""What the MCP server offers beyond tools, through the official client over HTTP (one
server for the module, a session per test): progress, logging (a principal's records kept
from another's), rich content, resources (governed, audited, subscribable) and prompts."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_clients import http_client, http_session

from support.scripted import wait_until
from surfaces.surface_support import HttpServer, token_for, write_config
from toolcards.governance import AuditLog, Identity

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ALICE = Identity("alice", "user", ["lead"])
BOB = Identity("bob", "user", ["lead"])
POLICY = """\
default_effect: allow
rules:
  - description: the audit tail is for auditors only
    callers: ["*"]
    targets: ["resource:toolcards://audit/*"]
    effect: deny
  - description: a hundred steps need a human (so steps runs as a task when asked)
    targets: ["steps"]
    effect: approve
    conditions: {arguments: {count: {min: 100}}}
"""
CARDS = [
    {"type": "PlanningTool", "vector_store": False},
    {"type": "KnowledgeGraphTool", "vector_store": False},
    {"type": "WorkspaceTool", "workspace_id": "ws"},
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("features")


@pytest.fixture(scope="module")
def server(base: Path) -> Iterator[HttpServer]:
    policy = base / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    workspace = base / "workspaces" / "ws"
    workspace.mkdir(parents=True)
    (workspace / "notes.md").write_text("# Notes\nship it\n", encoding="utf-8")
    (base / "secret.txt").write_text("outside the workspace\n", encoding="utf-8")
    config = write_config(
        base,
        tokens=[ALICE, BOB],
        policy=policy,
        tools=["slow_tools:TOOLS"],
        prompts=["slow_tools:PROMPTS"],
        cards=CARDS,
        team_id="crew",
    )
    srv = HttpServer(config, env={"TOOLCARDS_WORKSPACES_ROOT": str(base / "workspaces")})
    yield srv
    srv.stop()


def session(server: HttpServer, who: Identity = ALICE, **kwargs: Any) -> Any:
    return http_session(server.url, token_for(who), **kwargs)


def text_of(result: Any) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


# -- progress and logging -----------------------------------------------------------------------


async def test_progress_notifications_reach_a_client_that_passed_a_token(
    server: HttpServer,
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with session(server) as s:
        result = await s.call_tool("steps", {"count": 3}, progress_callback=on_progress)
    assert result.is_error is False
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


async def logged(
    server: HttpServer, level: str | None, count: int
) -> list[types.LoggingMessageNotificationParams]:
    """The log notifications a session receives while ``steps(count)`` runs at ``level``
    (None: no ``logging/setLevel`` sent)."""
    messages: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    async with session(server, logging_callback=on_log) as s:
        if level is not None:
            await s.set_logging_level(level)  # type: ignore[arg-type]
        await s.call_tool("steps", {"count": count})
    return messages


async def test_log_records_at_or_above_the_set_level_are_forwarded(server: HttpServer) -> None:
    messages = await logged(server, "info", 2)
    texts = [m.data for m in messages if m.logger == "toolcards.tests.slow_tools"]
    assert texts == ["step 1 of 2", "step 2 of 2"]
    assert all(m.level == "info" for m in messages if m.data in texts)


async def test_a_call_forwards_info_records_before_any_level_is_set(server: HttpServer) -> None:
    messages = await logged(server, None, 2)
    assert [m.data for m in messages] == ["step 1 of 2", "step 2 of 2"]


async def test_debug_records_follow_a_debug_level(server: HttpServer) -> None:
    messages = await logged(server, "debug", 1)
    assert [m.data for m in messages][-1] == "all steps done"


async def test_warning_level_silences_info_records(server: HttpServer) -> None:
    assert await logged(server, "warning", 2) == []


def hearing() -> tuple[list[types.LoggingMessageNotificationParams], Any]:
    """The log notifications a session receives, and the callback that records them."""
    heard: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(params)

    return heard, on_log


def tools_lines(heard: list[types.LoggingMessageNotificationParams]) -> list[str]:
    return [str(m.data) for m in heard if m.logger == "toolcards.tests.slow_tools"]


def sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


@contextlib.asynccontextmanager
async def raw_session(
    server: HttpServer, who: Identity
) -> AsyncIterator[tuple[Callable[..., Awaitable[dict[str, Any]]], list[dict[str, Any]]]]:
    """A 2025-11-25 session in plain JSON-RPC (the SDK's client takes no task for a
    ``tools/call``): ``request(method, params)`` answers the result; the list holds what the
    session's own stream (its GET) brought."""
    heard: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {token_for(who)}",
               "Accept": "application/json, text/event-stream"}  # fmt: skip
    ids = itertools.count(1)
    async with http_client(headers) as client:

        async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
            response = await client.post(server.url, json=body)
            (answer,) = [m for m in sse_messages(response.text) if "id" in m]
            if "mcp-session-id" in response.headers:
                client.headers["mcp-session-id"] = response.headers["mcp-session-id"]
                client.headers["mcp-protocol-version"] = "2025-11-25"
            return dict(answer["result"])

        async def listen() -> None:
            async with client.stream("GET", server.url) as stream:
                async for line in stream.aiter_lines():
                    heard.extend(sse_messages(line))

        hello = {"name": "raw", "version": "0"}
        await request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": hello})  # fmt: skip
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await client.post(server.url, json=initialized)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(listen)
            yield request, heard
            tasks.cancel_scope.cancel()


async def until(holds: Callable[[], bool], timeout: float) -> bool:
    """Whether ``holds()`` came true within ``timeout`` seconds (a bound)."""
    with anyio.move_on_after(timeout):
        while not holds():
            await anyio.sleep(0.01)
    return holds()


async def test_a_tasks_log_records_go_to_its_creator_and_to_no_other_principal(
    server: HttpServer,
) -> None:
    """A task's call runs after its request was answered: its records come on the creating
    session's own stream, marked with the task; another principal at ``debug`` hears none
    (he heard every one, and the executor's error lines with them)."""
    bob_heard, bob_logs = hearing()
    done = "all steps done"
    async with (
        session(server, BOB, logging_callback=bob_logs) as bob,
        raw_session(server, ALICE) as (alice, alice_heard),
    ):
        await bob.set_logging_level("debug")  # type: ignore[arg-type]
        await alice("logging/setLevel", {"level": "debug"})

        def lines() -> list[dict[str, Any]]:
            return [m["params"] for m in alice_heard if m.get("method") == "notifications/message"]

        call = {"name": "steps", "arguments": {"count": 2}, "task": {"ttl": 60000}}
        with anyio.fail_after(60):
            while True:  # the session's own stream opens as its GET is served: none come before
                task = (await alice("tools/call", call))["task"]
                ended = await alice("tasks/result", {"taskId": task["taskId"]})
                assert ended["isError"] is False
                if await until(lambda: done in [m["data"] for m in lines()], timeout=5):
                    break
        await bob.call_tool("steps", {"count": 1})  # his own records: his session hears them
    assert tools_lines(bob_heard) == ["step 1 of 1", done]
    mine = lines()[-3:]
    assert [m["data"] for m in mine] == ["step 1 of 2", "step 2 of 2", done]
    related = {"io.modelcontextprotocol/related-task": {"taskId": task["taskId"]}}
    assert all(m.get("_meta") == related for m in mine)


async def test_a_prompts_log_records_go_to_its_caller_and_to_no_other_principal(
    server: HttpServer,
) -> None:
    bob_heard, bob_logs = hearing()
    alice_heard, alice_logs = hearing()
    async with (
        session(server, BOB, logging_callback=bob_logs) as bob,
        session(server, logging_callback=alice_logs) as alice,
    ):
        await bob.set_logging_level("debug")  # type: ignore[arg-type]
        await alice.get_prompt("briefing")
        assert tools_lines(alice_heard) == ["briefing made"]  # sent before the response
        await bob.get_prompt("briefing")
    assert tools_lines(bob_heard) == ["briefing made"]


async def test_logging_capability_is_declared(server: HttpServer) -> None:
    async with session(server) as s:
        caps = s.server_capabilities
    assert caps is not None
    assert caps.logging is not None and caps.resources is not None and caps.prompts is not None


# -- content --------------------------------------------------------------------------------------


async def test_binary_image_values_become_image_content(server: HttpServer) -> None:
    async with session(server) as s:
        result = await s.call_tool("picture", {})
    assert isinstance(result.content[0], types.ImageContent)
    assert result.content[0].mime_type == "image/png"


# -- resources ------------------------------------------------------------------------------------


async def test_resources_list_the_team_boards_and_workspace_files(server: HttpServer) -> None:
    async with session(server) as s:
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
        templates = {t.uri_template for t in (await s.list_resource_templates()).resource_templates}
    assert {
        "toolcards://team/crew/planning",
        "toolcards://team/crew/graph",
        "toolcards://workspace/ws/notes.md",
    } <= uris
    assert "toolcards://team/crew/graph/entity/{name}" in templates


async def test_audit_tail_is_hidden_from_a_principal_the_policy_denies(
    server: HttpServer, base: Path
) -> None:
    async with session(server) as s:
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
        with pytest.raises(MCPError) as denied:
            await s.read_resource("toolcards://audit/tail")
        with pytest.raises(MCPError) as missing:
            await s.read_resource("toolcards://no/such/thing")
    assert "toolcards://audit/tail" not in uris
    assert denied.value.error.code == missing.value.error.code == -32002

    def rows() -> list[tuple[str, str, str]]:  # the server commits its batch shortly
        with AuditLog(base / "audit.db") as log:
            found = log.query(tool="resource:toolcards://audit/tail", limit=10)
        return [(r.principal, r.decision, r.outcome) for r in found]

    assert wait_until(lambda: rows()[-1:] == [("alice", "deny", "denied")], timeout=10)


async def test_planning_resource_reflects_the_board(server: HttpServer) -> None:
    async with session(server) as s:
        await s.call_tool("update_planning", {"create": [{"description": "write the report"}]})
        read = await s.read_resource("toolcards://team/crew/planning")
    assert "write the report" in read.contents[0].text


async def test_graph_entity_resource_reads_one_entity(server: HttpServer) -> None:
    entity = {"name": "Ada", "entity_type": "person", "description": "a mathematician"}
    async with session(server) as s:
        await s.call_tool("update_graph", {"create_entities": [entity]})
        read = await s.read_resource("toolcards://team/crew/graph/entity/Ada")
    assert '"a mathematician"' in read.contents[0].text


async def test_workspace_file_resource_reads_the_file(server: HttpServer) -> None:
    async with session(server) as s:
        read = await s.read_resource("toolcards://workspace/ws/notes.md")
    assert read.contents[0].text == "# Notes\nship it\n"


@pytest.mark.parametrize("path", ["../secret.txt", "..%2Fsecret.txt", "%2E%2E/secret.txt"])
async def test_workspace_resource_refuses_paths_outside_the_workspace(
    server: HttpServer, path: str
) -> None:
    async with session(server) as s:
        with pytest.raises(MCPError) as refused:
            await s.read_resource(f"toolcards://workspace/ws/{path}")
    assert refused.value.error.code == -32002


async def test_a_resource_uri_past_the_bound_is_unknown_and_not_audited(
    server: HttpServer, base: Path
) -> None:
    """A URI longer than 4 KiB is not found, read or subscribed (a spelling of a file that
    exists too), before anything is decided or audited; a short missing one after it is."""
    spelled = "toolcards://workspace/ws/" + "./" * 2100 + "notes.md"
    missing = "toolcards://nowhere/" + "x" * 5000
    marker = "toolcards://nowhere/after-the-long-ones"
    async with session(server) as s:
        codes = []
        for uri in (spelled, missing, marker):
            with pytest.raises(MCPError) as read:
                await s.read_resource(uri)
            codes.append(read.value.error.code)
        with pytest.raises(MCPError) as subscribed:
            await s.subscribe_resource(spelled)
    assert codes == [-32002] * 3
    assert subscribed.value.error.code == -32002

    def targets() -> list[str]:  # the server commits its batch shortly
        with AuditLog(base / "audit.db") as log:
            found = log.query(limit=1000)
        return [r.tool for r in found if r.tool.startswith("resource:toolcards://nowhere/")]

    assert wait_until(lambda: f"resource:{marker}" in targets(), timeout=10)
    assert targets() == [f"resource:{marker}"]


async def test_subscribed_resource_sends_updated_when_the_team_changes_it(
    server: HttpServer,
) -> None:
    updated = anyio.Event()
    uris: list[str] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            uris.append(str(root.params.uri))
            updated.set()

    async with session(server, message_handler=on_message) as s:
        await s.subscribe_resource("toolcards://team/crew/planning")
        await s.call_tool("update_planning", {"create": [{"description": "watch me"}]})
        with anyio.fail_after(10):
            await updated.wait()
    assert uris[0] == "toolcards://team/crew/planning"


async def test_subscriptions_are_kept_by_canonical_uri_and_bounded_per_session(
    server: HttpServer, base: Path
) -> None:
    """Spellings of one file are one subscription (its notifications name the canonical
    URI); a session holds at most 64, the 65th is refused until one is dropped."""
    many = base / "workspaces" / "ws" / "many"
    many.mkdir(exist_ok=True)
    for i in range(65):
        (many / f"f{i}.txt").write_text(f"{i}\n", encoding="utf-8")
    uri = "toolcards://workspace/ws/many/f{}.txt".format
    async with session(server) as s:
        for spelling in ("many/f0.txt", "./many/f0.txt", "many//f0.txt", "%6Dany/f0.txt"):
            await s.subscribe_resource(f"toolcards://workspace/ws/{spelling}")
        for i in range(1, 64):
            await s.subscribe_resource(uri(i))
        with pytest.raises(MCPError) as refused:
            await s.subscribe_resource(uri(64))
        await s.unsubscribe_resource("toolcards://workspace/ws/./many/f0.txt")
        await s.subscribe_resource(uri(64))
    assert refused.value.error.code == -32602
    assert "at most 64" in refused.value.error.message


# -- prompts --------------------------------------------------------------------------------------


async def test_card_system_prompts_are_mcp_prompts(server: HttpServer) -> None:
    async with session(server) as s:
        names = {p.name for p in (await s.list_prompts()).prompts}
        prompt = await s.get_prompt("PlanningTool")
    assert {"PlanningTool", "KnowledgeGraphTool"} <= names
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent) and "planning" in content.text.lower()


async def test_a_prompt_name_past_the_bound_is_unknown_and_not_audited(
    server: HttpServer, base: Path
) -> None:
    """Each made-up name was audited, and the audit log remembered it whole: megabyte names
    (anonymous or denied callers' too) held gigabytes of the server's memory."""
    long_name = "p" * 300
    async with session(server) as s:
        with pytest.raises(MCPError) as refused:
            await s.get_prompt(long_name)
        with pytest.raises(MCPError):
            await s.get_prompt("NoSuchPrompt")
    assert refused.value.error.code == -32602
    assert refused.value.error.message.startswith("unknown prompt")

    def prompt_rows() -> list[str]:  # the server commits its batch shortly, in order
        with AuditLog(base / "audit.db") as log:
            return [r.tool for r in log.query(limit=10_000) if r.tool.startswith("prompt:")]

    assert wait_until(lambda: "prompt:NoSuchPrompt" in prompt_rows(), timeout=10)
    assert not [tool for tool in prompt_rows() if tool.startswith("prompt:pp")]


# -- routine disconnects --------------------------------------------------------------------------


def server_log(server: HttpServer) -> str:
    import os

    return os.pread(server.log.fileno(), 1_000_000, 0).decode(errors="replace")


async def test_a_client_leaving_mid_call_is_not_logged_as_an_error(
    server: HttpServer, base: Path
) -> None:
    def naps() -> int:  # the call's audit row is written once the server has ended it
        with AuditLog(base / "audit.db") as log:
            return len(log.query(tool="nap", limit=100))

    before, ended = server_log(server), naps()
    started = anyio.Event()

    async def on_progress(_progress: float, _total: float | None, _message: str | None) -> None:
        started.set()  # nap reports progress 0 as it starts

    async def call(s: Any) -> None:
        await s.call_tool("nap", {"seconds": 2}, progress_callback=on_progress)

    async with session(server) as s, anyio.create_task_group() as tasks:
        tasks.start_soon(call, s)
        with anyio.fail_after(60):
            await started.wait()
        tasks.cancel_scope.cancel()  # the client leaves while the call runs
    await anyio.to_thread.run_sync(lambda: wait_until(lambda: naps() > ended, timeout=60))
    async with session(server) as s:  # the server still serves
        assert (await s.call_tool("steps", {"count": 1})).is_error is False
    added = server_log(server)[len(before) :]
    assert "ClosedResourceError" not in added and "Traceback" not in added, added
