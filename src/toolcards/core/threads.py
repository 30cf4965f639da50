"""Background threads that leave the process's signals to its main thread.

A signal sent to a process (SIGTERM from a supervisor, Ctrl-C's SIGINT, SIGHUP) is delivered
by the kernel to any one thread that does not block it. Python runs its handler in the main
thread, but only once that thread runs Python again: when the signal landed on a background
thread while the main thread waited in ``epoll`` (an event loop awaiting a sync tool's
thread), the handler, and with it the audit row of the interrupted call and the process's
end, waited until the tool returned. Every thread toolcards starts blocks these signals, so
they reach the main thread, whose wait they interrupt at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["PROCESS_SIGNALS", "background_thread", "leave_signals_to_the_main_thread"]

PROCESS_SIGNALS = frozenset(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def leave_signals_to_the_main_thread() -> None:
    """Block :data:`PROCESS_SIGNALS` in the calling thread (a thread pool's initializer)."""
    if threading.current_thread() is not threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, PROCESS_SIGNALS)


def background_thread(
    target: Callable[..., Any], *, name: str, args: tuple[Any, ...] = (), daemon: bool = True
) -> threading.Thread:
    """A thread (not started) running ``target(*args)`` with the process signals blocked."""

    def run() -> None:
        leave_signals_to_the_main_thread()
        target(*args)

    return threading.Thread(target=run, name=name, daemon=daemon)
