"""Surfaces: tools/call round trips through a real `toolcards serve` over stdio and streamable
HTTP (official mcp client), beside a minimal official-SDK server (``MCPServer``) serving the
same trivial tool in the same run (goal: toolcards p50 <= 1.2x the peer's); 32 concurrent
HTTP clients (throughput and p95); and the `toolcards` command's start-up beside
``python -c pass`` (``--help``; ``list`` alone and beside a running server).

Run: .venv/bin/python benchmarks/bench_surfaces.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import yaml
from _results import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from support.processes import free_port, serving
from toolcards.surfaces.config import hash_token

TOOLCARDS = Path(sys.executable).parent / "toolcards"
TOOLS_MODULE = '''
def lookup(key: str, limit: int = 10) -> dict:
    """Look a key up."""
    return {"key": key, "limit": limit}

TOOLS = [lookup]
'''
PEER_SERVER = '''
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("peer", log_level="WARNING")

@server.tool()
def lookup(key: str, limit: int = 10) -> dict:
    """Look a key up."""
    return {"key": key, "limit": limit}

if sys.argv[1] == "stdio":
    server.run("stdio")
else:
    import uvicorn
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]),
                log_level="warning")
'''
POLICY = {"default_effect": "deny", "rules": [{"targets": ["lookup"], "effect": "allow"}]}
TOKEN = "bench-token"
CLIENTS = 32
GOAL_RATIO = 1.2


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(n: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    for _ in range(min(20, n)):  # warm up
        await call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


def setup(base: Path) -> tuple[Path, dict[str, str]]:
    (base / "bench_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    (base / "peer_server.py").write_text(PEER_SERVER, encoding="utf-8")
    (base / "policy.yaml").write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    config = {
        "store": "team.db",
        "cards": [{"type": "PlanningTool", "vector_store": False}],
        "policy": "policy.yaml",
        "tools": ["bench_tools:TOOLS"],
        "audit": "audit.db",
        # every client connects from 127.0.0.1, each session with a few connections: more
        # than the default bound of 64 connections an address
        "http": {"per_client": 4 * CLIENTS},
        "principals": {
            "local": {"id": "bench"},
            "tokens": [{"token_sha256": hash_token(TOKEN), "id": "bench"}],
        },
    }
    path = base / "toolcards.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(base)}
    return path, env


@contextlib.contextmanager
def http_server(argv: list[str], env: dict[str, str], port: int) -> Iterator[str]:
    with serving(argv, port, env):
        yield f"http://127.0.0.1:{port}/mcp"


@contextlib.asynccontextmanager
async def http_client(url: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        yield s


async def bench_stdio(command: list[str], env: dict[str, str], n: int) -> list[float]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        return await timed(n, lambda: s.call_tool("lookup", {"key": "k"}))


async def bench_http(url: str, n: int) -> list[float]:
    async with http_client(url) as s:
        return await timed(n, lambda: s.call_tool("lookup", {"key": "k"}))


async def bench_concurrent(url: str, per_client: int) -> tuple[float, list[float]]:
    """(calls per second, latencies) of CLIENTS sessions calling at once."""
    samples: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(http_client(url)) for _ in range(CLIENTS)]

        async def one(s: ClientSession) -> None:
            for _ in range(per_client):
                start = time.perf_counter()
                await s.call_tool("lookup", {"key": "k"})
                samples.append((time.perf_counter() - start) * 1e6)

        start = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for s in sessions:
                tasks.start_soon(one, s)
        elapsed = time.perf_counter() - start
    return len(samples) / elapsed, samples


def wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall seconds of a whole process (after one warm-up run)."""
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def report_call(name: str, ours: list[float], peer: list[float]) -> None:
    p50, peer_p50 = statistics.median(ours), statistics.median(peer)
    print(
        f"  {name:20s} toolcards p50 {p50:8.1f} us  p95 {percentile(ours, 0.95):8.1f} us | "
        f"official SDK p50 {peer_p50:8.1f} us  -> {p50 / peer_p50:.2f}x (goal <= {GOAL_RATIO}x)"
    )
    record(f"tools/call {name}, p50", p50, "us", peer="mcp MCPServer", peer_value=peer_p50,
           goal=f"<= {GOAL_RATIO}x peer")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer calls (< 90 s)")
    args = parser.parse_args()
    n = 200 if args.quick else 1000
    per_client = 10 if args.quick else 40
    runs = 5 if args.quick else 11
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        config, env = setup(base)
        ours_cmd = [str(TOOLCARDS), "serve", "--config", str(config)]
        peer_cmd = [sys.executable, str(base / "peer_server.py"), "stdio"]
        stdio = anyio.run(bench_stdio, ours_cmd, env, n)
        stdio_peer = anyio.run(bench_stdio, peer_cmd, env, n)
        port, peer_port = free_port(), free_port()
        http_cmd = [*ours_cmd, "--transport", "http", "--port", str(port)]
        peer_http_cmd = [sys.executable, str(base / "peer_server.py"), "http", str(peer_port)]
        with http_server(peer_http_cmd, env, peer_port) as peer_url:
            http_peer = anyio.run(bench_http, peer_url, n)
            peer_rate, peer_conc = anyio.run(bench_concurrent, peer_url, per_client)
        with http_server(http_cmd, env, port) as url:
            http = anyio.run(bench_http, url, n)
            rate, conc = anyio.run(bench_concurrent, url, per_client)
            forwarded_list = wall([str(TOOLCARDS), "--config", str(config), "list"], env, runs)
        python = wall([sys.executable, "-c", "pass"], env, runs)
        help_time = wall([str(TOOLCARDS), "--help"], env, runs)
        alone_list = wall([str(TOOLCARDS), "--config", str(config), "list"], env, runs)

    print(f"tools/call round trip, {n} calls per transport, same trivial tool")
    report_call("MCP stdio", stdio, stdio_peer)
    report_call("MCP streamable HTTP", http, http_peer)
    p95, peer_p95 = percentile(conc, 0.95), percentile(peer_conc, 0.95)
    print(f"{CLIENTS} concurrent HTTP clients x {per_client} calls")
    print(f"  toolcards     {rate:8.0f} calls/s  p95 {p95 / 1000:7.1f} ms")
    print(f"  official SDK  {peer_rate:8.0f} calls/s  p95 {peer_p95 / 1000:7.1f} ms")
    record(f"{CLIENTS} HTTP clients, throughput", rate, "calls/s",
           peer="mcp MCPServer", peer_value=peer_rate)  # fmt: skip
    record(f"{CLIENTS} HTTP clients, p95", p95 / 1000, "ms",
           peer="mcp MCPServer", peer_value=peer_p95 / 1000)  # fmt: skip
    print(f"start-up, whole process, median of {runs}")
    print(f"  python -c pass                    {python * 1000:7.0f} ms")
    print(f"  toolcards --help                  {help_time * 1000:7.0f} ms  (goal < 150 ms)")
    print(f"  toolcards list, server running    {forwarded_list * 1000:7.0f} ms  (goal < 500 ms)")
    print(f"  toolcards list, no server         {alone_list * 1000:7.0f} ms")
    record("toolcards --help", help_time * 1000, "ms", peer="python -c pass",
           peer_value=python * 1000, goal="< 150 ms")  # fmt: skip
    record("toolcards list (server running)", forwarded_list * 1000, "ms",
           peer="python -c pass", peer_value=python * 1000, goal="< 500 ms")  # fmt: skip
    record("toolcards list (no server)", alone_list * 1000, "ms",
           peer="python -c pass", peer_value=python * 1000)  # fmt: skip


if __name__ == "__main__":
    main()
