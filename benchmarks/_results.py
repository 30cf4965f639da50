"""Shared by the benchmark scripts: print a figure and, under ``make bench``, record it.

``benchmarks/run_all.py`` sets ``TOOLCARDS_BENCH_RESULTS`` to a JSON-lines file; each
``record`` call appends one figure (with the peer's figure from the same run, when there is
one) so that the runner can write one table to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ENV = "TOOLCARDS_BENCH_RESULTS"


def record(
    metric: str,
    value: float,
    unit: str,
    *,
    peer: str | None = None,
    peer_value: float | None = None,
    goal: str | None = None,
) -> None:
    """Record one figure of the running benchmark script."""
    target = os.environ.get(ENV)
    if not target:
        return
    row = {
        "bench": Path(sys.argv[0]).stem,
        "metric": metric,
        "value": value,
        "unit": unit,
        "peer": peer,
        "peer_value": peer_value,
        "goal": goal,
    }
    with open(target, "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


def record_scaling(metric: str, size: float, value: float, unit: str, *, size_unit: str) -> None:
    """Record one point of a cost measured at several sizes (``make bench`` tables and plots
    them: the point is that the cost does not grow with history or size)."""
    target = os.environ.get(ENV)
    if not target:
        return
    row = {
        "bench": Path(sys.argv[0]).stem,
        "scaling": metric,
        "size": size,
        "size_unit": size_unit,
        "value": value,
        "unit": unit,
    }
    with open(target, "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
