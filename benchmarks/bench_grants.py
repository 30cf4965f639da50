"""What a remembered approval (a grant) costs a governed call.

The same async tool, the same executor pipeline, measured in the same run, rounds interleaved:

- a call the policy allows (no approval): the governed call's overhead, the baseline;
- a call that needs approval and that a remembered grant lets run, the grant kept in the
  approvals SQLite file other processes share (the default for a config): the gate reads the
  file's grant stamp (eight mapped bytes), finds the grants of the caller and tool in this
  process's copy, and matches the pattern (a glob and an exact value) on the canonical arguments;
- the same with the grant in memory (one process);
- both again through ``GovernedToolset.call_tool`` (what a pydantic-ai agent's call costs);
- an allowed and a granted call with the audit log a config writes (a SQLite file; its writer
  thread's CPU counts too): a governed call as it is served.

Overhead = the governed call minus calling the tool directly, in CPU time per call (best round).
Goal: a grant adds at most 10% to the governed call's overhead.

Run: .venv/bin/python benchmarks/bench_grants.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _results import record

from toolcards.core.spec import annotate
from toolcards.core.toolset import build_function_toolset
from toolcards.governance import (
    ApprovalBroker,
    AuditLog,
    CapabilityRegistry,
    Executor,
    GovernedToolset,
    Identity,
    Outcome,
    Policy,
)
from toolcards.governance.approvals.grants import Remember
from toolcards.governance.capability import surface_context
from toolcards.stores.memory import MemoryApprovalStore
from toolcards.stores.sqlite.approvals import SqliteApprovalStore

CAROL = Identity("carol", "agent", roles=["writer"])
RITA = Identity("rita", roles=["approver"])
ARGS = {"path": "notes/today.md", "mode": "w"}


async def write(path: str, mode: str) -> str:
    """Write a note."""
    return path


async def publish(path: str, mode: str) -> str:
    """Publish a note (a human approves each call, or a grant)."""
    return path


annotate(publish, requires_approval=True)


def granted_executor(store: Any, audit: AuditLog | None = None) -> Executor:
    """An executor whose approvals live in ``store``, holding a grant covering ``ARGS``."""
    executor = Executor(
        CapabilityRegistry.from_tools([write, publish]),
        Policy.allow_all(),
        audit=audit,
        approvals=ApprovalBroker(store=store),
        timeout=30.0,
    )
    waiting = asyncio.run(executor.call("publish", ARGS, CAROL))
    assert waiting.approval is not None
    remember = Remember(3600, pattern={"path": {"glob": "notes/*"}})
    executor.approvals.remember(waiting.approval, approver=RITA, remember=remember)
    return executor


def cpu_per_call(
    fn: Callable[[], Awaitable[Any]], n: int, settle: Callable[[], Any] | None = None
) -> float:
    """CPU microseconds per call of one round of ``n`` calls; ``settle`` (the audit log's
    flush) runs before the round and inside it, so the writer thread's work on a round's rows
    counts in that round and in no other path's."""

    async def loop() -> None:
        for _ in range(n):
            await fn()

    if settle is not None:
        settle()
    start = time.process_time()
    asyncio.run(loop())
    if settle is not None:
        settle()
    return (time.process_time() - start) / n * 1e6


def main(quick: bool) -> None:
    n, rounds = (300, 2) if quick else (20_000, 9)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_store = SqliteApprovalStore(Path(tmp) / "approvals.db")
        on_file = granted_executor(sqlite_store)
        in_memory = granted_executor(MemoryApprovalStore())
        audit = AuditLog(Path(tmp) / "audit.db")
        audited_store = SqliteApprovalStore(Path(tmp) / "audited-approvals.db")
        audited = granted_executor(audited_store, audit)
        for executor in (on_file, in_memory, audited):
            done = asyncio.run(executor.call("publish", ARGS, CAROL))
            assert done.outcome is Outcome.OK and done.grant_id is not None, done.message
        toolset = GovernedToolset(
            build_function_toolset([write, publish]), executor=on_file, identity=CAROL
        )
        ctx = surface_context()
        tools = asyncio.run(toolset.get_tools(ctx))
        paths: dict[str, Callable[[], Awaitable[Any]]] = {
            "direct call of the tool": lambda: write(**ARGS),
            "allowed call (no approval)": lambda: on_file.call("write", ARGS, CAROL),
            "granted call, grant in the SQLite file": lambda: on_file.call("publish", ARGS, CAROL),
            "granted call, grant in memory": lambda: in_memory.call("publish", ARGS, CAROL),
            "call_tool, allowed": lambda: toolset.call_tool("write", ARGS, ctx, tools["write"]),
            "call_tool, granted (SQLite file)": lambda: toolset.call_tool(
                "publish", ARGS, ctx, tools["publish"]
            ),
            "audited, allowed": lambda: audited.call("write", ARGS, CAROL),
            "audited, granted (SQLite file)": lambda: audited.call("publish", ARGS, CAROL),
        }
        for fn in paths.values():  # warm: plans, listings, the grant copies
            cpu_per_call(fn, min(n, 500), audit.flush)
        best = {name: float("inf") for name in paths}
        each: list[dict[str, float]] = []  # every round's figures, for the paired ratios
        for _ in range(rounds):  # interleaved: the machine's load falls on every path alike
            each.append({name: cpu_per_call(fn, n, audit.flush) for name, fn in paths.items()})
            for name, per in each[-1].items():
                best[name] = min(best[name], per)
        sqlite_store.close()
        audit.close()
        audited_store.close()
    direct = best["direct call of the tool"]
    base = best["allowed call (no approval)"] - direct
    print(f"{'path':44} {'cpu us/call':>12} {'overhead us':>12} {'x allowed':>10}")
    for name, per in best.items():
        over = per - direct
        ratio = f"{over / base:10.3f}" if name != "direct call of the tool" else ""
        print(f"{name:44} {per:12.2f} {over:12.2f} {ratio}")
    toolset_base = best["call_tool, allowed"] - direct
    audited_base = best["audited, allowed"] - direct
    for name, against, label in (
        ("granted call, grant in the SQLite file", base, "allowed call (no approval)"),
        ("granted call, grant in memory", base, "allowed call (no approval)"),
        ("call_tool, granted (SQLite file)", toolset_base, "call_tool, allowed"),
        ("audited, granted (SQLite file)", audited_base, "audited, allowed"),
    ):
        over = best[name] - direct
        paired = statistics.median(  # each round's granted beside the same round's allowed
            (r[name] - r["direct call of the tool"]) / (r[label] - r["direct call of the tool"])
            for r in each
        )
        print(
            f"{name}: {100 * (over / against - 1):+.1f}% of the governed call's overhead "
            f"(best rounds), {100 * (paired - 1):+.1f}% (median of the paired rounds)"
        )
        record(
            f"{name}: overhead",
            over,
            "us",
            peer=f"{label}, same run",
            peer_value=against,
            goal="<= 1.10x the allowed call's overhead",
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="300 calls, 2 rounds (a smoke run)")
    main(parser.parse_args().quick)
