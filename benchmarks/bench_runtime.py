"""Runtime costs: tool-actor ask round trip, and state persistence per mutation vs. state size.

Run: .venv/bin/python benchmarks/bench_runtime.py [--quick]

``--quick``: 500 asks, 100 mutations, state sizes 1k and 10k rows instead of 1k and 100k.

The persistence figures come from a real SQLite file (WAL). A mutation writes one state row and
one event in one transaction, so its cost must not grow with the number of rows already stored.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _results import record, record_scaling

from toolcards.runtime import Team, ToolActor


class Echo(ToolActor):
    def ping(self, value: Any) -> Any:
        return value


class Index(ToolActor):
    """A keyed index: one state row per entry, loaded in on_start."""

    def on_start(self) -> None:
        self.size = sum(1 for _ in self.state.items("doc:"))

    def fill(self, start: int, count: int) -> int:
        with self.state.batch():
            for i in range(start, start + count):
                self.state.put(f"doc:{i:09d}", {"text": f"document {i}", "tags": ["a", "b"]})
        self.size += count
        return self.size

    def add(self, i: int) -> None:
        with self.state.batch():
            self.state.put(f"doc:{i:09d}", {"text": f"document {i}", "tags": ["a", "b"]})
            self.emit({"added": [i]})
        self.size += 1


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ask_latency(n: int) -> tuple[float, float, float]:
    """p50, p99 and mean microseconds of ``handle.ask(Echo.ping, 1)``."""
    with Team("bench-ask") as team:
        echo = team.tool_actor("#Echo", Echo)
        for _ in range(min(n, 2000)):
            echo.ask(Echo.ping, 1)
        samples = []
        for _ in range(n):
            t = time.perf_counter_ns()
            echo.ask(Echo.ping, 1)
            samples.append((time.perf_counter_ns() - t) / 1000)
    return percentile(samples, 0.5), percentile(samples, 0.99), statistics.fmean(samples)


def persist_cost(directory: Path, size: int, mutations: int) -> tuple[float, float]:
    """p50 and mean microseconds per ``add`` (one row + one event, committed) at ``size`` rows."""
    with Team(f"bench-{size}", store=directory / f"state-{size}.db") as team:
        index = team.tool_actor("#Index", Index)
        chunk = 20_000
        for start in range(0, size, chunk):
            index.within(120).ask(Index.fill, start, min(chunk, size - start))
        team.checkpoint()
        for i in range(size, size + 50):  # warm up
            index.ask(Index.add, i)
        samples = []
        for i in range(size + 50, size + 50 + mutations):
            t = time.perf_counter_ns()
            index.ask(Index.add, i)
            samples.append((time.perf_counter_ns() - t) / 1000)
    return percentile(samples, 0.5), statistics.fmean(samples)


def store_only_cost(directory: Path, size: int, mutations: int) -> float:
    """p50 microseconds of one committed row + event written directly (no actor hop)."""
    from toolcards.runtime import EventLog, StateNamespace, TeamStore

    store = TeamStore(directory / f"raw-{size}.db")
    state = StateNamespace(store, "raw", "#Index")
    log = EventLog(store, "raw")
    with state.batch():
        for i in range(size):
            state.put(f"doc:{i:09d}", {"text": f"document {i}", "tags": ["a", "b"]})
    store.checkpoint()
    samples = []
    for i in range(size, size + mutations):
        t = time.perf_counter_ns()
        with state.batch():
            state.put(f"doc:{i:09d}", {"text": f"document {i}", "tags": ["a", "b"]})
            log.append("#Index", {"added": [i]})
        samples.append((time.perf_counter_ns() - t) / 1000)
    store.close()
    return percentile(samples, 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="500 asks, 100 mutations, 1k and 10k rows"
    )
    args = parser.parse_args()
    asks = 500 if args.quick else 50_000
    mutations = 100 if args.quick else 5_000
    small, large = 1_000, 10_000 if args.quick else 100_000
    label = f"{large // 1000}k"

    p50, p99, mean = ask_latency(asks)
    print(f"ask round trip ({asks} calls): p50 {p50:.1f} us  p99 {p99:.1f} us  mean {mean:.1f} us")
    record("tool actor ask round trip, p50", p50, "us", goal="< 100 us")

    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for size in (small, large):
            results[size] = persist_cost(Path(tmp), size, mutations)
            record_scaling("persist one mutation (SQLite)", size, results[size][0], "us",
                           size_unit="state rows")  # fmt: skip
            med, avg = results[size]
            raw = store_only_cost(Path(tmp), size, mutations)
            print(
                f"persist one mutation at {size:>7,} rows ({mutations} adds, WAL file): "
                f"via actor p50 {med:.1f} us  mean {avg:.1f} us | store only p50 {raw:.1f} us"
            )
        ratio = results[large][0] / results[small][0]
        print(
            f"cost ratio {label}/1k rows (p50): {ratio:.2f}x (per-key rows: no whole-state rewrite)"
        )
        record("persist one mutation at 1k rows, p50", results[small][0], "us")
        record(f"persist one mutation at {label} rows, p50", results[large][0], "us")
        record(f"persist cost ratio {label}/1k rows", ratio, "x", goal="~1 (does not grow)")


if __name__ == "__main__":
    main()
