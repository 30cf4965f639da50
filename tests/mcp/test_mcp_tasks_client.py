"""MCPTool on a FastMCP server whose tools run as tasks (``fastmcp-tasks``, MCP 2026-07-28):
a task tool runs to its result with its progress reported, a cancelled call cancels the task
on the server, and an ordinary tool of the same server works as before."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from toolcards import MCPTool
from toolcards.core.progress import progress_reporter

pytestmark = [pytest.mark.timeout(120)]

SERVER = Path(__file__).parent / "servers" / "task_server.py"


def card(marks: Path) -> MCPTool:
    return MCPTool(name="tasks", transport="stdio", command=sys.executable,
                   args=[str(SERVER), "stdio"], env={"TASK_MARKS": str(marks)},
                   timeout_seconds=60, connect_timeout_seconds=60)  # fmt: skip


async def until(path: Path) -> None:
    async with asyncio.timeout(60):
        while not path.exists():
            await asyncio.sleep(0.05)


def test_task_tools_run_to_their_end_and_cancel_on_the_server(tmp_path: Path) -> None:
    pytest.importorskip("fastmcp_tasks")
    toolset = card(tmp_path).get_toolsets()[0]
    ctx: Any = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    reports: list[str | None] = []

    def seen(message: str | None, tag: str = "a") -> None:
        reports.append(message)
        (tmp_path / f"{tag}.seen").touch()  # the task ends once its progress reached the client

    async def run() -> tuple[Any, Any]:
        async with toolset:
            tools = await toolset.get_tools(ctx)
            with progress_reporter(lambda _d, _t, message: seen(message)):
                done = await toolset.call_tool("crunch", {"seconds": 50, "tag": "a"}, ctx,
                                               tools["crunch"])  # fmt: skip
            quick = await toolset.call_tool("quick", {"text": "x"}, ctx, tools["quick"])
            with progress_reporter(lambda _d, _t, message: seen(message, "h")):
                held = asyncio.ensure_future(
                    toolset.call_tool("hold", {"tag": "h"}, ctx, tools["hold"])
                )
            # cancelled once its client polls the task (a cancel while the answer that made
            # the task is on its way cancels the request, not the task)
            await until(tmp_path / "h.seen")
            held.cancel()
            with pytest.raises(asyncio.CancelledError):
                await held
            await until(tmp_path / "h.cancelled")
            return done, quick

    done, quick = asyncio.run(run())
    assert done == "crunched a"
    assert quick == "quick x"
    assert any(m and m.startswith("step") for m in reports), reports
