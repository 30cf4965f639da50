"""MCPTool on a server whose tools declare an output schema with a backtracking ``pattern``:
the client does not check results against the server's own schema (the MCP session ran it
with ``jsonschema`` and Python's ``re`` on the event loop, 2^n steps for a string of n
characters), so a result comes back whole, a task's too, whatever its length; a tool whose
output schema is longer than the client makes a type of at each call is not offered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from support.launch import PYTHON
from toolcards import MCPTool

pytestmark = [pytest.mark.timeout(120)]

SERVER = Path(__file__).parent / "servers" / "pattern_server.py"


@pytest.mark.parametrize("name", ["lookup", "task_lookup"])
def test_a_servers_output_schema_pattern_is_never_run_on_its_results(name: str) -> None:
    pytest.importorskip("fastmcp_tasks")
    card = MCPTool(name="patterns", transport="stdio", command=PYTHON, args=[str(SERVER)],
                   timeout_seconds=60, connect_timeout_seconds=60)  # fmt: skip
    toolset = card.get_toolsets()[0]
    ctx: Any = RunContext(deps=None, model=TestModel(), usage=RunUsage())

    async def run() -> None:
        async with toolset:
            tools = await toolset.get_tools(ctx)
            assert tools[name].tool_def.return_schema is not None  # declared, and listed
            # a type is made of the schema at each call: one of 400,000 characters is refused
            assert "vast" not in tools
            # 12 characters: the pattern, had it run, refuses the result; 40: about 11 hours
            for size in (12, 40):
                result = await toolset.call_tool(name, {"size": size}, ctx, tools[name])
                assert result == {"code": "a" * size + "!"}, size

    anyio.run(run)
