"""A large MCP tool result read by ``MCPTool`` (bounded while it is read) beside the MCP SDK's
own stdio client under pydantic-ai's ``MCPToolset`` (read whole, then cut), from the same run.

A real stdio server (``tests/mcp/servers/large_server.py``, the official SDK) answers one call
with a 30 MB text and one with a 15 MB image. Each side runs in a fresh process (after one
small call, so both are connected and warm): the peak of what Python allocated during the call
(``tracemalloc``, on a second call), the growth of the process's peak resident memory and the
CPU time of the first call, and the length of what the model read.

``--quick`` is a smoke run: a 0.3 MB text only (three times the 100,000 characters kept), both
sides in this one process (the second side's RSS growth is not comparable), so it starts two
servers instead of four processes that start four.

Run: .venv/bin/python benchmarks/bench_mcp_results.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from _results import record

HERE = Path(__file__).resolve().parent
SERVER = HERE.parent / "tests" / "mcp" / "servers" / "large_server.py"
SIDES = ("toolcards", "sdk")


def toolset(side: str) -> Any:
    if side == "toolcards":
        from toolcards import ToolFactory
        from toolcards.tools.mcp import MCPTool

        card = MCPTool(
            transport="stdio",
            command=sys.executable,
            args=[str(SERVER)],
            connect_timeout_seconds=60,
        )
        return ToolFactory([card]).toolset()
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    from toolcards.tools.mcp.toolset import bound_result

    class CutAfter(MCPToolset):  # type: ignore[misc]
        """The SDK's client, its result cut (as MCPTool did) once read whole."""

        async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
            return bound_result(await super().call_tool(*args, **kwargs), 100_000)

    transport = StdioTransport(sys.executable, [str(SERVER)], keep_alive=False)
    return CutAfter(Client(transport, timeout=300), tool_error_behavior="error")


def one(side: str, tool: str, size: int) -> dict[str, float]:
    """In this process: one call of ``tool`` on ``side``, measured."""
    import asyncio

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    calls: list[tuple[str, dict[str, Any]]] = []
    seen: list[int] = []

    def model(messages: list[Any], info: Any) -> ModelResponse:
        returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returned:
            seen.append(len(str(returned[0].content)))
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(*calls.pop())])

    agent = Agent(FunctionModel(model), toolsets=[toolset(side)])

    async def main() -> dict[str, float]:
        async with agent:
            calls.append(("items", {"count": 1}))
            await agent.run("warm up")
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            calls.append((tool, {"size": size}))
            cpu = time.process_time()
            await agent.run("go")
            cpu = time.process_time() - cpu
            grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
            calls.append((tool, {"size": size}))  # again, with Python's allocations traced
            tracemalloc.start()
            await agent.run("go")
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return {"peak_mib": peak / 2**20, "rss_mib": grown / 1024, "cpu_s": cpu, "read": seen[-1]}

    return asyncio.run(main())


def measure(side: str, tool: str, size: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--one", side, tool, str(size)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", nargs=3, metavar=("SIDE", "TOOL", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        side, tool, size = args.one
        print(json.dumps(one(side, tool, int(size))))
        return
    cases = [("text", 30_000_000), ("image", 15_000_000)]
    run = measure
    if args.quick:
        cases, run = [("text", 300_000)], one
    print(f"{'result':<16}{'side':<11}{'py peak':>11}{'RSS growth':>12}{'CPU':>9}{'read':>14}")
    for tool, size in cases:
        figures = {side: run(side, tool, size) for side in SIDES}
        label = f"{tool} {size / 1e6:g} MB"
        for side in SIDES:
            f = figures[side]
            print(
                f"{label:<16}{side:<11}{f['peak_mib']:>7.1f} MiB{f['rss_mib']:>8.1f} MiB"
                f"{f['cpu_s']:>7.2f} s{int(f['read']):>14,}"
            )
        ours, sdk = figures["toolcards"], figures["sdk"]
        record(f"{label}: peak Python allocation", ours["peak_mib"], "MiB", peer="MCP SDK client",
               peer_value=sdk["peak_mib"], goal="bounded by what is kept")  # fmt: skip
        record(f"{label}: peak RSS growth", ours["rss_mib"], "MiB", peer="MCP SDK client",
               peer_value=sdk["rss_mib"])  # fmt: skip
        record(f"{label}: CPU of the call", ours["cpu_s"], "s", peer="MCP SDK client",
               peer_value=sdk["cpu_s"])  # fmt: skip


if __name__ == "__main__":
    main()
