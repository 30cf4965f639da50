"""The audit invariant on every surface: a governed call that started has exactly one audit
row, whichever way it ends (ok, error, denied, timeout, cancelled, approved and run, stopped
by a budget: invariant 5), and no other call's row carries its call id; an approval decision
carries the id of the call it decided. The executor API and pydantic-ai in process; MCP over
stdio and HTTP (official SDK client), MCP tasks (2026-07-28, every call a task, cancelled by
``tasks/cancel``) and the CLI as real processes. A surface's run makes every call once (module
fixture); each test checks one ending on one surface."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from surfaces.ending_tools import TOOLS, released
from surfaces.endings_support import (
    CALLER,
    DECISIONS,
    Endings,
    endings_config,
    grant_when_pending,
    wait_running,
)
from surfaces.mcp_clients import http_session
from surfaces.surface_support import TOOLCARDS, HttpServer, token_for
from toolcards.core.toolset import build_function_toolset
from toolcards.governance import (
    ApprovalBroker,
    AuditLog,
    CapabilityRegistry,
    Executor,
    GovernedToolset,
    Policy,
    SqliteApprovalStore,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # real servers and CLI processes

CALLS: dict[str, tuple[str, dict[str, str]]] = {
    "ok": ("finish", {"how": "ok", "tag": "ok"}),
    "error": ("finish", {"how": "error", "tag": "error"}),
    "denied": ("finish", {"how": "ok", "tag": "denied"}),
    "timeout": ("finish", {"how": "timeout", "tag": "timeout"}),
    "cancelled": ("hold", {"tag": "cancelled"}),
    "approved": ("finish_approved", {"how": "ok", "tag": "approved"}),
    "over_budget": ("finish_budgeted", {"how": "ok", "tag": "over_budget"}),
}
OUTCOME = {"approved": "ok"}  # the audit outcome of each ending (default: its name)
SURFACES = ["python", "pydantic-ai", "mcp-stdio", "mcp-http", "mcp-tasks", "cli"]
NOT_ON = {"cli": {"approved"}}  # the terminal prompt is for a human at the terminal
TIMEOUT = 5.0  # a cancelled call is cancelled within it, even on a loaded machine

Call = Callable[[str, dict[str, str]], Awaitable[Any]]


async def drive(endings: Endings, call: Call, skip: set[str]) -> None:
    """Every ending once, one after the other: a cancelled call is cancelled once its tool
    runs; an approved one is granted out of band by the approver while it waits; a timed-out
    one's tool is released once the call's row is written (no process waits for its thread)."""
    for ending, (tool, args) in CALLS.items():
        if ending in skip:
            continue
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, tool, args)
                if ending == "cancelled":
                    await wait_running(endings.marks, args["tag"])
                    tasks.cancel_scope.cancel()
                elif ending == "approved":
                    await grant_when_pending(endings, args["tag"])
                elif ending == "timeout":
                    await release_when_written(endings, args["tag"])


async def release_when_written(endings: Endings, tag: str) -> None:
    """Release the timed-out tool of ``tag`` once its call's row is in the trail."""
    rows = await anyio.to_thread.run_sync(endings.settled_rows, tag)
    assert rows, f"no row of the {tag} call"
    released(endings.marks, tag).touch()


def in_process_executor(endings: Endings, audit: AuditLog) -> tuple[Executor, Any]:
    """An executor on the config's policy, audit trail and approvals file, and an approver
    that waits for an out-of-band decision."""
    broker = ApprovalBroker(store=SqliteApprovalStore(endings.base / "approvals.db"))
    policy = Policy.from_yaml(endings.base / "policy.yaml")
    registry = CapabilityRegistry.from_tools(TOOLS)
    executor = Executor(registry, policy, audit=audit, approvals=broker, timeout=TIMEOUT)
    return executor, broker.waiter(60)


def run_python(endings: Endings) -> None:
    with AuditLog(endings.audit) as audit:
        executor, approver = in_process_executor(endings, audit)

        async def call(tool: str, args: dict[str, str]) -> Any:
            return await executor.call(tool, args, CALLER, surface="python", approver=approver)

        anyio.run(drive, endings, call, set())


def one_call(tool: str, args: dict[str, str]) -> FunctionModel:
    """A model that calls ``tool`` once (call id from its tag), then answers."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            part = ToolCallPart(tool, dict(args), tool_call_id=f"pai-{args['tag']}")
            return ModelResponse(parts=[part])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def run_pydantic_ai(endings: Endings) -> None:
    with AuditLog(endings.audit) as audit:
        executor, approver = in_process_executor(endings, audit)
        governed = GovernedToolset(
            build_function_toolset(TOOLS),
            identity=CALLER,
            executor=executor,
            approver=approver,
        )

        async def call(tool: str, args: dict[str, str]) -> Any:
            return await Agent(one_call(tool, args), toolsets=[governed]).run("go")

        anyio.run(drive, endings, call, set())


def run_mcp_stdio(endings: Endings) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    serve = ["serve", "--config", str(endings.config)]
    params = StdioServerParameters(command=str(TOOLCARDS), args=serve, env=endings.env)

    async def run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            await drive(endings, s.call_tool, set())

    anyio.run(run)


def run_mcp_http(endings: Endings) -> None:
    server = HttpServer(endings.config, env=endings.env)

    async def run() -> None:
        async with http_session(server.url, token_for(CALLER)) as s:
            await drive(endings, s.call_tool, set())

    try:
        anyio.run(run)
    finally:
        server.stop()


def run_mcp_tasks(endings: Endings) -> None:
    """Every call as a task over HTTP (MCPTool's task driver: a cancelled call cancels its
    task with ``tasks/cancel``)."""
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from surfaces.mcp_clients import http_client
    from toolcards.tools.mcp.tasks import TaskDriver

    server = HttpServer(endings.config, env=endings.env)
    headers = {"Authorization": f"Bearer {token_for(CALLER)}"}

    async def run() -> None:
        async with (
            http_client(headers) as http,
            Client(
                streamable_http_client(server.url, http_client=http),
                mode="2026-07-28",
                extensions=[TaskDriver()],
            ) as client,
        ):
            await drive(endings, client.call_tool, set())

    try:
        anyio.run(run)
    finally:
        server.stop()


AT_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
"""Start the command as from a terminal: SIGINT neither ignored nor blocked, whatever this
worker process inherited or set (an ignored or blocked signal passes on to a child)."""


def run_cli(endings: Endings) -> None:
    """`toolcards call` processes; a cancelled call is the user's Ctrl-C (SIGINT)."""

    async def call(tool: str, args: dict[str, str]) -> None:
        argv = [sys.executable, "-c", AT_A_TERMINAL, str(TOOLCARDS)]
        argv += ["--json", "--config", str(endings.config), "call", tool]
        argv += ["--json", json.dumps(args)]
        proc = await anyio.open_process(argv, env=endings.env, stdout=subprocess.DEVNULL)
        try:
            await proc.wait()
        finally:
            with anyio.CancelScope(shield=True):
                if proc.returncode is None:
                    proc.send_signal(signal.SIGINT)
                    with anyio.fail_after(60):
                        await proc.wait()

    anyio.run(drive, endings, call, NOT_ON["cli"])


RUNS = {
    "python": run_python,
    "pydantic-ai": run_pydantic_ai,
    "mcp-stdio": run_mcp_stdio,
    "mcp-http": run_mcp_http,
    "mcp-tasks": run_mcp_tasks,
    "cli": run_cli,
}


CASES = [(s, e) for s in SURFACES for e in CALLS if e not in NOT_ON.get(s, set())]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Endings]:
    """The run of a surface (every ending once), made when a test first asks for it."""
    done: dict[str, Endings] = {}

    def run(surface: str) -> Endings:
        if surface not in done:
            endings = endings_config(tmp_path_factory.mktemp(surface), timeout=TIMEOUT)
            with pytest.MonkeyPatch.context() as env:
                env.setenv("ENDINGS_DIR", str(endings.marks))
                RUNS[surface](endings)
            done[surface] = endings
        return done[surface]

    return run


@pytest.mark.parametrize(("surface", "ending"), CASES)
def test_a_started_call_has_exactly_one_row_under_its_own_call_id(
    runs: Callable[[str], Endings], surface: str, ending: str
) -> None:
    endings = runs(surface)
    rows = endings.settled_rows(CALLS[ending][1]["tag"])
    assert [r.outcome for r in rows] == [OUTCOME.get(ending, ending)]
    (row,) = rows
    with AuditLog(endings.audit) as log:
        sharing = [e for e in log.query(limit=100_000) if e.call_id == row.call_id]
    assert row.call_id is not None
    if surface == "mcp-tasks":  # the call ran as a task
        assert row.call_id.startswith("mcp-task-")
    assert [e.outcome for e in sharing if e.outcome not in DECISIONS] == [row.outcome]
    decisions = [e.outcome for e in sharing if e.outcome in DECISIONS]
    assert decisions == (["approval_granted"] if ending == "approved" else [])
