"""PostgreSQL connections shared by the stores that keep a team in one database: the team
store (runtime), and the audit trail, pending approvals and rate-limit counters (governance).

One connection per thread (an actor's transaction never waits for another thread's), opened
lazily with a bounded connect timeout; a lost connection becomes :class:`DatabaseUnavailable`
(a retryable error) and the next use reconnects. The URL's password never appears in
messages. Needs the ``postgres`` extra (psycopg 3).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from toolcards._lazy import optional_module
from toolcards.stores.errors import DatabaseClosed, DatabaseUnavailable
from toolcards.stores.location import redact_url

if TYPE_CHECKING:
    import psycopg


def psycopg_module() -> Any:
    """The ``psycopg`` module, or an ImportError saying which extra to install."""
    return optional_module("psycopg", "postgres", "PostgreSQL")


class ThreadState:
    """One thread's connection and transaction."""

    def __init__(self) -> None:
        self.conn: psycopg.Connection[Any] | None = None
        self.depth = 0
        self.after_commit: list[Callable[[], Any]] = []
        self.dirty: set[tuple[str, str]] = set()
        """What the open transaction changed, for a user's ``before_commit``."""

    def drop(self) -> None:
        conn, self.conn = self.conn, None
        self.reset()
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def reset(self) -> None:
        self.depth = 0
        self.after_commit.clear()
        self.dirty.clear()


class Connections:
    """Per-thread connections to one database, with nestable transactions.

    ``before_commit`` runs inside every outermost transaction just before ``COMMIT`` (with
    the thread's state); ``on_rollback`` after a rollback.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        before_commit: Callable[[ThreadState, Any], None] | None = None,
        on_rollback: Callable[[], None] | None = None,
    ) -> None:
        self._url = url
        self.location = redact_url(url)
        self._secret = urlsplit(url).password
        self.connect_timeout = connect_timeout
        self._before_commit = before_commit
        self._on_rollback = on_rollback
        self._local = threading.local()
        self._all: weakref.WeakSet[ThreadState] = weakref.WeakSet()
        self.closed = False

    @property
    def url(self) -> str:
        """The full URL, password included: never print it."""
        return self._url

    def clean(self, text: str) -> str:
        """``text`` with the password replaced."""
        return text.replace(self._secret, "***") if self._secret else text

    def unavailable(self, exc: BaseException) -> DatabaseUnavailable:
        """The retryable error for ``exc`` (a connection failure), without secrets."""
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return DatabaseUnavailable(
            f"PostgreSQL at {self.location} is unavailable ({self.clean(first)}); start the "
            "server or check the URL, then retry"
        )

    def open(self) -> psycopg.Connection[Any]:
        """A new autocommit connection (not this thread's; the caller closes it)."""
        pg = psycopg_module()
        try:
            conn: psycopg.Connection[Any] = pg.connect(
                self._url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
            )
        except pg.Error as exc:
            raise self.unavailable(exc) from None
        return conn

    def state(self) -> ThreadState:
        """This thread's state (created on first use)."""
        state: ThreadState | None = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = ThreadState()
            self._all.add(state)
        return state

    def connection(self) -> psycopg.Connection[Any]:
        """This thread's connection, (re)opened when needed."""
        if self.closed:
            raise DatabaseClosed(f"{self.location} is closed")
        state = self.state()
        if state.conn is None or state.conn.closed:
            state.conn = self.open()
        return state.conn

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        """A cursor on this thread's connection; a lost connection is DatabaseUnavailable."""
        pg = psycopg_module()
        conn = self.connection()
        try:
            with conn.cursor() as cur:
                yield cur
        except pg.OperationalError as exc:
            self.state().drop()
            raise self.unavailable(exc) from None

    @contextmanager
    def transaction(self) -> Iterator[ThreadState]:
        """One atomic transaction on this thread (nestable: inner blocks join the outer)."""
        pg = psycopg_module()
        state = self.state()
        if state.depth == 0:
            try:
                self.connection().execute("BEGIN")
            except pg.OperationalError as exc:
                state.drop()
                raise self.unavailable(exc) from None
        state.depth += 1
        try:
            yield state
        except BaseException:
            state.depth = max(state.depth - 1, 0)
            if state.depth == 0:
                if state.conn is not None:
                    with contextlib.suppress(pg.Error):
                        state.conn.execute("ROLLBACK")
                state.reset()
                if self._on_rollback is not None:
                    self._on_rollback()
            raise
        state.depth -= 1
        if state.depth:
            return
        try:
            if self._before_commit is not None:
                with self.connection().cursor() as cur:
                    self._before_commit(state, cur)
            self.connection().execute("COMMIT")
        except pg.OperationalError as exc:
            state.drop()
            raise self.unavailable(exc) from None
        except BaseException:
            with contextlib.suppress(pg.Error):
                self.connection().execute("ROLLBACK")
            state.reset()
            raise
        callbacks, state.after_commit = state.after_commit, []
        state.dirty.clear()
        for callback in callbacks:
            callback()

    def after_commit(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` when this thread's transaction commits (now, outside of one)."""
        state = self.state()
        if state.depth:
            state.after_commit.append(callback)
            return
        callback()

    def close(self) -> None:
        """Close every thread's connection. Idempotent."""
        self.closed = True
        for state in list(self._all):
            state.drop()
