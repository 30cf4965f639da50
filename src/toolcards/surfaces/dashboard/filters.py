"""The template filters of the dashboard's pages (times and durations in words)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["FILTERS"]


def clock(ts: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts)) if ts else "-"


def stamp(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def since(ts: float | None) -> str:
    """How long ago ``ts`` was, in words."""
    return ago(max(0.0, time.time() - ts)) + " ago" if ts else "-"


def ago(seconds: float | None) -> str:
    """A duration in words (``12 s``, ``3 min``, ``2 h``)."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def dict_merge(base: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {**base, **more}


def amount(value: float, unit: str) -> str:
    """A budget amount with its unit (dollars to the cent's hundredth, counts whole)."""
    return f"{value:.4f} {unit}" if unit == "USD" else f"{value:g} {unit}"


FILTERS = {
    "clock": clock,
    "ago": ago,
    "since": since,
    "stamp": stamp,
    "dict_merge": dict_merge,
    "amount": amount,
}
