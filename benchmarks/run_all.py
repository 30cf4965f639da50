"""Run every ``benchmarks/bench_*.py`` and write ``benchmarks/RESULTS.md``.

Usage: ``python benchmarks/run_all.py [--quick] [--only NAME ...]`` (``make bench``).
Each script prints its own figures; the ones it records (see ``_results.py``) form one table,
with the peer's figure from the same run where a peer is installed, and the ratio between them,
so that results from different machines compare as ratios.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LONG = {"bench_vector_scale": 5400.0}
"""Seconds a full-size run of these scripts may take (at least; --timeout may give more):
bench_vector_scale builds graphs over 1,000,000 vectors."""
sys.path.insert(0, str(HERE))
from _plots import scaling_section  # noqa: E402


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores{memory}, "
        f"Python {platform.python_version()}"
    )


def fmt(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| benchmark | figure | toolcards | peer | peer figure | peer / toolcards | goal |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        unit = r["unit"]
        ratio = ""
        if r.get("peer_value") and r["value"]:
            ratio = f"{r['peer_value'] / r['value']:.1f}x"
        peer_value = f"{fmt(r.get('peer_value'))} {unit}" if r.get("peer_value") else ""
        out.append(
            f"| {r['bench']} | {r['metric']} | {fmt(r['value'])} {unit} | {r.get('peer') or ''} "
            f"| {peer_value} | {ratio} | {r.get('goal') or ''} |"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every script")
    parser.add_argument("--only", nargs="*", default=None, help="script names (bench_x or x)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per script")
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only:
        wanted = {n if n.startswith("bench_") else f"bench_{n}" for n in args.only}
        scripts = [s for s in scripts if s.stem in wanted]
    results_file = Path(tempfile.mkstemp(prefix="toolcards-bench-", suffix=".jsonl")[1])
    env = {**os.environ, "TOOLCARDS_BENCH_RESULTS": str(results_file)}
    outputs: dict[str, str] = {}
    failures: list[str] = []
    for index, script in enumerate(scripts, 1):
        print(f"[{index}/{len(scripts)}] {script.name} ...", end=" ", flush=True)
        start = time.perf_counter()
        cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
        timeout = args.timeout if args.quick else max(args.timeout, LONG.get(script.stem, 0.0))
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=HERE.parent
            )
            text = done.stdout + (f"\n[stderr]\n{done.stderr[-2000:]}" if done.returncode else "")
            ok = done.returncode == 0
        except subprocess.TimeoutExpired:
            text, ok = f"timed out after {timeout:.0f} s", False
        outputs[script.stem] = text.strip()
        if not ok:
            failures.append(script.stem)
        print(f"{'ok' if ok else 'FAILED'} ({time.perf_counter() - start:.1f} s)", flush=True)
    found = [json.loads(line) for line in results_file.read_text().splitlines() if line.strip()]
    results_file.unlink(missing_ok=True)
    rows = [r for r in found if "scaling" not in r]
    scaling = [r for r in found if "scaling" in r]
    lines = [
        "# Benchmark results",
        "",
        f"Written by `make bench` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
        + (" (quick mode)" if args.quick else "")
        + ".",
        "",
        f"Machine: {machine()}.",
        "",
        "Peers are measured in the same run on the same machine; compare across machines by the "
        "ratio column, not by absolute figures. Lower is better for every figure here.",
        "",
        *table(rows),
        "",
        *scaling_section(scaling, args.output.parent / "plots"),
    ]
    if failures:
        lines += [f"Scripts that failed: {', '.join(failures)}.", ""]
    lines += ["## Raw output", ""]
    for name, text in outputs.items():
        lines += [f"### {name}", "", "```text", text, "```", ""]
    args.output.write_text("\n".join(lines))
    print(f"wrote {args.output} ({len(rows)} figures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
