"""Flush queued audit rows when the process ends: at interpreter exit (``atexit``) and on
SIGTERM, whose default action (ending the process) then follows as before."""

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


class Closable(Protocol):
    def close(self, timeout: float = ...) -> None: ...


_live: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()
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


atexit.register(close_all)


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
    close_all()
    previous = _previous
    if callable(previous):
        previous(signum, frame)
        return
    # the default action: end the process by the same signal, as it would have ended
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _signal_installed = False
    os.kill(os.getpid(), signal.SIGTERM)
