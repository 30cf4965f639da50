"""Where a governed call made on behalf of another run may ask its approvals: the calling run's
channel (see ``toolcards.governance.approvals.nested``), as plumbing below every layer.

While a tool that runs other agents is running, :data:`calling_run` holds the calling run's
channel; a sub-agent in the same process inherits it with its context, and a team member
handling a message the tool sent finds it by the token the message carries (:func:`find`).
Tokens are random and known only in this process; a channel is forgotten with its call.
"""

from __future__ import annotations

import secrets
import threading
import weakref
from contextvars import ContextVar
from typing import Any

__all__ = ["calling_run", "find", "remember"]

calling_run: ContextVar[Any] = ContextVar("toolcards_calling_run", default=None)
"""The calling run's channel while a delegating tool runs (None: no run can be asked)."""

_open: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_lock = threading.Lock()


def remember(channel: Any) -> str:
    """A token naming ``channel`` in this process while it lives."""
    token = secrets.token_hex(16)
    with _lock:
        _open[token] = channel
    return token


def find(token: str | None) -> Any:
    """The channel ``token`` names (None: unknown here, or gone)."""
    if not token:
        return None
    with _lock:
        return _open.get(token)
