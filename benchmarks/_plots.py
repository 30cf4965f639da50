"""The scaling section of ``benchmarks/RESULTS.md``: a table per cost and a PNG plot of it.

Each cost measured at several sizes (``_results.record_scaling``) becomes one table row per
size with the ratio to the smallest size, and one log-log plot under ``benchmarks/plots/``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def scaling_section(rows: list[dict[str, Any]], plots: Path) -> list[str]:
    """Markdown lines for every scaling metric in ``rows``; writes one PNG per metric."""
    series: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        series[(row["bench"], row["scaling"])].append(row)
    if not series:
        return []
    lines = [
        "## How costs grow",
        "",
        "Each cost at several sizes, with its ratio to the smallest size (1.0x: does not grow).",
        "",
        "| benchmark | cost | size | value | x smallest | plot |",
        "|---|---|---|---|---|---|",
    ]
    for (bench, metric), points in sorted(series.items()):
        points.sort(key=lambda p: p["size"])
        base = points[0]["value"] or 1e-12
        image = plots / f"{bench}-{_slug(metric)}.png"
        drawn = _plot(metric, points, image)
        for i, point in enumerate(points):
            link = f"[png](plots/{image.name})" if drawn and i == 0 else ""
            lines.append(
                f"| {bench} | {metric} | {point['size']:,.0f} {point['size_unit']} "
                f"| {point['value']:,.3f} {point['unit']} | {point['value'] / base:.2f}x | {link} |"
            )
    return [*lines, ""]


def _plot(metric: str, points: list[dict[str, Any]], image: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the plots need the dev extra; the table does not
        return False
    image.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=110)
    sizes = [p["size"] for p in points]
    values = [p["value"] for p in points]
    ax.plot(sizes, values, marker="o")
    ax.set_xscale("log")
    if min(values) > 0:
        ax.set_yscale("log")
    ax.set_xlabel(points[0]["size_unit"])
    ax.set_ylabel(points[0]["unit"])
    ax.set_title(metric, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(image)
    plt.close(fig)
    return True
