"""A FastMCP server whose tools run as tasks (the ``fastmcp-tasks`` extension, SEP-2663, an
in-memory Docket): ``python task_server.py stdio``.

``crunch(seconds, tag)`` reports progress each 0.1 s until its client has seen it (the client
leaves ``$TASK_MARKS/<tag>.seen``) or ``seconds`` pass, and answers ``crunched <tag>``;
``hold(tag)`` reports progress until its client has seen it, runs until it is cancelled, and
then leaves ``$TASK_MARKS/<tag>.cancelled``;
``quick(text)`` is an ordinary tool (no task).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension

server = FastMCP("tasks")
server.add_extension(TasksExtension(url="memory://"))


def _mark(name: str) -> None:
    marks = os.environ.get("TASK_MARKS")
    if marks:
        Path(marks, name).touch()


@server.tool(task=True)
async def crunch(seconds: float, tag: str, ctx: Context) -> str:
    """Work, reporting progress, until the client saw it or ``seconds`` pass."""
    _mark(f"{tag}.started")
    steps = max(1, int(seconds / 0.1))
    marks = os.environ.get("TASK_MARKS")
    for step in range(steps):
        if marks and Path(marks, f"{tag}.seen").exists():
            break
        await ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
        await asyncio.sleep(0.1)
    return f"crunched {tag}"


@server.tool(task=True)
async def hold(tag: str, ctx: Context) -> str:
    """Run until cancelled, reporting progress until the client saw it."""
    _mark(f"{tag}.started")
    marks = os.environ.get("TASK_MARKS")
    try:
        while marks and not Path(marks, f"{tag}.seen").exists():
            await ctx.report_progress(0, None, "holding")
            await asyncio.sleep(0.1)
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        _mark(f"{tag}.cancelled")
        raise
    return "released"


@server.tool()
def quick(text: str) -> str:
    """Answer at once."""
    return f"quick {text}"


if __name__ == "__main__":
    server.run(transport=sys.argv[1] if len(sys.argv) > 1 else "stdio", show_banner=False)
