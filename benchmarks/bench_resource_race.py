"""MCP resource reads under a link-swap race: escapes and reads per second.

Usage: python benchmarks/bench_resource_race.py [--quick] [--reads N]

A real ``toolcards serve`` over stdio, the official ``mcp`` client, and the race harness of
the tests (``tests/surfaces/resource_race.py``): ``dir`` and ``lnk -> <outside dir>`` are
exchanged with ``renameat2(RENAME_EXCHANGE)`` while the client reads
``toolcards://workspace/w/dir/secret.txt`` N times (default 10,000; 20 with --quick), once
with the swapper as a host process and once as an ExecTool bwrap job that plants the link
itself (skipped when bwrap cannot run), both against one server. A read that returns the
outside file escaped.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests"), str(HERE.parent / "tests" / "surfaces")]

from _results import record  # noqa: E402
from mcp_clients import stdio_session  # noqa: E402
from resource_race import (  # noqa: E402 - the race harness the tests use
    Tally,
    exec_swapper,
    host_swapper,
    prepare,
    raced_reads,
    server_env,
)

from toolcards.tools.exec.backends.bwrap import BwrapBackend  # noqa: E402


async def races(base: Path, reads: int, with_exec: bool) -> dict[str, tuple[Tally, float, str]]:
    """By race, the tally of ``reads`` raced reads, the reads per second and how the swap ran,
    on one server: (``with_exec``) the swapper as a bwrap job that plants the link, then the
    swapper as a host process (the link is there already)."""
    config, ws, outside = prepare(base, with_exec=with_exec)
    found = {}
    async with stdio_session(config, env=server_env(base)) as session:
        await raced_reads(session, 20)  # warm up (imports, first listing), not counted
        if with_exec:
            async with exec_swapper(session, ws, outside) as job:
                start = time.perf_counter()
                tally = await raced_reads(session, reads)
                took = time.perf_counter() - start
            method = "exchange" if "exchange" in job.output else "renames"
            found["with exec"] = (tally, reads / took, f"bwrap job, {_how(method)}")
        with host_swapper(ws, outside) as method:
            start = time.perf_counter()
            tally = await raced_reads(session, reads)
            took = time.perf_counter() - start
        found["without exec"] = (tally, reads / took, f"host process, {_how(method)}")
    return found


def _how(method: str) -> str:
    return "renameat2" if method == "exchange" else "renames"


def report(label: str, tally: Tally, rate: float, how: str) -> None:
    print(f"resource race {label} ({how}): {tally.escapes} escapes in {tally.attempts:,} reads "
          f"(inside {tally.inside:,}, not found {tally.refused:,}, other errors "
          f"{tally.errors}); {rate:.0f} reads/s")  # fmt: skip
    record(f"escapes in {tally.attempts:,} raced resource reads {label}", tally.escapes,
           "reads", goal="0")  # fmt: skip
    record(f"raced resource reads/s {label}", round(rate), "reads/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="20 reads per race")
    parser.add_argument("--reads", type=int, default=None, help="raced reads per race")
    args = parser.parse_args()
    reads = args.reads or (20 if args.quick else 10_000)
    reason = BwrapBackend.unavailable_reason()
    with tempfile.TemporaryDirectory() as tmp:
        found = anyio.run(races, Path(tmp), reads, reason is None)
    for label in ("without exec", "with exec"):
        if label in found:
            report(label, *found[label])
    if reason is not None:
        print(f"resource race with exec: skipped ({reason})")


if __name__ == "__main__":
    main()
