"""Flush queued audit rows when the process ends: at interpreter exit (``atexit``) and on
SIGTERM, whose default action (ending the process) then follows as before. Before the flush,
the governed calls still running are audited ``interrupted`` (their process ends under them).

A program's own SIGTERM handler (installed before) is chained: the logs are flushed, not
closed, and the handler decides; calls it unwinds still write their rows, flushed at exit."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import weakref
from types import FrameType
from typing import Any, Protocol

log = logging.getLogger(__name__)

SIGTERM_REASON = "the process received SIGTERM while the call ran"
EXIT_REASON = "the process exited while the call ran"


class Closable(Protocol):
    def close(self, timeout: float = ...) -> None: ...


class Interruptible(Protocol):
    def interrupt_all(self, reason: str) -> None: ...


_live: weakref.WeakSet[Any] = weakref.WeakSet()
_running: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.RLock()  # the SIGTERM handler may run while its thread holds it
_signal_installed = False
_previous: Any = signal.SIG_DFL
_DEADLINE = 5.0  # seconds each log may take to flush when the process ends


def register(owner: Closable, *, signals: bool = True) -> None:
    """Close ``owner`` when the process exits; with ``signals``, also on SIGTERM."""
    with _lock:
        _live.add(owner)
    if signals:
        _install_signal_handler()


def unregister(owner: Closable) -> None:
    with _lock:
        _live.discard(owner)


def register_calls(owner: Interruptible) -> None:
    """Let ``owner`` audit its running calls (``interrupt_all``) before the process ends."""
    with _lock:
        _running.add(owner)


def interrupt_all(reason: str) -> None:
    """Every registered owner writes the rows of the calls it still runs."""
    with _lock:
        owners = list(_running)
    for owner in owners:
        try:
            owner.interrupt_all(reason)
        except Exception:
            log.exception("auditing the running calls of %r failed", owner)


def flush_all() -> None:
    """Flush every registered owner that can, keeping it open."""
    with _lock:
        owners = list(_live)
    for owner in owners:
        flush = getattr(owner, "flush", None)
        try:
            if flush is not None:
                flush(timeout=_DEADLINE)
        except Exception:
            log.exception("flushing %r failed", owner)


def close_all() -> None:
    """Close every registered owner (flushing what it queued)."""
    with _lock:
        owners = list(_live)
        _live.clear()
    for owner in owners:
        try:
            owner.close(timeout=_DEADLINE)
        except Exception:  # one failing log must not keep the others from flushing
            log.exception("flushing %r at shutdown failed", owner)


def _at_exit() -> None:
    interrupt_all(EXIT_REASON)
    close_all()


atexit.register(_at_exit)


def _install_signal_handler() -> None:
    """Chain a SIGTERM handler, once, from the main thread only; a process that ignores
    SIGTERM, or whose handler is not Python's, keeps it."""
    global _signal_installed, _previous
    if _signal_installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):  # pragma: no cover - platforms without SIGTERM
        return
    if previous is signal.SIG_IGN or previous is None:
        return
    _previous = previous
    signal.signal(signal.SIGTERM, _on_sigterm)
    _signal_installed = True


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _signal_installed
    previous = _previous
    if callable(previous):  # the program decides what ends; what it unwinds is still audited
        flush_all()
        previous(signum, frame)
        return
    interrupt_all(SIGTERM_REASON)
    close_all()
    # the default action: end the process by the same signal, as it would have ended
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _signal_installed = False
    os.kill(os.getpid(), signal.SIGTERM)
