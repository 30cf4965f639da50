"""Surfaces: tools/call round trip through a real `toolcards serve` over stdio and over
streamable HTTP (official mcp client, p50 and p95), with the in-process executor for reference.

Run: .venv/bin/python benchmarks/bench_surfaces.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import yaml
from _results import record
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity, Policy
from toolcards.surfaces.config import hash_token

TOOLCARDS = Path(sys.executable).parent / "toolcards"
TOOLS_MODULE = '''
def lookup(key: str, limit: int = 10) -> dict:
    """Look a key up."""
    return {"key": key, "limit": limit}

TOOLS = [lookup]
'''
POLICY = {"default_effect": "deny", "rules": [{"targets": ["lookup"], "effect": "allow"}]}
TOKEN = "bench-token"


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
    (base / "policy.yaml").write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    config = {
        "store": ":memory:",
        "policy": "policy.yaml",
        "tools": ["bench_tools:TOOLS"],
        "audit": "audit.db",
        "principals": {
            "local": {"id": "bench"},
            "tokens": [{"token_sha256": hash_token(TOKEN), "id": "bench"}],
        },
    }
    path = base / "toolcards.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(base)}
    return path, env


async def bench_stdio(config: Path, env: dict[str, str], n: int) -> list[float]:
    params = StdioServerParameters(
        command=str(TOOLCARDS), args=["serve", "--config", str(config)], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        return await timed(n, lambda: s.call_tool("lookup", {"key": "k"}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def bench_http(config: Path, env: dict[str, str], n: int) -> list[float]:
    port = free_port()
    proc = subprocess.Popen(
        [str(TOOLCARDS), "serve", "--config", str(config), "--transport", "http",
         "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("server did not start") from None
                time.sleep(0.1)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            streamablehttp_client(url, headers=headers) as (read, write, _),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            return await timed(n, lambda: s.call_tool("lookup", {"key": "k"}))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def bench_executor(base: Path, n: int) -> list[float]:
    sys.path.insert(0, str(base))
    from bench_tools import TOOLS  # type: ignore[import-not-found]

    with AuditLog(base / "inproc-audit.db") as audit:
        executor = Executor(
            CapabilityRegistry.from_tools(TOOLS), Policy.from_dict(POLICY), audit=audit
        )
        who = Identity("bench")
        return await timed(n, lambda: executor.call("lookup", {"key": "k"}, who, surface="py"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer calls (< 60 s)")
    args = parser.parse_args()
    n = 200 if args.quick else 2000
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        config, env = setup(base)
        results = {
            "executor (in process)": anyio.run(bench_executor, base, n * 5),
            "MCP stdio": anyio.run(bench_stdio, config, env, n),
            "MCP streamable HTTP": anyio.run(bench_http, config, env, n),
        }
    print(f"tools/call round trip, {n} calls per transport (executor: {n * 5})")
    for name, samples in results.items():
        p50, p95 = statistics.median(samples), percentile(samples, 0.95)
        print(f"  {name:24s} p50 {p50:9.1f} us   p95 {p95:9.1f} us")
        record(f"tools/call {name}, p50", p50, "us")


if __name__ == "__main__":
    main()
