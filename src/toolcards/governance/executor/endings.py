"""Every governed call that started ends in exactly one audit row.

The executor opens an entry in its :class:`InFlight` book when a call starts (identity
resolved, pipeline entered) and takes it out again with the call's one row. Taking an entry
out is the right to write that row, and only one taker gets it: the call's own ending (a
result, a cancellation, an interrupt) or the process's (SIGTERM, interpreter exit), which
writes ``interrupted`` for the calls still running. So a call is never audited twice, and
never not at all while its process ends cleanly or by SIGTERM.

Call ids: a call that comes without one gets :func:`fresh_call_id` at its start, so every
row of the call (approval request and decision, the final row) carries the same id.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import sys
from typing import Any

CANCELLED = "cancelled"
"""The outcome of a call whose task was cancelled (the caller withdrew it)."""
INTERRUPTED = "interrupted"
"""The outcome of a call ended by its process: KeyboardInterrupt, SystemExit, SIGTERM, exit."""
TIMEOUT = "timeout"
"""The audit outcome of a call that ran out of time (the result's outcome is ``error``)."""
SIGTERM_REASON = "the process received SIGTERM while the call ran"
EXIT_REASON = "the process exited while the call ran"

_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")
_MAX_HINT = 40


def _new_prefix() -> str:
    return secrets.token_hex(6)


_prefix = _new_prefix()
_numbers = itertools.count(1)


def _reseed() -> None:  # a forked child must not repeat its parent's ids
    global _prefix, _numbers
    _prefix, _numbers = _new_prefix(), itertools.count(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed)


def fresh_call_id(hint: object = None) -> str:
    """A call id no other call of any process has: ``tc-<process>-<n>``, or
    ``<hint>-<process>-<n>`` (``hint`` cut to 40 safe characters, e.g. ``mcp-7``)."""
    head = "tc" if hint is None else _UNSAFE.sub("_", str(hint)[:_MAX_HINT])
    return f"{head}-{_prefix}-{next(_numbers)}"


def abrupt_ending(exc: BaseException) -> tuple[str, str]:
    """The audit outcome and error text of a call that ended by ``exc`` without a result."""
    asyncio = sys.modules.get("asyncio")  # a task's cancellation: asyncio is loaded then
    if isinstance(exc, GeneratorExit) or (
        asyncio is not None and isinstance(exc, asyncio.CancelledError)
    ):
        return CANCELLED, "cancelled before it finished"
    if isinstance(exc, Exception):
        return "error", f"{type(exc).__name__}: {exc}"
    return INTERRUPTED, f"interrupted by {type(exc).__name__}"


class InFlight:
    """The calls of one executor that started and have no row yet: key -> (call, decision).

    Single dict operations only (atomic under the GIL), so a signal handler on the main thread
    and calls on other threads may take entries concurrently; each entry is taken once.
    """

    __slots__ = ("_calls", "_keys")

    def __init__(self) -> None:
        self._calls: dict[int, tuple[Any, Any]] = {}
        self._keys = itertools.count(1)

    def new_key(self) -> int:
        return next(self._keys)

    def open(self, call: Any) -> None:
        """Enter ``call`` (it carries its key, from :meth:`new_key`)."""
        self._calls[call.key] = (call, None)

    def note(self, key: int, call: Any, decision: Any) -> None:
        """The call as it stands, and the policy's decision (for a row written for it)."""
        if key in self._calls:
            self._calls[key] = (call, decision)

    def take(self, key: int) -> bool:
        """True once: whoever gets True writes the call's row."""
        return self._calls.pop(key, None) is not None

    def take_all(self) -> list[tuple[Any, Any]]:
        """Every open entry (taken: their rows are the caller's to write)."""
        taken = []
        for key in list(self._calls.copy()):
            entry = self._calls.pop(key, None)
            if entry is not None:
                taken.append(entry)
        return taken

    def __len__(self) -> int:
        return len(self._calls)
