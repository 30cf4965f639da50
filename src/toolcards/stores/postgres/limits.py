"""How long PostgreSQL may keep a caller waiting: connection settings and a client deadline.

Every connection sets a server-side ``statement_timeout`` and
``idle_in_transaction_session_timeout``, and TCP keepalives (``keepalives_idle``,
``keepalives_interval``, ``keepalives_count``, ``tcp_user_timeout``), so a stuck statement, a
session left open in a transaction and a dead peer all end. A server that stops answering
altogether (frozen, or a path that drops packets) cannot enforce its own timeout, so every
statement is also bounded here: once it has waited the statement timeout plus
:attr:`Timeouts.grace`, :class:`Deadlines` shuts its socket down and the caller gets a
retryable error instead of waiting for ever.

Values given in the URL win over these defaults; they use libpq's names, e.g.
``postgresql://u@host/db?keepalives_idle=5&options=-c%20statement_timeout%3D5s``
(``statement_timeout=0`` turns both the server's and the client's bound off).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from toolcards.core.threads import background_thread

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*$")
_STATEMENT_TIMEOUT = re.compile(r"(?:-c\s*|--)statement[_-]timeout\s*=\s*(\S+)")


@dataclass(frozen=True)
class Timeouts:
    """Bounds of every PostgreSQL connection (seconds)."""

    statement: float = 30.0
    """``statement_timeout``: the longest one statement (a lock wait included) may run."""
    idle_in_transaction: float = 60.0
    """``idle_in_transaction_session_timeout``: a session idle inside a transaction this
    long is ended by the server (its locks are released)."""
    keepalives_idle: int = 10
    keepalives_interval: int = 5
    keepalives_count: int = 3
    grace: float = 2.0
    """How much longer than the statement timeout the client waits for an answer."""

    def connect_options(self, url: str) -> tuple[dict[str, Any], float | None]:
        """The connect keywords for ``url`` (its own values kept) and the client's bound on
        one statement (None: unbounded, when the URL turns the statement timeout off)."""
        given = conninfo_to_dict(url)
        options = str(given.get("options") or "")
        found = _STATEMENT_TIMEOUT.search(options)
        statement = self.statement if found is None else _seconds(found.group(1))
        extra = []
        if found is None:
            extra.append(f"-c statement_timeout={_ms(self.statement)}")
        if "idle_in_transaction_session_timeout" not in options.replace("-", "_"):
            extra.append(f"-c idle_in_transaction_session_timeout={_ms(self.idle_in_transaction)}")
        kwargs: dict[str, Any] = {}
        if extra:
            kwargs["options"] = " ".join([options, *extra]).strip()
        defaults = {
            "keepalives": 1,
            "keepalives_idle": self.keepalives_idle,
            "keepalives_interval": self.keepalives_interval,
            "keepalives_count": self.keepalives_count,
            "tcp_user_timeout": 1000
            * (self.keepalives_idle + self.keepalives_interval * self.keepalives_count),
        }
        kwargs.update({k: v for k, v in defaults.items() if k not in given})
        bound = None if statement is None or statement <= 0 else statement + self.grace
        return kwargs, bound


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _seconds(text: str) -> float | None:
    """A PostgreSQL duration (``5000``, ``5s``, ``1min``; no unit: milliseconds)."""
    found = _DURATION.match(text.strip("'\""))
    if found is None:
        return None
    return float(found.group(1)) * _UNITS[found.group(2) or "ms"]


class Deadlines:
    """Cuts the connection of a statement that waited past its deadline (one thread per
    process, started on first use, asleep until the earliest deadline)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[float, int, Callable[[], None]]] = {}
        self._tokens = itertools.count()
        self._wake_at = math.inf
        self._pid = 0

    def arm(self, seconds: float, fileno: int, expired: Callable[[], None]) -> int:
        """Shut the socket ``fileno`` down (after calling ``expired``) in ``seconds`` unless
        :meth:`disarm` comes first; the token for it."""
        deadline = time.monotonic() + seconds
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked child: (re)start
                self._pid = os.getpid()
                self._armed.clear()
                self._wake_at = math.inf
                background_thread(self._run, name="toolcards-pg-deadlines").start()
            token = next(self._tokens)
            self._armed[token] = (deadline, fileno, expired)
            if deadline < self._wake_at:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> None:
        """The statement answered: forget its deadline (the socket is not touched after)."""
        with self._cond:
            self._armed.pop(token, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                self._fire(now)
                self._wake_at = min((d for d, _, _ in self._armed.values()), default=math.inf)
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)

    def _fire(self, now: float) -> None:
        """Cut the connections past their deadline. A method of its own: a callback (and the
        thread state it holds) must not stay alive in the sleeping loop's variables."""
        for token, (deadline, fileno, expired) in list(self._armed.items()):
            if deadline <= now:
                del self._armed[token]
                expired()
                _shut_down(fileno)


def _shut_down(fileno: int) -> None:
    """End the TCP (or Unix) connection behind ``fileno``; its owner reads end-of-file."""
    with contextlib.suppress(OSError):
        sock = socket.socket(fileno=os.dup(fileno))
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


DEADLINES = Deadlines()
"""The process's deadline keeper."""
