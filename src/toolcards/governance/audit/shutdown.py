"""Flush queued audit rows when the process ends: at interpreter exit (``atexit``) and on
SIGTERM, whose default action (ending the process) then follows as before. Before the flush,
the governed calls still running are audited ``interrupted`` (their process ends under them).

Other threads go on meanwhile. The handler first marks the process :data:`ending`: a call
that would start is refused (with its ``interrupted`` row). Rows of calls that ended just
before are awaited (a second at most), also on the handler's own thread: a handler that
interrupts its thread while that thread writes a call's row returns, and the process ends
once the row is written (:data:`writing`). A row written after its log closed goes to the
journal (the next process of the trail writes it).

A program's own SIGTERM handler (installed before) is chained: the logs are flushed, not
closed, and the handler decides; calls it unwinds still write their rows, flushed at exit.

A Python handler runs only once the main thread runs Python again. A signal that arrives just
before an event loop's wait begins (or on another thread) leaves that wait asleep, and with it
the handler and the process's end, until something else wakes the loop: for an idle loop,
never. :class:`LoopWake` closes that gap for the loops governed calls run in, with the wake-up
descriptor Python's signal module writes each signal to (``signal.set_wakeup_fd``)."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import threading
import time
import weakref
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger(__name__)

SIGTERM_REASON = "the process received SIGTERM while the call ran"
EXIT_REASON = "the process exited while the call ran"
ENDING_REASON = "the process was ending (SIGTERM) when the call started"


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
_ROWS_WAIT = 1.0  # seconds the handler waits for the rows other threads are writing

ending = False
"""SIGTERM is ending the process (its default action follows the flush): no call starts."""
writing: set[int] = set()
"""The threads writing the row of a call that ended (:meth:`.CallBook.end`): the call is no
longer among those audited ``interrupted``, so the SIGTERM handler waits for its row."""
deferred: int | None = None
"""The thread the SIGTERM handler interrupted while it wrote a row: it ends the process
(:func:`end_process`) once the row is written."""

if hasattr(os, "register_at_fork"):  # a forked child has none of its parent's other threads
    os.register_at_fork(after_in_child=writing.clear)


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
    loop_wake.close()


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


class LoopWake:
    """Makes every signal wake the main thread's event loops that governed calls run in.

    Its socket pair's writing end is the process's wake-up descriptor (the signal module
    writes each signal's number to it, from whichever thread the signal lands on), and its
    reading end is watched by each such loop: a signal wakes the loop, which then runs the
    handler. A program (or asyncio's own ``add_signal_handler``) that set a descriptor of its
    own keeps it: its loop wakes already."""

    def __init__(self) -> None:
        self._pair: tuple[socket.socket, socket.socket] | None = None
        self._loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """``loop`` runs a governed call: if it is the main thread's, signals wake it."""
        if not _signal_installed or threading.current_thread() is not threading.main_thread():
            return
        try:
            if loop in self._loops:
                return
            self._loops.add(loop)
            reading, writing = self._pair or self._open()
            mine = writing.fileno()
            current = signal.set_wakeup_fd(mine, warn_on_full_buffer=False)
            if current not in (-1, mine):  # someone else's: theirs again, with what it missed
                signal.set_wakeup_fd(current)
                self._forward(reading, current)
                return
            loop.add_reader(reading.fileno(), self._drain, reading)
        except (OSError, ValueError, TypeError, RuntimeError, NotImplementedError) as exc:
            log.debug("signals will not wake this event loop: %s", exc)

    def _open(self) -> tuple[socket.socket, socket.socket]:
        pair = socket.socketpair()
        for end in pair:
            end.setblocking(False)
        self._pair = pair
        return pair

    def close(self) -> None:
        """At exit: the pair closed, and no longer the wake-up descriptor."""
        pair, self._pair = self._pair, None
        if pair is None:
            return
        try:
            if threading.current_thread() is threading.main_thread():
                current = signal.set_wakeup_fd(-1)
                if current not in (-1, pair[1].fileno()):
                    signal.set_wakeup_fd(current)
        except ValueError:
            pass
        for end in pair:
            end.close()

    @staticmethod
    def _drain(reading: socket.socket) -> None:
        """Empty the pair (the wake-up itself is the point: the handler runs after it)."""
        try:
            while reading.recv(4096):
                pass
        except OSError:
            pass

    @staticmethod
    def _forward(reading: socket.socket, fd: int) -> None:
        """Signals written to the pair while it was the descriptor go on to ``fd``."""
        try:
            missed = reading.recv(4096)
            if missed:
                os.write(fd, missed)
        except OSError:
            pass


loop_wake = LoopWake()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global ending, deferred
    previous = _previous
    if callable(previous):  # the program decides what ends; what it unwinds is still audited
        flush_all()
        previous(signum, frame)
        return
    if ending:  # a second signal while the first one ends the process
        return
    ending = True
    me = threading.get_ident()
    if me in writing:  # this thread was writing a row: it ends the process once written
        deferred = me
        return
    end_process()


def end_process() -> None:
    """The calls still running audited ``interrupted``, the rows other threads are writing
    awaited, every log closed; then the process ends by SIGTERM, as it would have."""
    global _signal_installed, deferred
    deferred = None  # once: the rows interrupt_all writes here must not end it again
    interrupt_all(SIGTERM_REASON)
    _rows_written()
    close_all()
    # the default action: end the process by the same signal, as it would have ended
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _signal_installed = False
    os.kill(os.getpid(), signal.SIGTERM)


def _rows_written() -> None:
    """Wait, boundedly, until no other thread writes a row (a thread stuck in a write does
    not keep the process from ending)."""
    me = threading.get_ident()
    deadline = time.monotonic() + _ROWS_WAIT
    while any(thread != me for thread in writing.copy()) and time.monotonic() < deadline:
        time.sleep(0.001)
