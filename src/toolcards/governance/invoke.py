"""Running a tool callable for the executor: async functions awaited, sync ones in worker
threads of their own (abandoned, not killed, on timeout)."""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from toolcards.core.threads import leave_signals_to_the_main_thread

if TYPE_CHECKING:
    from pydantic_ai import RunContext

__all__ = ["Invoke", "direct_invoke", "function_invoke", "tool_threads"]

Invoke = Callable[[dict[str, Any]], Coroutine[Any, Any, Any]]

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def tool_threads() -> ThreadPoolExecutor:
    """The worker threads sync tools run in (created on first use; they leave process
    signals to the main thread)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                workers = min(32, (os.cpu_count() or 1) + 4)
                _pool = ThreadPoolExecutor(
                    workers,
                    thread_name_prefix="toolcards-tool",
                    initializer=leave_signals_to_the_main_thread,
                )
    return _pool


def direct_invoke(schema: Any, ctx: RunContext[Any] | None) -> Invoke:
    """Call a pydantic-ai ``FunctionSchema``'s function with validated arguments: async
    functions awaited, sync ones in a worker thread (abandoned, not killed, on timeout).
    ``ctx`` is passed to a function that takes a ``RunContext`` (None: it takes none)."""
    if schema.takes_ctx and ctx is None:
        raise ValueError(f"{schema.function.__name__} takes a RunContext: give one")
    if schema.positional_fields or schema.var_positional_field:

        async def via_schema(args: dict[str, Any]) -> Any:
            return await schema.call(args, ctx)

        return via_schema
    lead = (ctx,) if schema.takes_ctx else ()
    return function_invoke(schema.function, schema.is_async, lead)


def function_invoke(fn: Callable[..., Any], is_async: bool, lead: tuple[Any, ...] = ()) -> Invoke:
    """Call ``fn(*lead, **args)``: awaited when ``is_async``, else in a worker thread."""
    if is_async:

        async def call_async(args: dict[str, Any]) -> Any:
            return await fn(*lead, **args)

        return call_async

    async def call_sync(args: dict[str, Any]) -> Any:
        import asyncio  # lazy: ~4x python -c pass; listing tools never loads it

        loop = asyncio.get_running_loop()
        job = functools.partial(fn, *lead, **args)
        result = await loop.run_in_executor(tool_threads(), contextvars.copy_context().run, job)
        if inspect.isawaitable(result):
            result = await result
        return result

    return call_sync
