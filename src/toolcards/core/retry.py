"""Turning a card's ``RetriableError`` (or ``TransientError``) into the retry exception of the
agent framework."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from toolcards.core.errors import RetriableError, TransientError

ToolFunc = Callable[..., Any]


def wrap_retriable(fn: ToolFunc, retry_exception: type[Exception]) -> ToolFunc:
    """Wrap ``fn`` so a ``RetriableError`` or ``TransientError`` (sync or async) is raised as
    ``retry_exception``."""
    retriable = (RetriableError, TransientError)

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except retriable as exc:
                raise retry_exception(str(exc)) from exc

        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except retriable as exc:
            raise retry_exception(str(exc)) from exc

    return wrapper
