"""MCP 2026-07-28 in process (the official SDK client on an in-memory connection to the
governed server): an approval-gated call answered through ``InputRequiredResult``, a task
that asks its client and runs on its answer, and ``subscriptions/listen`` delivering a
planning-board update, filtered by what the caller may read."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp.types as types
import pytest
import yaml
from mcp.client.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

from surfaces.surface_support import write_config
from toolcards.governance import AuditLog, Identity
from toolcards.governance.approvals.types import ApprovalError
from toolcards.stores.tasks import SqliteTasks
from toolcards.surfaces.config import load_config
from toolcards.surfaces.mcp_server.listening import PER_PRINCIPAL
from toolcards.surfaces.mcp_server.options import MCPOptions
from toolcards.surfaces.mcp_server.server import GovernedMCPServer
from toolcards.surfaces.mcp_server.sessions import InFlight, caller_of
from toolcards.surfaces.mcp_server.tasks import TaskLimits
from toolcards.surfaces.runtime import SurfaceRuntime

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

CALLER = Identity("agent.runner", "agent", ["worker"])
APPROVER = Identity("ann", "user", ["approver"])
MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
POLICY = {
    "default_effect": "allow",
    "rules": [
        {"description": "writes need a human", "targets": ["workspace_write"], "effect": "approve"},
        {"description": "no audit for agents", "targets": ["resource:toolcards://audit/*"],
         "effect": "deny"},
    ],
}  # fmt: skip


def config(base: Path, approval: str) -> Path:
    (base / "workspaces" / "w").mkdir(parents=True, exist_ok=True)
    policy = base / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    cards = [{"type": "WorkspaceTool", "workspace_id": "w"}, {"type": "PlanningTool"}]
    return write_config(base, local=CALLER, tokens=[APPROVER], policy=policy, tools=[],
                        cards=cards, team_id="t", approval=approval)  # fmt: skip


@contextlib.asynccontextmanager
async def served(
    base: Path, approval: str, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> AsyncIterator[tuple[Client, SurfaceRuntime]]:
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(base / "workspaces"))
    with SurfaceRuntime.from_config(load_config(config(base, approval)), durability="sync") as rt:
        server = GovernedMCPServer(rt)
        async with server.running(), Client(server.server, mode=MODERN, **options) as client:
            yield client, rt


async def test_a_gated_call_is_answered_by_the_client_through_input_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    async def approve(_ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with served(tmp_path, "client", monkeypatch, elicitation_callback=approve) as (c, _rt):
        result = await c.call_tool("workspace_write", {"path": "a.txt", "content": "hi"})
    assert not result.is_error, result
    assert (tmp_path / "workspaces" / "w" / "a.txt").read_text() == "hi"
    (question,) = asked
    assert '"content":"hi"' in question and "caller: agent.runner" in question
    with AuditLog(tmp_path / "audit.db") as log:
        rows = [(e.principal, e.outcome) for e in log.query() if e.tool == "workspace_write"]
    assert rows == [
        ("agent.runner", "needs_approval"),
        ("agent.runner", "approval_granted"),
        ("agent.runner", "ok"),
    ]


async def test_an_answer_for_other_arguments_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with served(tmp_path, "client", monkeypatch) as (client, _rt):
        first = await client.session.call_tool(
            "workspace_write", {"path": "a.txt", "content": "shown"}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        yes = types.ElicitResult(action="accept", content={"approve": True})
        retried = await client.session.call_tool(
            "workspace_write",
            {"path": "a.txt", "content": "swapped"},
            input_responses={"approval": yes},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(retried, types.InputRequiredResult)  # a call of its own: asked anew
    assert retried.request_state != first.request_state
    assert not (tmp_path / "workspaces" / "w" / "a.txt").exists()


class _Created(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(default="task", alias="resultType")
    task_id: str = Field(alias="taskId")


class _Id(types.RequestParams):
    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(alias="taskId")


class _Update(_Id):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class _Get(types.Request[_Id, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _Id


class _Cancel(types.Request[_Id, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _Id


class _Result(types.Request[_Id, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    params: _Id


class _List(types.Request[types.PaginatedRequestParams, Literal["tasks/list"]]):
    method: Literal["tasks/list"] = "tasks/list"
    params: types.PaginatedRequestParams = Field(default_factory=types.PaginatedRequestParams)


class _Listed(types.Result):
    model_config = ConfigDict(extra="allow")
    tasks: list[dict[str, Any]]


class _Answer(types.Request[_Update, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _Update


class _Detailed(types.Result):
    model_config = ConfigDict(extra="allow")
    status: str
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")


class StartOnly(ClientExtension):
    """Declares the tasks extension; a task result comes back as its id (nothing polled)."""

    identifier = TASKS

    def claims(self) -> Sequence[ResultClaim[Any]]:
        async def give_id(created: _Created, _ctx: ClaimContext) -> types.CallToolResult:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=created.task_id)]
            )

        return (ResultClaim(result_type="task", model=_Created, resolve=give_id),)


async def poll(client: Client, task_id: str, until: str) -> _Detailed:
    with anyio.fail_after(30):
        while True:
            got = await client.session.send_request(_Get(params=_Id(taskId=task_id)), _Detailed)
            if got.status == until:
                return got
            await anyio.sleep(0.05)


async def test_a_task_asks_its_client_and_runs_on_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with served(tmp_path, "client", monkeypatch, extensions=[StartOnly()]) as (c, _rt):
        started = await c.call_tool("workspace_write", {"path": "t.txt", "content": "later"})
        task_id = started.content[0].text  # type: ignore[union-attr]
        waiting = await poll(c, task_id, "input_required")
        assert waiting.input_requests is not None
        question = waiting.input_requests["approval"]["params"]["message"]
        assert '"content":"later"' in question
        yes = {"action": "accept", "content": {"approve": True}}
        answer = _Update(taskId=task_id, inputResponses={"approval": yes})
        await c.session.send_request(_Answer(params=answer), types.Result)
        done = await poll(c, task_id, "completed")
    assert done.status == "completed"
    assert (tmp_path / "workspaces" / "w" / "t.txt").read_text() == "later"


async def test_a_listening_client_gets_board_updates_and_nothing_it_may_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    board, audit = "toolcards://team/t/planning", "toolcards://audit/tail"
    async with (
        served(tmp_path, "approver", monkeypatch) as (client, _rt),
        client.listen(resource_subscriptions=[board, audit]) as sub,
    ):
        assert sub.honored.resource_subscriptions == [board]
        await client.call_tool("update_planning", {"create": [{"description": "ship it"}]})
        with anyio.fail_after(30):
            event = await sub.__anext__()
    assert event.uri == board  # type: ignore[union-attr]


async def test_listens_opened_at_once_are_bounded_per_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller's listens are counted from the check on: 20 opened together are held to
    ``PER_PRINCIPAL`` (they all passed the count while the first still checked its URI)."""
    board = "toolcards://team/t/planning"
    opened: list[object] = []
    refused: list[str] = []
    release = anyio.Event()
    async with served(tmp_path, "approver", monkeypatch) as (client, _rt):

        async def one() -> None:
            try:
                async with client.listen(resource_subscriptions=[board]) as sub:
                    opened.append(sub)
                    await release.wait()
            except MCPError as exc:
                refused.append(exc.error.message)

        async with anyio.create_task_group() as tasks:
            for _ in range(20):
                tasks.start_soon(one)
            with anyio.fail_after(30):
                while len(opened) + len(refused) < 20:
                    await anyio.sleep(0.02)
            release.set()
    assert len(opened) == PER_PRINCIPAL
    assert refused == [f"at most {PER_PRINCIPAL} open listens per caller"] * (20 - PER_PRINCIPAL)


async def test_a_running_task_outlives_its_ttl_and_holds_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "workspaces"))
    loaded = load_config(config(tmp_path, "approver"))
    with SurfaceRuntime.from_config(loaded, durability="sync") as rt:
        server = GovernedMCPServer(rt)
        server.tasks.limits = TaskLimits(per_principal=2)
        async with (
            server.running(),
            Client(server.server, mode=MODERN, extensions=[StartOnly()]) as client,
            Client(server.server, mode="legacy") as legacy,  # tasks/list is 2025-11-25 only
        ):

            async def start(path: str) -> _Created:
                params = types.CallToolRequestParams(
                    name="workspace_write",
                    arguments={"path": path, "content": "x"},
                    task=types.TaskMetadata(ttl=1000),  # the shortest kept: 1 s
                )
                call = types.CallToolRequest(params=params)
                return await client.session.send_request(call, _Created)

            first, second = await start("1.txt"), await start("2.txt")
            await anyio.sleep(max(0.0, expiry(second) - time.time()))
            with pytest.raises(MCPError, match="at most 2 tasks"):
                await start("3.txt")  # both still wait for an approver: they count
            got = await client.session.send_request(
                _Get(params=_Id(taskId=first.task_id)), _Detailed
            )
            assert got.status == "working"
            listed = await legacy.session.send_request(_List(), _Listed)
            assert [t["taskId"] for t in listed.tasks] == [first.task_id, second.task_id]
            cancel = _Cancel(params=_Id(taskId=first.task_id))
            cancelled = await legacy.session.send_request(cancel, types.GetTaskResult)
            assert cancelled.status == "cancelled"
            await start("3.txt")  # the cancelled one, ended past its ttl, left its place


def expiry(created: _Created) -> float:
    """When the task's ttl runs out (a hair after, against the rounding of its timestamp)."""
    extra = created.model_extra or {}
    ttl = float(extra["ttlMs"]) / 1000
    return datetime.fromisoformat(extra["createdAt"]).timestamp() + ttl + 1e-3


async def pending(rt: SurfaceRuntime) -> Any:
    """The one approval request waiting for an approver."""
    with anyio.fail_after(30):
        while not (waiting := rt.executor.approvals.pending()):
            await anyio.sleep(0.02)
    return waiting[0]


def endings(base: Path) -> list[str]:
    """The audited endings of the writes (not their approval rows)."""
    with AuditLog(base / "audit.db") as log:
        found = [e.outcome for e in log.query() if e.tool == "workspace_write"]
    return [o for o in found if o not in ("needs_approval", "approval_granted")]


async def test_a_task_cancelled_through_another_server_ends_as_its_call_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server running a call hears of a cancel made through another server of the team
    within a second (not at its next lease renewal): granted just after the cancel, the
    write never runs, and the cancel's answer, the task's result and the audit all say so."""
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "workspaces"))
    loaded = load_config(config(tmp_path, "approver"))
    with SurfaceRuntime.from_config(loaded, durability="sync") as rt:

        def server() -> GovernedMCPServer:
            options = MCPOptions.of(rt)
            options.tasks = SqliteTasks(tmp_path / "tasks.db", "t")
            rt.own(options.tasks.close)
            return GovernedMCPServer(rt, options=options)

        a, b = server(), server()
        async with (
            a.running(),
            b.running(),
            Client(a.server, mode=MODERN, extensions=[StartOnly()]) as client,
            Client(b.server, mode="legacy") as elsewhere,
        ):
            started = await client.call_tool("workspace_write", {"path": "c.txt", "content": "x"})
            task_id = started.content[0].text  # type: ignore[union-attr]
            request = await pending(rt)
            cancel = _Cancel(params=_Id(taskId=task_id))
            cancelled = await elsewhere.session.send_request(cancel, types.GetTaskResult)
            with contextlib.suppress(ApprovalError):  # withdrawn once the call stopped
                rt.executor.approvals.grant(request, approver=APPROVER, surface="test")
            result = await elsewhere.session.send_request(
                _Result(params=_Id(taskId=task_id)), types.CallToolResult
            )
            with anyio.fail_after(30):
                while not endings(tmp_path):
                    await anyio.sleep(0.05)
    assert cancelled.status == "cancelled"
    assert result.is_error and "cancelled" in result.content[0].text  # type: ignore[union-attr]
    assert endings(tmp_path) == ["cancelled"]
    assert not (tmp_path / "workspaces" / "w" / "c.txt").exists()


async def test_a_cancel_landing_as_the_call_ends_leaves_the_calls_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel that comes once the call is audited (its MCP result being made, the task not
    yet ended) stops nothing: the task completes with the write's result, as audited, and
    the cancel is answered the task as it ended."""
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "workspaces"))
    loaded = load_config(config(tmp_path, "approver"))
    with SurfaceRuntime.from_config(loaded, durability="sync") as rt:
        server = GovernedMCPServer(rt)
        store, made = server.tasks.store, server._result
        started: list[str] = []
        answered: list[types.GetTaskResult] = []
        async with (
            server.running(),
            Client(server.server, mode=MODERN, extensions=[StartOnly()]) as client,
            Client(server.server, mode="legacy") as legacy,
            anyio.create_task_group() as tasks,
        ):

            async def cancel() -> None:
                cancel = _Cancel(params=_Id(taskId=started[0]))
                answered.append(await legacy.session.send_request(cancel, types.GetTaskResult))

            async def cancelled_now(*args: Any, **kwargs: Any) -> Any:
                tasks.start_soon(cancel)
                with anyio.fail_after(30):
                    while (row := store.get(started[0], CALLER.id)) is not None and not (
                        row.answer is not None or row.terminal  # the cancel is in
                    ):
                        await anyio.sleep(0.02)
                return await made(*args, **kwargs)

            monkeypatch.setattr(server, "_result", cancelled_now)
            begun = await client.call_tool("workspace_write", {"path": "e.txt", "content": "y"})
            started.append(begun.content[0].text)  # type: ignore[union-attr]
            rt.executor.approvals.grant(await pending(rt), approver=APPROVER, surface="test")
            result = await legacy.session.send_request(
                _Result(params=_Id(taskId=started[0])), types.CallToolResult
            )
    assert [a.status for a in answered] == ["completed"]
    assert not result.is_error
    assert endings(tmp_path) == ["ok"]
    assert (tmp_path / "workspaces" / "w" / "e.txt").read_text() == "y"


async def test_a_result_with_a_name_that_is_not_utf8_ends_its_task_and_no_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grep hit in a file whose name is not UTF-8 (a lone surrogate once decoded) is kept as
    the text of its escape: the task completes with it, and the server (whose task group runs
    every task) keeps answering."""
    folder = os.fsencode(config(tmp_path, "approver").parent / "workspaces" / "w")
    with open(os.path.join(folder, b"bad\xff.txt"), "wb") as f:
        f.write(b"needle\n")
    async with served(tmp_path, "approver", monkeypatch, extensions=[StartOnly()]) as (c, _rt):
        started = await c.call_tool("workspace_grep", {"pattern": "needle"})
        done = await poll(c, started.content[0].text, "completed")  # type: ignore[union-attr]
        later = await c.call_tool("workspace_list", {"path": "."})
    shown = (done.model_extra or {})["result"]["content"][0]["text"]
    assert shown == "bad\\udcff.txt:1:needle"
    assert not later.is_error


@contextlib.contextmanager
def broken_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GovernedMCPServer]:
    """A server whose task calls raise ``RuntimeError("secret argument")``."""
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "workspaces"))
    with SurfaceRuntime.from_config(load_config(config(tmp_path, "approver"))) as rt:
        server = GovernedMCPServer(rt)

        async def broken(*_args: Any) -> Any:
            raise RuntimeError("secret argument")

        server.tasks.run_call = broken
        yield server


async def test_a_task_whose_call_raises_fails_and_the_server_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with broken_calls(tmp_path, monkeypatch) as server:
        async with (
            server.running(),
            Client(server.server, mode=MODERN, extensions=[StartOnly()]) as client,
        ):
            started = await client.call_tool("workspace_grep", {"pattern": "x"})
            task_id = started.content[0].text  # type: ignore[union-attr]
            done = await poll(client, task_id, "completed")  # an error result, at 2026-07-28
            later = await client.call_tool("workspace_list", {"path": "."})
            row = server.tasks.store.get(task_id, CALLER.id)
    assert row is not None and row.status == "failed"
    assert row.status_message == "error: the task failed (RuntimeError)"
    assert (done.model_extra or {})["result"]["isError"]
    assert not later.is_error


class Overhearing:
    """Another connection, at ``debug``: what the server sends it."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    async def send_notification(self, note: Any, related_request_id: Any = None) -> None:
        self.heard.append(str(note.params.data))


async def test_a_failed_tasks_log_line_reaches_no_other_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure line carries the call's error text: it is logged in the task's own log
    context (on 2026-07-28, sent to nobody), not to every connection that set a level."""
    with broken_calls(tmp_path, monkeypatch) as server:
        other = Overhearing()
        server.logs.set_level(other, "debug")
        async with (
            server.running(),
            Client(server.server, mode=MODERN, extensions=[StartOnly()]) as client,
        ):
            started = await client.call_tool("workspace_grep", {"pattern": "x"})
            await poll(client, started.content[0].text, "completed")  # type: ignore[union-attr]
            logging.getLogger("toolcards.tests").warning("the server's own line")
            with anyio.fail_after(30):  # sent in order: the failure line would be before it
                while "the server's own line" not in other.heard:
                    await anyio.sleep(0.01)
    assert not [line for line in other.heard if "secret argument" in line], other.heard


async def test_waits_for_a_task_are_bounded_by_the_callers_calls_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2025-11-25 ``tasks/result`` requests wait on in the session however soon their POSTs
    close: they count in their caller's requests in flight, one past the bound is refused."""
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "workspaces"))
    loaded = load_config(config(tmp_path, "approver"))
    with SurfaceRuntime.from_config(loaded, durability="sync") as rt:
        in_flight = InFlight(2)
        server = GovernedMCPServer(rt, in_flight=in_flight)
        answered: list[types.CallToolResult] = []
        async with (
            server.running(),
            Client(server.server, mode=MODERN, extensions=[StartOnly()]) as client,
            Client(server.server, mode="legacy") as legacy,  # tasks/result is 2025-11-25 only
            anyio.create_task_group() as tasks,
        ):
            started = await client.call_tool("workspace_write", {"path": "r.txt", "content": "x"})
            wait = _Result(params=_Id(taskId=started.content[0].text))  # type: ignore[union-attr]

            async def result() -> None:
                answered.append(await legacy.session.send_request(wait, types.CallToolResult))

            for _ in range(2):
                tasks.start_soon(result)
            with anyio.fail_after(30):
                while in_flight.counts[caller_of(CALLER)] < 2:
                    await anyio.sleep(0.02)
            with pytest.raises(MCPError, match=r"too many requests in flight for agent.runner"):
                await legacy.session.send_request(wait, types.CallToolResult)
            rt.executor.approvals.grant(await pending(rt), approver=APPROVER, surface="test")
        assert in_flight.counts[caller_of(CALLER)] == 0
    assert [r.is_error for r in answered] == [False, False]
