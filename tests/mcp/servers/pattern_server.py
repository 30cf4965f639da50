"""A FastMCP server whose tools declare an output schema with a backtracking ``pattern``
(``^(a+)+$``: Python's ``re`` takes 2^n steps to refuse ``n`` times ``a`` and then ``!``) and
return ``{"code": "a" * size + "!"}``, which does not match it: ``lookup`` at once, and
``task_lookup`` as a task (``fastmcp-tasks``, an in-memory Docket); ``vast`` declares an output
schema of some 400,000 characters. ``python pattern_server.py`` serves on stdio.
"""

from __future__ import annotations

from typing import Any

from fastmcp import FastMCP
from fastmcp.tools import ToolResult
from fastmcp_tasks import TasksExtension

server = FastMCP("patterns")
server.add_extension(TasksExtension(url="memory://"))

OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}},
    "required": ["code"],
}


@server.tool(output_schema=OUTPUT)
def lookup(size: int) -> ToolResult:
    """A code that its own schema refuses."""
    return ToolResult(structured_content={"code": "a" * size + "!"})


@server.tool(output_schema=OUTPUT, task=True)
async def task_lookup(size: int) -> ToolResult:
    """The same, as a task."""
    return ToolResult(structured_content={"code": "a" * size + "!"})


def _nested(levels: int) -> dict[str, Any]:
    """An output schema of ``levels`` nested ``anyOf`` (each level doubles its length)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"anyOf": [{"type": "object", "properties": {"a": schema}}, {"items": schema}]}
    return {"type": "object", "properties": {"x": schema}}


@server.tool(output_schema=_nested(12))
def vast(size: int) -> ToolResult:
    """A result under an output schema of some 400,000 characters."""
    return ToolResult(structured_content={"x": "a" * size})


if __name__ == "__main__":
    server.run(transport="stdio", show_banner=False)
