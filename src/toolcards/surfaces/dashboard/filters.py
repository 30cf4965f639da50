"""The template filters of the dashboard's pages (times and durations in words)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["FILTERS"]


def clock(ts: object) -> str:
    return local_time(ts, "%H:%M:%S")


def stamp(ts: object) -> str:
    return local_time(ts, "%Y-%m-%d %H:%M:%S")


def local_time(ts: object, form: str) -> str:
    """``ts`` (seconds since the epoch) as local time, else "-": a stored row may hold any
    value (text, NaN, 1e300), which costs its own cell, never the page."""
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not ts:
        return "-"
    try:
        return time.strftime(form, time.localtime(ts))
    except (OverflowError, OSError, ValueError):  # NaN, infinite, beyond the platform's time_t
        return "-"


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
