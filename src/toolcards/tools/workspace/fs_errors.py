"""Filesystem errors of a workspace tool, as messages the model can act on."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from toolcards.core.errors import RetriableError


def retry_on_os_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn filesystem errors into retryable messages; other errors propagate."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (FileNotFoundError, NotADirectoryError) as exc:
            name = os.path.basename(str(exc.filename or "")) or "a path"
            raise RetriableError(f"not found: {name}") from None
        except PermissionError:
            raise RetriableError("permission denied by the operating system") from None
        except OSError as exc:
            raise RetriableError(f"filesystem error: {exc.strerror or exc}") from None

    return wrapper
