"""Governance overhead: direct call vs the governed executor vs GovernedToolset.call_tool vs
apcore's Executor.call (when apcore is installed), and cached listing of 500 tools.

Run: .venv/bin/python benchmarks/bench_governance.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _results import record

from toolcards.governance import (
    AuditLog,
    CapabilityRegistry,
    Executor,
    GovernedToolset,
    Identity,
    Policy,
)
from toolcards.governance.capability import surface_context

ALICE = Identity("alice", "user", roles=["admin"])
POLICY = {
    "default_effect": "deny",
    "rules": [
        {"targets": ["secret_*"], "effect": "deny"},
        {
            "targets": ["add", "add_sync", "tool_*"],
            "effect": "allow",
            "conditions": {"roles": ["admin"]},
        },
    ],
}


def add_sync(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _per_call(samples: list[float], n: int) -> float:
    """The best round (the least disturbed by other processes), per call, in microseconds."""
    return min(samples) / n * 1e6


async def _time_async(fn: Callable[[], Awaitable[Any]], n: int, rounds: int) -> float:
    for _ in range(min(n, 200)):
        await fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            await fn()
        samples.append(time.perf_counter() - start)
    return _per_call(samples, n)


def _time_sync(fn: Callable[[], Any], n: int, rounds: int) -> float:
    for _ in range(min(n, 200)):
        fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append(time.perf_counter() - start)
    return _per_call(samples, n)


def _apcore_call(n: int, rounds: int) -> float | None:
    try:
        from apcore import Executor as ApExecutor
        from apcore import Registry, module
        from apcore.acl import ACL, ACLRule
        from apcore.context import Context
        from apcore.context import Identity as ApIdentity
    except ImportError:
        return None
    registry = Registry()

    @module(id="add", registry=registry)
    def ap_add(a: int, b: int) -> dict[str, int]:
        """Add two numbers."""
        return {"result": a + b}

    acl = ACL(
        rules=[ACLRule(callers=["*"], targets=["add"], effect="allow")], default_effect="deny"
    )
    executor = ApExecutor(registry=registry, acl=acl)
    who = ApIdentity(id="alice", roles=("admin",))

    def call() -> Any:
        return executor.call("add", {"a": 1, "b": 2}, Context.create(identity=who))

    return _time_sync(call, n, rounds)


async def _listing(n_tools: int, rounds: int) -> tuple[float, float]:
    from pydantic_ai.toolsets import FunctionToolset

    inner: FunctionToolset[Any] = FunctionToolset()
    for i in range(n_tools):
        inner.add_function(add, name=f"tool_{i}", metadata={"readonly": i % 2 == 0})
    governed = GovernedToolset(inner, policy=Policy.from_dict(POLICY), identity=ALICE)
    ctx = surface_context()
    start = time.perf_counter()
    tools = await governed.get_tools(ctx)
    first = (time.perf_counter() - start) * 1e3
    assert len(tools) == n_tools
    cached = await _time_async(lambda: governed.get_tools(ctx), 200, rounds) / 1e3
    return first, cached


async def main(quick: bool) -> None:
    n, rounds = (2_000, 3) if quick else (5_000, 9)
    registry = CapabilityRegistry.from_tools([add, add_sync])
    policy = Policy.from_dict(POLICY)
    executor = Executor(registry, policy, timeout=30.0)

    direct_async = await _time_async(lambda: add(1, 2), n, rounds)
    direct_sync = _time_sync(lambda: add_sync(1, 2), n, rounds)
    via_executor = await _time_async(
        lambda: executor.call("add", {"a": 1, "b": 2}, ALICE), n, rounds
    )
    via_executor_sync = await _time_async(
        lambda: executor.call("add_sync", {"a": 1, "b": 2}, ALICE), max(n // 40, 100), rounds
    )
    with tempfile.TemporaryDirectory() as tmp:
        audit = AuditLog(Path(tmp) / "audit.db")
        audited = Executor(registry, policy, audit=audit, timeout=30.0)
        via_audited = await _time_async(
            lambda: audited.call("add", {"a": 1, "b": 2}, ALICE), n, rounds
        )
        audit.close()

    from pydantic_ai.toolsets import FunctionToolset

    inner: FunctionToolset[Any] = FunctionToolset()
    inner.add_function(add, name="add")
    governed = GovernedToolset(inner, policy=policy, identity=ALICE, timeout=30.0)
    ctx = surface_context()
    tool = (await governed.get_tools(ctx))["add"]
    via_toolset = await _time_async(
        lambda: governed.call_tool("add", {"a": 1, "b": 2}, ctx, tool), n, rounds
    )
    inner_tool = (await inner.get_tools(ctx))["add"]
    plain_inner = await _time_async(
        lambda: inner.call_tool("add", {"a": 1, "b": 2}, ctx, inner_tool), n, rounds
    )
    apcore = _apcore_call(max(n // 100, 50), rounds)
    first_ms, cached_ms = await _listing(500, rounds)

    ours = via_executor - direct_async
    print(f"{'path':58} {'us/call':>10} {'overhead us':>12}")
    rows = [
        ("direct call (async def)", direct_async, None),
        ("direct call (def)", direct_sync, None),
        ("Executor.call, async tool", via_executor, via_executor - direct_async),
        (
            "Executor.call, async tool, audit batched to SQLite",
            via_audited,
            via_audited - direct_async,
        ),
        (
            "Executor.call, sync tool (runs in a worker thread)",
            via_executor_sync,
            via_executor_sync - direct_sync,
        ),
        (
            "FunctionToolset.call_tool (ungoverned baseline)",
            plain_inner,
            plain_inner - direct_async,
        ),
        ("GovernedToolset.call_tool, async tool", via_toolset, via_toolset - direct_async),
    ]
    if apcore is not None:
        rows.append(("apcore Executor.call, same function", apcore, apcore - direct_sync))
    for name, per_call, overhead in rows:
        extra = f"{overhead:12.2f}" if overhead is not None else f"{'':12}"
        print(f"{name:58} {per_call:10.2f} {extra}")
    print()
    print(f"governance overhead (Executor.call vs direct): {ours:.2f} us (goal <= 20 us)")
    extra = via_toolset - plain_inner
    print(f"GovernedToolset.call_tool overhead over ungoverned call_tool: {extra:.2f} us")
    if apcore is not None:
        print(f"apcore overhead / ours: {(apcore - direct_sync) / ours:.0f}x (goal >= 50x)")
    else:
        print("apcore not installed (toolcards[apcore]): peer figure skipped")
    print(f"listing 500 tools: first {first_ms:.2f} ms, cached {cached_ms:.3f} ms (goal < 1 ms)")
    apcore_overhead = None if apcore is None else apcore - direct_sync
    record(
        "governance overhead per call (Executor.call)",
        ours,
        "us",
        peer="apcore Executor.call" if apcore is not None else None,
        peer_value=apcore_overhead,
        goal="<= 20 us, >= 50x less than apcore",
    )
    record(
        "GovernedToolset.call_tool, whole call (ungoverned peer: no policy at all)",
        via_toolset,
        "us",
        peer="pydantic-ai FunctionToolset.call_tool",
        peer_value=plain_inner,
    )
    record("Executor.call with batched SQLite audit, overhead", via_audited - direct_async, "us")
    record("listing 500 governed tools, cached", cached_ms, "ms", goal="< 1 ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    asyncio.run(main(parser.parse_args().quick))
