"""Cancelling a call kills its command: asyncio tasks, the governed toolset, the sync API."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from tests.exec.support import BWRAP_REASON, RUNNABLE, assert_none_left, processes_with

from toolcards.core.factory import ToolFactory
from toolcards.governance import GovernedToolset, Identity, Policy
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.service import ExecService, ExecSettings
from toolcards.tools.exec.watch import Cancel

MODES = [
    pytest.param("local"),
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP_REASON is not None, reason=f"{BWRAP_REASON}")
    ),
]


async def _until_running(marker: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not processes_with(marker):
        assert time.monotonic() < deadline, "the command never started"
        await asyncio.sleep(0.02)


def _sleeper(marker: str) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            args = {"command": f"sleep {marker}"}
            return ModelResponse(parts=[ToolCallPart("exec_command", args, tool_call_id="c")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_cancelling_the_agent_run_kills_the_command(mode: str, marker: str) -> None:
    """The governed toolset awaits exec_command in a task; cancelling it kills the sleep."""
    card = ExecTool(mode=mode, limits=RUNNABLE, timeout_s=50, allowed_commands=["sleep"])
    governed = GovernedToolset(
        ToolFactory([card]).toolset(), policy=Policy.allow_all(), identity=Identity(id="alice")
    )
    agent = Agent(_sleeper(marker), toolsets=[governed])

    async def scenario() -> None:
        task = asyncio.create_task(agent.run("go"))
        await _until_running(marker)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert_none_left(marker, wait_s=2.0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_cancelling_a_task_awaiting_the_tool_kills_the_command(mode: str, marker: str) -> None:
    tool = ExecTool(
        mode=mode, limits=RUNNABLE, timeout_s=50, allowed_commands=["sleep"]
    ).get_tools()[0]

    async def scenario() -> None:
        task = asyncio.create_task(tool(f"sleep {marker}"))
        await _until_running(marker)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert processes_with(marker) == []  # gone by the time the cancellation lands

    asyncio.run(scenario())


@pytest.mark.timeout(60)
def test_cancel_from_another_thread_stops_a_sync_run(tmp_path: Path, marker: str) -> None:
    service = ExecService(ExecSettings(mode="local", limits=RUNNABLE, timeout_s=50))
    cancel = Cancel()

    def cancel_when_running() -> None:
        deadline = time.monotonic() + 20
        while not processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        cancel.set()

    threading.Thread(target=cancel_when_running, daemon=True).start()
    try:
        result = service.run(f"sleep {marker}", tmp_path, cancel=cancel)
    finally:
        service.close()
        cancel.close()
    assert result.killed == "cancelled" and result.exit_code is None
    assert_none_left(marker)


def test_a_cancelled_call_does_not_start(tmp_path: Path) -> None:
    service = ExecService(ExecSettings(mode="local", limits=RUNNABLE))
    cancel = Cancel()
    cancel.set()
    try:
        result = service.run("touch never", tmp_path, cancel=cancel)
    finally:
        service.close()
        cancel.close()
    assert result.killed == "cancelled"
    assert not (tmp_path / "never").exists()


@pytest.mark.timeout(60)
def test_a_governance_timeout_kills_the_command(marker: str) -> None:
    """The executor's deadline cancels the tool coroutine; the command does not live on."""
    card = ExecTool(mode="local", limits=RUNNABLE, timeout_s=50, allowed_commands=["sleep"])
    governed = GovernedToolset.with_policy(
        ToolFactory([card]).toolset(),
        policy=Policy.allow_all(),
        identity=Identity(id="alice"),
        timeout=1.0,
    )
    seen: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            args = {"command": f"sleep {marker}"}
            return ModelResponse(parts=[ToolCallPart("exec_command", args, tool_call_id="c")])
        seen.append(str(messages[-1].parts[0]))
        return ModelResponse(parts=[TextPart("done")])

    Agent(FunctionModel(respond), toolsets=[governed]).run_sync("go")
    assert "timed out" in seen[0]
    assert_none_left(marker, wait_s=2.0)
