"""WorkspaceTool timings: edits in a 10,000-line file, a 3-file patch, grep over 5,000 files,
and the security costs: edit no-match vs exact at 1k/10k/100k lines, a symlink swap race,
a catastrophic regex against a heartbeat, and the cost of descriptor-based path resolution.

Usage: python benchmarks/bench_workspace.py [--quick] [--race N]

``--quick`` runs every section once at tiny sizes: 3 repetitions, edit scaling at 100/1k/10k
lines, grep over 200 files, a 0.5 s catastrophic grep, 200 raced reads and writes.

Every sample goes through the real tool callables (containment checks, read ledger, atomic
writes). Grep runs once with ripgrep (when installed) and once with the pure-Python search;
their outputs are compared. The race runs N raced reads and N raced writes (default 10,000;
200 with --quick) while another process swaps a directory for a link to the outside, and
prints how many escaped.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import record, record_scaling

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import GrepParam, WorkspaceTool
from toolcards.tools.workspace.grep import find_rg
from toolcards.tools.workspace.paths import Contained

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "workspace"))
from race import prepare, run_race  # the race harness the tests use


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


def bench_grep(ws: Path, runs: int, dirs: int = 50, per_dir: int = 100) -> None:
    tree = ws / "tree"
    files = f"{dirs * per_dir:,}"
    for d in range(dirs):
        sub = tree / f"pkg{d:02d}"
        sub.mkdir(parents=True)
        for f in range(per_dir):
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
        print(f"grep {files} files ({engine}): p50 {p50:.1f} ms, max {worst:.1f} ms, {hits} hits")
        record(f"workspace_grep over {files} files ({engine}), p50", p50, "ms")
    if len(results) == 2:
        print(f"grep outputs identical: {results['rg'] == results['python']}")
    else:
        print("grep with rg: skipped (ripgrep not installed)")


def _edit_pair(t: dict[str, Callable[..., Any]], name: str) -> tuple[Callable[[], None], ...]:
    """An exact edit (a different line each time) and an edit whose old text is nowhere."""
    state = {"n": 0}

    def exact() -> None:
        k = state["n"]
        t["workspace_edit"](name, f"    return x + {k}\n", f"    return x + {k} + 0\n")
        state["n"] += 1

    def missing() -> None:
        with contextlib.suppress(RetriableError):
            t["workspace_edit"](name, "def nowhere(y):\n    return y", "x")

    return exact, missing


def bench_edit_scaling(ws: Path, quick: bool) -> None:
    """workspace_edit with no match vs an exact match in the same file, at three sizes."""
    t = tools()
    for lines in (100, 1_000, 10_000) if quick else (1_000, 10_000, 100_000):
        name = f"scale{lines}.py"
        body = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(lines // 2))
        (ws / name).write_text(body)
        t["workspace_read"](name, 1, 10)
        exact, missing = _edit_pair(t, name)
        hit: list[float] = []
        miss: list[float] = []
        for _ in range(3 if quick else 15 if lines == 100_000 else 41):
            for fn, out in ((exact, hit), (missing, miss)):  # interleaved: same machine load
                start = time.perf_counter()
                fn()
                out.append((time.perf_counter() - start) * 1000)
        e, m = statistics.median(hit), statistics.median(miss)
        print(f"edit {lines:,}-line file: exact p50 {e:.2f} ms, no match p50 {m:.2f} ms, "
              f"ratio {m / e:.2f}")  # fmt: skip
        record(f"workspace_edit no match / exact at {lines:,} lines", m / e, "x", goal="<= 5x")
        record_scaling("workspace_edit, no match", lines, m, "ms", size_unit="lines")


def bench_race(root: Path, attempts: int) -> None:
    """Escapes of raced reads and writes while a directory is swapped for an outside link."""
    ws, outside = root / "race", root.parent / "race-outside"
    ws.mkdir()
    outside.mkdir()
    prepare(ws, outside)
    t = tools_for("race")
    start = time.perf_counter()
    escapes, method = run_race(t, ws, outside, {"read": attempts, "write": attempts})
    took = time.perf_counter() - start
    print(f"symlink swap race ({method}): {escapes['read']} of {attempts:,} reads and "
          f"{escapes['write']} of {attempts:,} writes escaped ({took:.1f} s)")  # fmt: skip
    record(f"escapes in {attempts:,} raced reads + {attempts:,} raced writes",
           escapes["read"] + escapes["write"], "calls", goal="0")  # fmt: skip


def bench_heartbeat(ws: Path, limit_s: float = 3.0) -> None:
    """Largest pause of another thread while a catastrophic Python-engine grep runs (to its
    ``limit_s`` timeout)."""
    (ws / "redos.txt").write_text("a" * 64 + "b\n")
    grep = tools(workspace_grep=GrepParam(engine="python", timeout_s=limit_s))["workspace_grep"]
    ticks, stop = [time.monotonic()], threading.Event()

    def beat() -> None:
        while not stop.is_set():
            time.sleep(0.01)
            ticks.append(time.monotonic())

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    start = time.monotonic()
    outcome = "no timeout"
    try:
        grep("(a|aa)+$", "redos.txt")
    except RetriableError as exc:
        outcome = "timed out" if "timed out" in str(exc) else str(exc)
    took = time.monotonic() - start
    stop.set()
    thread.join()
    gap = max(b - a for a, b in itertools.pairwise(ticks) if b >= start) * 1000
    print(f"catastrophic grep (python engine, {limit_s:g} s limit): {outcome} after {took:.1f} s, "
          f"largest heartbeat gap {gap:.0f} ms")  # fmt: skip
    record("heartbeat gap during a catastrophic Python-engine grep", gap, "ms", goal="< 100 ms")


def _old_style_read(root: Path, rel: str) -> bytes:
    """The path-based reference: realpath, a containment check, then open by path."""
    real = Path(os.path.realpath(root / rel))
    if real != root and root not in real.parents:
        raise RetriableError("outside")
    with open(real, "rb") as handle:
        return handle.read()


def _fd_read(paths: Contained, rel: str) -> bytes:
    with paths.locate(rel) as spot:
        assert spot.fd is not None
        return os.pread(spot.fd, 1 << 20, 0)


def bench_resolution(ws: Path, runs: int) -> None:
    """Per-read cost of descriptor-based resolution vs the path-based check it replaced."""
    deep = ws / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (ws / "top.txt").write_text("x" * 2000)
    (deep / "leaf.txt").write_text("x" * 2000)
    paths = Contained(ws)
    root = ws.resolve()
    for rel in ("top.txt", "a/b/c/leaf.txt"):
        per = {}
        for label, fn in (("path-based", lambda r=rel: _old_style_read(root, r)),
                          ("descriptors", lambda r=rel: _fd_read(paths, r))):  # fmt: skip
            samples = []
            for _ in range(7):
                start = time.perf_counter()
                for _ in range(runs):
                    fn()
                samples.append((time.perf_counter() - start) / runs * 1e6)
            per[label] = min(samples)
        extra = per["descriptors"] - per["path-based"]
        print(f"resolve+read {rel}: path-based {per['path-based']:.1f} us, descriptors "
              f"{per['descriptors']:.1f} us ({extra:+.1f} us)")  # fmt: skip
        depth = rel.count("/")
        record(f"read by descriptors, depth {depth}", per["descriptors"], "us",
               peer="realpath + open", peer_value=per["path-based"])  # fmt: skip


def tools_for(workspace_id: str) -> dict[str, Callable[..., Any]]:
    return {fn.__name__: fn for fn in WorkspaceTool(workspace_id=workspace_id).get_tools()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="every section once at tiny sizes (a few seconds)"
    )
    parser.add_argument("--race", type=int, default=None, help="raced reads and writes")
    args = parser.parse_args()
    runs = 3 if args.quick else 30
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TOOLCARDS_WORKSPACES_ROOT"] = str(Path(tmp) / "roots")
        root = Path(tmp) / "roots"
        ws = root / "bench"
        ws.mkdir(parents=True)
        bench_edits(ws, runs)
        bench_edit_scaling(ws, args.quick)
        bench_patch(ws, runs)
        if args.quick:
            bench_grep(ws, 3, dirs=10, per_dir=20)
        else:
            bench_grep(ws, 10)
        bench_heartbeat(ws, 0.5 if args.quick else 3.0)
        bench_resolution(ws, 50 if args.quick else 2000)
        bench_race(root, args.race or (200 if args.quick else 10_000))


if __name__ == "__main__":
    main()
