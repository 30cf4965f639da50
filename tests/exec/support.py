"""Shared helpers of the exec tests: backend availability and leftover-process checks."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolcards.tools.exec.backends import BwrapBackend
from toolcards.tools.exec.cgroups import process_cap_method
from toolcards.tools.exec.limits import ExecLimits

BWRAP_REASON = BwrapBackend.unavailable_reason()
PROCESS_CAP = process_cap_method(ExecLimits())
needs_bwrap = pytest.mark.skipif(BWRAP_REASON is not None, reason=f"bwrap: {BWRAP_REASON}")
RUNNABLE = ExecLimits() if PROCESS_CAP != "none" else ExecLimits(max_processes=None)
"""Default limits, minus the process cap where this host cannot enforce one (the service
refuses to run with a cap it cannot enforce; that refusal has its own test)."""
needs_process_cap = pytest.mark.skipif(
    PROCESS_CAP == "none", reason="no way to cap processes here (root without a pids cgroup)"
)


def processes_with(marker: str) -> list[int]:
    """Pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def assert_none_left(marker: str, wait_s: float = 5.0) -> None:
    """No process with ``marker`` survives (allowing the kernel a moment to reap)."""
    deadline = time.monotonic() + wait_s
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []


def sync(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` callable from plain test code: a coroutine it returns is run to completion."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        return asyncio.run(result) if inspect.isawaitable(result) else result

    return call


def tools_of(source: Any) -> dict[str, Callable[..., Any]]:
    """The tools of a card or factory by name, callable synchronously."""
    return {fn.__name__: sync(fn) for fn in source.get_tools()}
