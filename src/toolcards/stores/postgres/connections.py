"""PostgreSQL connections shared by the stores that keep a team in one database: the team
store (runtime), and the audit trail, pending approvals and rate-limit counters (governance).

One connection per thread (an actor's transaction never waits for another thread's), opened
lazily with a bounded connect timeout, server-side timeouts, TCP keepalives and a client-side
deadline on every statement (:mod:`toolcards.stores.postgres.limits`). A lost connection
becomes :class:`DatabaseUnavailable` (a retryable error) and the next use reconnects; a
connection found dead when a transaction begins, or when a read runs outside one, is
reopened once by itself (nothing was sent yet, or nothing was written). A connection lost
inside a transaction breaks that transaction: nothing more of it runs, nothing of it
commits. A statement the server ended on a connection that stands (the statement timeout,
most often waiting for a lock another session holds; a lock timeout, a deadlock, a
serialization conflict) is :class:`DatabaseBusy`, saying which: the connection is kept, and
the transaction it ran in can only roll back. Inside a transaction, a write whose result
nobody reads can wait (:meth:`Connections.later`): it goes with the transaction's next
statement, or with its ``COMMIT``, in one round trip (the server runs them and commits
without waiting for the client: a row they lock is held for no client round trip). A
connection lost while that last round trip was on its way leaves the outcome unknown, as
for a ``COMMIT`` alone. The URL's password never appears in messages. Needs the
``postgres`` extra.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

try:
    import psycopg
except ImportError as exc:  # the postgres extra is not installed
    raise ImportError(
        "PostgreSQL needs psycopg: pip install 'toolcards[postgres]'", name="psycopg"
    ) from exc

from toolcards.stores.errors import DatabaseBusy, DatabaseClosed, DatabaseUnavailable
from toolcards.stores.location import redact_url
from toolcards.stores.postgres.limits import DEADLINES, Timeouts

T = TypeVar("T")

Later = Callable[[str, tuple[Any, ...]], None]
"""Queues one write of the open transaction (``%s`` placeholders); see
:meth:`Connections.later`."""


def placeholders(cur: Any) -> Callable[[str, tuple[Any, ...]], Any]:
    """Runs SQL shared with SQLite (``?`` placeholders, see :mod:`toolcards.stores.events_sql`)
    on a psycopg cursor, and returns the cursor (a statement without parameters is sent as
    it is)."""

    def execute(sql: str, params: tuple[Any, ...]) -> Any:
        cur.execute(sql.replace("?", "%s"), params or None)
        return cur

    return execute


class ThreadState:
    """One thread's connection and transaction."""

    def __init__(self) -> None:
        self.conn: psycopg.Connection[Any] | None = None
        self.depth = 0
        self.after_commit: list[Callable[[], Any]] = []
        self.dirty: set[tuple[str, str]] = set()
        """What the open transaction changed, for a user's ``before_commit``."""
        self.keys: dict[tuple[str, str], dict[str, bool]] = {}
        """The state keys it wrote, by (team, actor): True for a delete, False for a put."""
        self.later: list[tuple[str, tuple[Any, ...]]] = []
        """Writes whose results nobody reads, sent with the next statement or before the
        commit."""
        self.events: list[tuple[str, tuple[Any, ...]]] = []
        """The events it appended, by team, numbered and inserted just before ``COMMIT``."""
        self.locked: dict[tuple[str, str], Any] = {}
        """The actors it holds the lock of, by (team, actor), with what the store read of
        them when the lock was granted."""
        self.broken = False
        """The connection was lost inside the open transaction: it can only end."""
        self.failed: DatabaseBusy | None = None
        """What the server ended inside the open transaction (the connection stands): the
        transaction can only roll back."""
        self.timed_out = False
        """The last connection was cut by the client's deadline (the server did not answer)."""
        self.lost_writes = 0
        """Transactions of this thread that tried to write and did not commit."""

    def __del__(self) -> None:
        # A thread that ended leaves its state to the collector: its connection closes here
        # instead of reaching psycopg's finaliser open (a ResourceWarning there).
        conn = self.conn
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):
                conn.close()

    def drop(self) -> None:
        """Forget a lost connection; inside a transaction, the transaction is broken."""
        conn, self.conn = self.conn, None
        if self.depth:
            self.broken = True
        else:
            self.reset()
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def reset(self) -> None:
        self.depth = 0
        self.after_commit.clear()
        self.ended()
        self.broken = False
        self.failed = None

    def ended(self) -> None:
        """Forget what the transaction that ended wrote and held."""
        self.later.clear()
        self.dirty.clear()
        self.keys.clear()
        self.events.clear()
        self.locked.clear()


class Connections:
    """Per-thread connections to one database, with nestable transactions.

    ``before_commit`` runs inside every outermost transaction just before ``COMMIT`` (with
    the thread's state and a function that queues its statements: they go in one round
    trip, with the writes still waiting and the ``COMMIT``); ``on_rollback`` after a
    rollback. ``timeouts``
    bound every connection (values in the URL win).
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        timeouts: Timeouts | None = None,
        before_commit: Callable[[ThreadState, Later], None] | None = None,
        on_rollback: Callable[[], None] | None = None,
    ) -> None:
        self._url = url
        self.location = redact_url(url)
        self._secret = urlsplit(url).password
        self.connect_timeout = connect_timeout
        limits = timeouts or Timeouts()
        self._options, self.statement_bound = limits.connect_options(url)
        self.statement_timeout = (
            None if self.statement_bound is None else self.statement_bound - limits.grace
        )
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

    def unavailable(
        self, exc: BaseException, state: ThreadState | None = None, *, unknown: bool = False
    ) -> DatabaseUnavailable:
        """The retryable error for ``exc`` (a connection failure), without secrets."""
        if state is not None and state.timed_out:
            first = f"no answer within {self.statement_bound:g}s"
        else:
            text = str(exc).strip()
            first = self.clean(text.splitlines()[0]) if text else repr(exc)
        outcome = (
            "; outcome unknown: the commit was sent and no answer came, so the change may "
            "have been applied (a retry with the same call id returns its recorded result; "
            "otherwise read before you retry)"
            if unknown
            else ", then retry"
        )
        return DatabaseUnavailable(
            f"PostgreSQL at {self.location} is unavailable ({first}); start the server or "
            f"check the URL{outcome}"
        )

    def busy(self, exc: BaseException) -> DatabaseBusy:
        """The retryable error for a statement the server ended (``exc``) on a connection
        that stands: what happened, in words, with the server's own first line."""
        text = str(exc).strip()
        said = self.clean(text.splitlines()[0]) if text else type(exc).__name__
        code = getattr(exc, "sqlstate", None)
        if code == "57014" and "statement timeout" in said:
            limit = self.statement_timeout
            what = (
                "a statement ran past the statement timeout"
                + (f" ({limit:g}s)" if limit else "")
                + ", most likely waiting for a lock another session holds"
            )
        elif code == "57014":
            what = "a statement was cancelled (pg_cancel_backend, or a shutdown under way)"
        elif code == "55P03":
            what = "a lock another session holds was not granted within lock_timeout"
        elif code == "40P01":
            what = "a statement deadlocked with another session, which went on"
        elif code == "40001":
            what = "a concurrent change by another session conflicted with the transaction"
        else:
            what = "the server ended a statement"
        return DatabaseBusy(
            f"PostgreSQL at {self.location}: {what} ({said}); the connection stays open and "
            "nothing of the transaction was committed; retry"
        )

    def _failed(
        self, exc: BaseException, state: ThreadState, conn: psycopg.Connection[Any]
    ) -> DatabaseUnavailable:
        """The error for ``exc``, raised by a statement on ``conn``. When the server ended
        the statement and the connection stands, it is kept (inside a transaction, the
        transaction can only roll back now); otherwise the connection is lost: dropped."""
        if conn.broken or conn.closed or state.timed_out:
            state.drop()
            return self.unavailable(exc, state)
        error = self.busy(exc)
        if state.depth:
            state.failed = error
        return error

    def _broken(self) -> DatabaseUnavailable:
        return DatabaseUnavailable(
            f"PostgreSQL at {self.location} is unavailable (the connection was lost during the "
            "transaction; nothing of it was committed); retry"
        )

    def open(self) -> psycopg.Connection[Any]:
        """A new autocommit connection (not this thread's; the caller closes it)."""
        try:
            conn: psycopg.Connection[Any] = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=max(1, round(self.connect_timeout)),
                **self._options,
            )
        except psycopg.Error as exc:
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
        if state.broken:
            raise self._broken()
        if state.failed is not None:
            raise state.failed
        if state.conn is None or state.conn.closed:
            state.conn = self.open()
            state.timed_out = False
        return state.conn

    @contextmanager
    def bounded(self, state: ThreadState, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """Cut ``conn`` when the block waits longer than :attr:`statement_bound`."""
        if self.statement_bound is None:
            yield
            return
        token = DEADLINES.arm(self.statement_bound, conn.fileno(), lambda: _expired(state))
        try:
            yield
        finally:
            DEADLINES.disarm(token)

    def later(self, sql: str, params: tuple[Any, ...]) -> None:
        """Inside a transaction: send the write ``sql`` with the transaction's next statement,
        or just before its ``COMMIT``, in the same round trip (nobody reads its result; its
        error, if any, ends the transaction there). Outside one: run it now."""
        state = self.state()
        if not state.depth:
            with self.cursor() as cur:
                cur.execute(sql, params)
            return
        self.connection()  # a transaction that was lost or ended by the server takes no more
        state.later.append((sql, params))

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        """A cursor on this thread's connection (the writes waiting go first, in the same
        round trip as what it runs); a lost connection is DatabaseUnavailable, a statement
        the server ended DatabaseBusy."""
        state = self.state()
        conn = self.connection()
        try:
            with self.bounded(state, conn), conn.cursor() as cur:
                if not state.later:
                    yield cur
                    return
                with conn.pipeline():
                    self._send_later(state, conn)
                    yield cur
        except psycopg.OperationalError as exc:
            raise self._failed(exc, state, conn) from None

    @staticmethod
    def _send_later(state: ThreadState, conn: psycopg.Connection[Any]) -> None:
        """Send the waiting writes (inside a pipeline: their answers come with the next
        statement's)."""
        writes, state.later = state.later, []
        with conn.cursor() as cur:
            for sql, params in writes:
                cur.execute(sql, params)

    def read(self, query: Callable[[Any], T]) -> T:
        """``query(cursor)``, a read. Outside a transaction, a connection that turns out to
        have been lost (a server restart) is reopened and the read runs once more."""
        state = self.state()
        again = state.depth == 0 and state.conn is not None and not state.conn.closed
        try:
            with self.cursor() as cur:
                return query(cur)
        except DatabaseBusy:
            raise
        except DatabaseUnavailable:
            if not again or state.timed_out:
                raise
        with self.cursor() as cur:
            return query(cur)

    def _begin(self, state: ThreadState) -> None:
        """``BEGIN`` on this thread's connection; once more on a new one when the connection
        it had was lost (nothing of the transaction was sent)."""
        again = state.conn is not None and not state.conn.closed
        while True:
            conn = self.connection()
            try:
                with self.bounded(state, conn):
                    conn.execute("BEGIN")
                return
            except psycopg.OperationalError as exc:
                error = self._failed(exc, state, conn)
                if isinstance(error, DatabaseBusy) or not again or state.timed_out:
                    raise error from None
                again = False

    @contextmanager
    def transaction(self) -> Iterator[ThreadState]:
        """One atomic transaction on this thread (nestable: inner blocks join the outer)."""
        state = self.state()
        if state.depth == 0:
            self._begin(state)
        state.depth += 1
        try:
            yield state
        except BaseException:
            state.depth -= 1
            if state.depth == 0:
                self._abandon(state)
            raise
        state.depth -= 1
        if state.depth:
            return
        if state.broken:  # the block swallowed the loss of its connection
            self._abandon(state)
            raise self._broken()
        if state.failed is not None:  # the block swallowed the server's ending of a statement
            failed = state.failed
            self._abandon(state)
            raise failed
        conn = self.connection()
        try:
            if self._before_commit is not None:
                self._before_commit(state, lambda sql, params: state.later.append((sql, params)))
            with self.bounded(state, conn):
                if not state.later:
                    conn.execute("COMMIT")
                else:  # the writes still waiting and the COMMIT, in one round trip
                    with conn.pipeline():
                        self._send_later(state, conn)
                        conn.execute("COMMIT")
        except psycopg.OperationalError as exc:
            if conn.broken:  # sent, and no answer: it may or may not have committed
                state.lost_writes += bool(state.dirty)
                state.drop()
                if self._on_rollback is not None:
                    self._on_rollback()
                raise self.unavailable(exc, state, unknown=True) from None
            error = self.busy(exc)  # the server ended a statement or refused the commit
            self._abandon(state)
            raise error from None
        except BaseException:
            self._abandon(state)
            raise
        callbacks, state.after_commit = state.after_commit, []
        state.ended()
        for callback in callbacks:
            callback()

    def _abandon(self, state: ThreadState) -> None:
        """End the thread's transaction without committing it."""
        if state.dirty or state.broken:
            state.lost_writes += 1
        conn = state.conn
        if conn is not None and not state.broken:
            try:
                with self.bounded(state, conn):
                    conn.execute("ROLLBACK")
            except psycopg.Error:
                state.conn = None
                with contextlib.suppress(Exception):
                    conn.close()
        state.reset()
        if self._on_rollback is not None:
            self._on_rollback()

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


def _expired(state: ThreadState) -> None:
    state.timed_out = True
