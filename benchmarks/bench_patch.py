"""workspace_patch beside ``git apply`` and GNU ``patch`` on the pinned patch cases.

Usage: python benchmarks/bench_patch.py [--quick]

The cases are the test suite's (``tests/workspace/patch_cases.py``): diffs from the history
of CPython's standard library (real diffs, one-sided hunks sent again, CRLF and mixed line
endings, line-ending conversions, no final newline, repeated context with drift, moved lines,
edited nearby context, Latin-1) and this repository's pinned commits. Each tool gets the same
files and the same diff; the counts per category are correct / refused / WRONG (said it
applied, files not the expected ones) / partial writes (said no, changed files). ``git
apply`` runs with its defaults; GNU patch as ``patch -p1 --batch --forward
--no-backup-if-mismatch --reject-file=-`` (install it with ``apt-get install patch``).

``--quick``: every eighth case of each category (a smoke run).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _results import record

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "workspace"))
from patch_cases import (  # the cases and runners the tests use
    OUTCOMES,
    TOOLS,
    Case,
    available,
    load_cases,
    render,
    run_tool,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every eighth case (a smoke run)")
    args = parser.parse_args()
    cases: tuple[Case, ...] = load_cases()
    if args.quick:
        seen: dict[str, int] = {}
        kept = []
        for case in cases:
            seen[case.category] = seen.get(case.category, 0) + 1
            if seen[case.category] % 8 == 1:
                kept.append(case)
        cases = tuple(kept)
    tools = [tool for tool in TOOLS if available(tool)]
    for tool in TOOLS:
        if tool not in tools:
            print(f"{tool} is not installed: its column is left out (apt-get install patch git)")
    reports = []
    for tool in tools:
        started = time.process_time(), os.times()
        reports.append(run_tool(tool, cases))
        own = time.process_time() - started[0]
        children = os.times().children_user + os.times().children_system
        children -= started[1].children_user + started[1].children_system
        print(f"{tool}: {len(cases)} cases, CPU {own + children:.2f} s (with its processes)")
    print()
    print(render(reports, cases))
    ours, *peers = reports
    for category in dict.fromkeys(c.category for c in cases):
        size = sum(c.category == category for c in cases)
        missed = size - ours.count("correct", category)
        best = max(peers, key=lambda r: r.count("correct", category), default=None)
        record(
            f"{category}: cases not applied correctly (of {size})",
            missed,
            "cases",
            peer=best.tool if best else None,
            peer_value=size - best.count("correct", category) if best else None,
            goal="at most the better peer's, 0 WRONG",
        )
    for peer in peers:
        record(
            f"WRONG patches and partial writes (of {len(cases)})",
            ours.count("WRONG") + ours.count("partial"),
            "cases",
            peer=peer.tool,
            peer_value=peer.count("WRONG") + peer.count("partial"),
            goal="0",
        )
    for report in reports:
        for line in report.failures:
            print(f"{report.tool}: {line}")
    totals = {r.tool: [r.count(o) for o in OUTCOMES] for r in reports}
    print("\ntotals (correct, refused, WRONG, partial):", totals)


if __name__ == "__main__":
    main()
