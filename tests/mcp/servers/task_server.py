"""A FastMCP server whose tools run as tasks (the ``fastmcp-tasks`` extension, SEP-2663, an
in-memory Docket): ``python task_server.py stdio``.

``crunch(seconds, tag)`` reports progress each 0.2 s and answers ``crunched <tag>``;
``hold(tag)`` runs until it is cancelled, and then leaves ``$TASK_MARKS/<tag>.cancelled``;
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
    """Work for ``seconds``, reporting progress."""
    _mark(f"{tag}.started")
    steps = max(1, int(seconds / 0.2))
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
        await asyncio.sleep(0.2)
    return f"crunched {tag}"


@server.tool(task=True)
async def hold(tag: str) -> str:
    """Run until cancelled."""
    _mark(f"{tag}.started")
    try:
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
