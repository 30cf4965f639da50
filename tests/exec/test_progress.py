"""A long command tells a listening caller how long it has been running (MCP progress)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.exec.support import RUNNABLE

from toolcards.core.progress import progress_reporter
from toolcards.tools.exec.card import ExecTool


def _exec_command(card: ExecTool) -> Any:
    return {fn.__name__: fn for fn in card.get_tools()}["exec_command"]


def test_a_running_command_reports_elapsed_seconds() -> None:
    run = _exec_command(ExecTool(mode="local", limits=RUNNABLE, allowed_commands=["sleep"]))
    heard: list[tuple[float, float | None, str | None]] = []

    async def main() -> str:
        with progress_reporter(lambda *update: heard.append(update)):
            return str(await run("sleep 2.5"))

    out = asyncio.run(main())
    assert out.startswith("exit_code: 0"), out
    assert len(heard) >= 2
    assert [round(p) for p, _, _ in heard[:2]] == [1, 2]
    assert heard[0][2] is not None and heard[0][2].startswith("running for")


def test_no_listener_no_reports_and_the_same_result() -> None:
    run = _exec_command(ExecTool(mode="local", limits=RUNNABLE))
    out = asyncio.run(run("echo hi"))
    assert "hi" in str(out)
