"""Start tasks in an anyio task group from any thread.

Team events and log records arrive on other threads. A loop callback is not a task, and anyio
refuses to start a task from one when ``sniffio`` is installed (it cannot tell which async
library runs). A :class:`Spawner` keeps one pump task inside the group: other threads hand it
coroutine functions through the loop, and the pump starts them as the group's children, so
they are cancelled with the group and their errors are the group's.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from anyio.abc import TaskGroup

_Job = tuple[Callable[..., Coroutine[Any, Any, Any]], tuple[Any, ...]]


class Spawner:
    """Starts ``fn(*args)`` in ``tasks`` when :meth:`spawn` is called from any thread.

    Create it inside a task of the group's event loop; :meth:`close` stops the pump (jobs
    handed over afterwards are dropped)."""

    def __init__(self, tasks: TaskGroup) -> None:
        self._tasks = tasks
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._scope = anyio.CancelScope()
        self._closed = False
        tasks.start_soon(self._pump)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Start ``fn(*args)`` as a child of the group (a no-op once closed)."""
        if not self._closed:
            self.call(self._queue.put_nowait, (fn, args))

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run the plain function ``fn(*args)`` on the loop's thread: now when called there,
        otherwise soon (dropped when the loop has closed)."""
        if threading.get_ident() == self._thread:
            fn(*args)
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        """Stop starting jobs (call on the loop's thread)."""
        self._closed = True
        self._scope.cancel()

    async def _pump(self) -> None:
        with self._scope:
            while True:
                fn, args = await self._queue.get()
                self._tasks.start_soon(fn, *args)
