"""A FastMCP server whose tools declare output schemas their results do not match: ``lookup``
and ``task_lookup`` (as a task: ``fastmcp-tasks``, an in-memory Docket) a backtracking
``pattern`` (``^(a+)+$``: Python's ``re`` takes 2^n steps to refuse ``n`` times ``a`` and then
``!``) and return ``{"code": "a" * size + "!"}``; ``unions`` :data:`UNIONS` nested two-way
unions by ``$ref`` (some 4,000 characters; a type made of it, or a value checked against it,
takes 2^18 steps) and a value holding a text where the innermost one wants an integer;
``vast`` an output schema of some 400,000 characters. ``python pattern_server.py`` serves on
stdio, ``python pattern_server.py MODE PORT`` over HTTP on 127.0.0.1 (``streamable-http`` or
``sse``; ``FASTMCP_JSON_RESPONSE=true``: JSON bodies, not event streams).
"""

from __future__ import annotations

import sys
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
UNIONS = 18
"""Levels of ``unions``'s output schema and of its result."""


@server.tool(output_schema=OUTPUT)
def lookup(size: int) -> ToolResult:
    """A code that its own schema refuses."""
    return ToolResult(structured_content={"code": "a" * size + "!"})


@server.tool(output_schema=OUTPUT, task=True)
async def task_lookup(size: int) -> ToolResult:
    """The same, as a task."""
    return ToolResult(structured_content={"code": "a" * size + "!"})


def _unions(levels: int) -> dict[str, Any]:
    """An output schema of ``levels`` definitions, each a union of two objects sharing the
    field ``x`` that holds the next one (the last: an integer)."""
    defs: dict[str, Any] = {}
    for level in range(levels):
        inner = {"$ref": f"#/$defs/L{level + 1}"} if level + 1 < levels else {"type": "integer"}
        one = {"type": "object", "properties": {"x": inner}, "required": ["x"]}
        two = {"type": "object", "properties": {"x": inner, "y": {"type": "string"}}}
        defs[f"L{level}"] = {"anyOf": [one, {**two, "required": ["x"]}]}
    return {
        "type": "object",
        "properties": {"r": {"$ref": "#/$defs/L0"}},
        "required": ["r"],
        "$defs": defs,
    }


@server.tool(output_schema=_unions(UNIONS))
def unions() -> ToolResult:
    """``{"r": {"x": {"x": ... "oops"}}}``: a text where its schema wants an integer."""
    value: Any = "oops"
    for _ in range(UNIONS):
        value = {"x": value}
    return ToolResult(structured_content={"r": value})


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
    if len(sys.argv) < 2 or sys.argv[1] == "stdio":
        server.run(transport="stdio", show_banner=False)
    else:
        mode, port = sys.argv[1], int(sys.argv[2])
        server.run(transport=mode, host="127.0.0.1", port=port, show_banner=False)
