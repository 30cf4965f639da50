"""Progress from inside a tool, to whoever called it.

A long tool calls :func:`report_progress` now and then; it costs nothing when nobody listens.
A surface that can forward progress (the MCP server, when the client passed a progress token)
binds a reporter around the call with :func:`progress_reporter`. The binding is a context
variable, so it reaches sync tools in their worker threads (they run in a copy of the
caller's context) and async tools alike::

    def grep(pattern: str) -> list[str]:
        for i, path in enumerate(paths):
            report_progress(i, len(paths), f"searching {path.name}")
            ...
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

ProgressReporter = Callable[[float, float | None, str | None], None]
"""``(progress, total, message)``; must be thread-safe and must not block."""

_reporter: contextvars.ContextVar[ProgressReporter | None] = contextvars.ContextVar(
    "toolcards_progress", default=None
)


def report_progress(
    progress: float, total: float | None = None, message: str | None = None
) -> None:
    """Tell the caller how far the current tool call is (``progress`` of ``total``, both in any
    unit; ``progress`` should grow). A no-op when the caller asked for no progress. Never raises."""
    reporter = _reporter.get()
    if reporter is None:
        return
    try:
        reporter(float(progress), None if total is None else float(total), message)
    except Exception:  # progress is advisory: a broken listener never fails the tool
        return


def progress_enabled() -> bool:
    """True when someone listens (a tool may skip computing an expensive total otherwise)."""
    return _reporter.get() is not None


@contextlib.contextmanager
def progress_reporter(reporter: ProgressReporter | None) -> Iterator[None]:
    """Send :func:`report_progress` calls made in this context to ``reporter``."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)
