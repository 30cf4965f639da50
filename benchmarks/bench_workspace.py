"""WorkspaceTool timings: edits in a 10,000-line file, a 3-file patch, grep over 5,000 files.

Usage: python benchmarks/bench_workspace.py [--quick]

Every sample goes through the real tool callables (containment checks, read ledger, atomic
writes). Grep runs once with ripgrep (when installed) and once with the pure-Python search;
their outputs are compared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import record

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import GrepParam, WorkspaceTool
from toolcards.tools.workspace.grep import find_rg


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    """p50 and max wall time in milliseconds."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), max(samples)


def tools(**kwargs: Any) -> dict[str, Callable[..., Any]]:
    return {fn.__name__: fn for fn in WorkspaceTool(workspace_id="bench", **kwargs).get_tools()}


def bench_edits(ws: Path, runs: int) -> None:
    big = ws / "big.py"
    lines = [f"def f{i}(x):\n    return x + {i}\n" for i in range(5000)]
    big.write_text("".join(lines))
    t = tools()
    t["workspace_read"]("big.py", 1, 10)
    state = {"n": 0}

    def exact() -> None:
        k = state["n"]
        t["workspace_edit"]("big.py", f"    return x + {k}\n", f"    return x + {k} + 0\n")
        state["n"] += 1

    def drifted() -> None:
        k = state["n"]
        old = f"  def f{k}(x):\n      return x + {k}\n"
        t["workspace_edit"]("big.py", old, f"  def f{k}(x):\n      return -x\n")
        state["n"] += 1

    def missing() -> None:
        with contextlib.suppress(RetriableError):
            t["workspace_edit"]("big.py", "def nowhere(y):\n    return y", "x")

    for name, fn in (("exact", exact), ("indentation drift", drifted), ("no match", missing)):
        p50, worst = timed(fn, runs)
        print(f"edit 10,000-line file ({name}): p50 {p50:.1f} ms, max {worst:.1f} ms")
        record(f"workspace_edit in a 10,000-line file ({name}), p50", p50, "ms")


def bench_patch(ws: Path, runs: int) -> None:
    for k in range(3):
        (ws / f"mod{k}.py").write_text("".join(f"line {i}\n" for i in range(300)))
    t = tools()
    state = {"n": 0}

    def apply() -> None:
        n = state["n"]
        old, new = (
            ("line 150", f"line 150 v{n}") if n == 0 else (f"line 150 v{n - 1}", f"line 150 v{n}")
        )
        text = "".join(
            f"--- a/mod{k}.py\n+++ b/mod{k}.py\n@@ -149,3 +149,3 @@\n line 148\n-{old}\n+{new}\n"
            f" line 151\n"
            for k in range(3)
        )
        t["workspace_patch"](text.replace(" line 148\n", " line 149\n"))
        state["n"] += 1

    p50, worst = timed(apply, runs)
    print(f"3-file patch: p50 {p50:.1f} ms, max {worst:.1f} ms")
    record("workspace_patch, 3 files, p50", p50, "ms")


def bench_grep(ws: Path, runs: int) -> None:
    tree = ws / "tree"
    for d in range(50):
        sub = tree / f"pkg{d:02d}"
        sub.mkdir(parents=True)
        for f in range(100):
            body = "".join(f"value_{d}_{f}_{i} = compute({i})\n" for i in range(40))
            if f % 97 == 0:
                body += "# TODO: remove the legacy path\n"
            (sub / f"m{f:03d}.py").write_text(body)
    results = {}
    engines = ["python"] + (["rg"] if find_rg() else [])
    for engine in engines:
        grep = tools(workspace_grep=GrepParam(engine=engine, max_matches=500))["workspace_grep"]
        out = grep("TODO: remove", "tree", "*.py")
        p50, worst = timed(lambda: grep("TODO: remove", "tree", "*.py"), runs)  # noqa: B023
        results[engine] = out
        hits = len(out.splitlines())
        print(f"grep 5,000 files ({engine}): p50 {p50:.1f} ms, max {worst:.1f} ms, {hits} hits")
        record(f"workspace_grep over 5,000 files ({engine}), p50", p50, "ms")
    if len(results) == 2:
        print(f"grep outputs identical: {results['rg'] == results['python']}")
    else:
        print("grep with rg: skipped (ripgrep not installed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (< 60 s)")
    args = parser.parse_args()
    runs = 5 if args.quick else 30
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TOOLCARDS_WORKSPACES_ROOT"] = tmp
        ws = Path(tmp) / "bench"
        ws.mkdir()
        bench_edits(ws, runs)
        bench_patch(ws, runs)
        bench_grep(ws, 3 if args.quick else 10)


if __name__ == "__main__":
    main()
