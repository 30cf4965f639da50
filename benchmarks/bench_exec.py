"""Spawn cost of ExecTool against its bare peers: ``true`` per call, p50 and ratios.

Usage: python benchmarks/bench_exec.py [--quick] [--runs N]

``--quick``: 5 rounds after 1 warm-up round (300 after 5 otherwise), every column still run.

Each round times, back to back (so a busy machine slows every column alike):

- ours, bwrap: one full ``exec_command``-equivalent call under bwrap (argv validation,
  launch plan, start gate, rlimits, pids cgroup, output capture, teardown);
- peer: a bare ``subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"])``;
- ours, local: the same call under the local backend;
- peer: a bare ``subprocess.run(["true"])``;
- and, to tell the runner's cost from the sandbox's own, the bwrap command line ours builds,
  started bare (no start gate, limits or seccomp filter).

Goals: bwrap <= 1.5x its peer, local <= 2x its peer. Printed: p50 and p10 of each column
and their ratios, and the 1-minute load (a busy machine stretches every wake-up, and ours
have more of them than the bare peers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _results import record

from toolcards.tools.exec.backends import BUILTIN, BwrapBackend, SandboxSpec
from toolcards.tools.exec.limits import ExecLimits
from toolcards.tools.exec.service import ExecService, ExecSettings

GOALS = {"bwrap": 1.5, "local": 2.0}
PEERS = {
    "bwrap": ["bwrap", "--ro-bind", "/", "/", "true"],
    "local": ["true"],
}


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="5 rounds, 1 warm-up round")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args(argv)
    runs = args.runs or (5 if args.quick else 300)
    warm = 1 if args.quick else 5
    modes = [m for m in ("bwrap", "local") if BUILTIN[m].unavailable_reason() is None]
    for mode in {"bwrap", "local"} - set(modes):
        print(json.dumps({"backend": mode, "skipped": BUILTIN[mode].unavailable_reason()}))
    with tempfile.TemporaryDirectory(prefix="bench-exec-") as tmp:
        workspace = Path(tmp)
        services = {m: ExecService(ExecSettings(mode=m, timeout_s=30)) for m in modes}
        calls: dict[str, Callable[[], object]] = {}
        for mode, service in services.items():
            calls[mode] = lambda s=service: _check(s.run("true", workspace))
            peer = PEERS[mode]
            calls[f"{mode} peer"] = lambda p=peer: subprocess.run(p, check=True)  # type: ignore[misc]
        if "bwrap" in modes:
            spec = SandboxSpec(workspace=workspace, env={}, network=False, limits=ExecLimits())
            raw = BwrapBackend().argv(["true"], spec)
            calls["bwrap argv"] = lambda: subprocess.run(raw, check=True, process_group=0)
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(warm):  # warm caches
            for fn in calls.values():
                fn()
        for _ in range(runs):
            for name, fn in calls.items():
                times[name].append(_ms(fn))
        for service in services.values():
            service.close()
    for mode in modes:
        ours = statistics.median(times[mode])
        peer = statistics.median(times[f"{mode} peer"])
        ours_p10, peer_p10 = _p10(times[mode]), _p10(times[f"{mode} peer"])
        row = {
            "backend": mode,
            "runs": runs,
            "ours_p50_ms": round(ours, 3),
            "peer": " ".join(PEERS[mode]),
            "peer_p50_ms": round(peer, 3),
            "ratio": round(ours / peer, 2),
            "ours_p10_ms": round(ours_p10, 3),
            "peer_p10_ms": round(peer_p10, 3),
            "ratio_p10": round(ours_p10 / peer_p10, 2),
            "goal": GOALS[mode],
            "process_cap": services[mode].process_cap,
            "cpus": os.cpu_count(),
            "load_1min": round(os.getloadavg()[0], 2),
        }
        if mode == "bwrap":
            raw_p50 = statistics.median(times["bwrap argv"])
            row["same_argv_bare_p50_ms"] = round(raw_p50, 3)
            row["argv_ratio"] = round(raw_p50 / peer, 2)
        print(json.dumps(row))
        record(
            f"exec_command `true` under {mode}, p50",
            round(ours, 3),
            "ms",
            peer=f"subprocess.run({PEERS[mode]!r})",
            peer_value=round(peer, 3),
            goal=f"<= {GOALS[mode]}x the peer",
        )
    return 0


def _p10(values: list[float]) -> float:
    """The 10th percentile: on a shared machine, the runs least disturbed by other work."""
    return sorted(values)[len(values) // 10]


def _check(result: object) -> None:
    if getattr(result, "exit_code", None) != 0:
        raise SystemExit(f"exec failed: {result}")


if __name__ == "__main__":
    sys.exit(main())
