"""Startup overhead of ExecTool: p50/p90 wall time of ``true`` per backend.

Usage: python benchmarks/bench_exec.py [--quick] [--runs N]

Each sample is one full ``exec_command``-equivalent call (argv validation, launch plan,
process spawn with limits, pids cgroup when available, output capture, teardown).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _results import record

from toolcards.tools.exec.backends import BACKENDS
from toolcards.tools.exec.service import ExecService, ExecSettings


def sample(mode: str, runs: int, workspace: Path) -> dict[str, object]:
    """Timings of ``runs`` calls of ``true`` under ``mode`` (or why it was skipped)."""
    reason = BACKENDS[mode].unavailable_reason()
    if reason is not None:
        return {"backend": mode, "skipped": reason}
    service = ExecService(ExecSettings(mode=mode, timeout_s=30))  # type: ignore[arg-type]
    try:
        service.run("true", workspace)  # warm caches
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            result = service.run("true", workspace)
            times.append((time.perf_counter() - start) * 1000)
            assert result.exit_code == 0, result.render()
    finally:
        service.close()
    times.sort()
    return {
        "backend": mode,
        "runs": runs,
        "p50_ms": round(statistics.median(times), 2),
        "p90_ms": round(times[int(len(times) * 0.9) - 1], 2),
        "process_cap": service.process_cap,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few runs (well under a minute)")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args(argv)
    runs = args.runs or (30 if args.quick else 200)
    with tempfile.TemporaryDirectory(prefix="bench-exec-") as tmp:
        rows = [sample(mode, runs, Path(tmp)) for mode in ("local", "bwrap")]
    for row in rows:
        print(json.dumps(row))
    local, bwrap = rows
    if "p50_ms" in local and "p50_ms" in bwrap:
        overhead = float(bwrap["p50_ms"]) - float(local["p50_ms"])  # type: ignore[arg-type]
        print(json.dumps({"bwrap_overhead_p50_ms": round(overhead, 2), "cpus": os.cpu_count()}))
        record(
            "exec_command `true` under bwrap, p50",
            float(bwrap["p50_ms"]),  # type: ignore[arg-type]
            "ms",
            peer="same command, local (unconfined)",
            peer_value=float(local["p50_ms"]),  # type: ignore[arg-type]
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
