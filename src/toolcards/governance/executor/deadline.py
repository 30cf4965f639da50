"""Running a tool's coroutine under its deadline.

Two ways, both on public asyncio only:

* :func:`with_deadline` starts the coroutine inline (one that finishes without suspending
  needs no timer at all) and cancels it at the deadline, waiting for it to unwind.
* :func:`abandoning_deadline` runs the coroutine as a task and, at the deadline, stops
  waiting for it. A sync tool that pydantic-ai runs in a worker thread cannot be interrupted;
  its thread runs to completion in the background and its result is discarded, so the call
  answers "timed out" at the deadline instead of when the thread returns.
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # asyncio is imported by the first call (loaded by its loop already)
    import asyncio

_ABANDONED: set[asyncio.Task[Any]] = set()
"""Tasks given up at their deadline, held until they end so they are not collected early."""


async def with_deadline(coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
    """Await ``coro`` under a deadline, cancelling it (and waiting for it) when it passes."""
    try:
        pending = coro.send(None)
    except StopIteration as done:
        return done.value
    except BaseException:
        coro.close()
        raise
    import asyncio

    async with asyncio.timeout(timeout):
        return await _resume(coro, pending)


async def abandoning_deadline(coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
    """Await ``coro`` under a deadline; when it passes (or the caller is cancelled), cancel
    the coroutine's task without waiting for it and raise at once."""
    import asyncio

    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:
        _abandon(task)
        raise
    if not done:
        _abandon(task)
        raise TimeoutError(f"the tool did not finish within {timeout:g} s")
    return task.result()


def abandoned_count() -> int:
    """How many abandoned tasks have not ended yet (their threads still run)."""
    return len(_ABANDONED)


def _abandon(task: asyncio.Task[Any]) -> None:
    task.cancel()
    if task.done():
        _consume(task)
        return
    _ABANDONED.add(task)
    task.add_done_callback(_consume)


def _consume(task: asyncio.Task[Any]) -> None:
    """Retrieve an abandoned task's ending so asyncio does not report it as never retrieved."""
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], pending: Any) -> Generator[Any, Any, Any]:
    """Go on driving a coroutine that was started by hand and suspended on ``pending``."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                pending = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as done:
                return done.value
