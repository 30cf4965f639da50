"""The errors every store raises, whatever its backend (their place in the tree of every
toolcards exception is drawn in :mod:`toolcards.core.errors`): a store that cannot be reached
right now is a ``TransientError`` (retry later), one that cannot be used where asked a
``StoreError``."""

from __future__ import annotations

from toolcards.core.errors import RetriableError, ToolcardsError, TransientError


class DatabaseUnavailable(TransientError):
    """The database cannot be reached right now (refused, or the connection was lost).

    Nothing acknowledged before it was raised is lost. The call it ends committed nothing,
    unless its message says "outcome unknown": the connection was lost while ``COMMIT`` was
    on its way, so the call may have committed (a retry under the same call id returns the
    recorded result instead of writing again: :mod:`toolcards.stores.applied_calls`).
    """


class DatabaseBusy(DatabaseUnavailable):
    """The database answered, and ended a statement it could not finish now: it waited past
    the statement timeout (most often for a lock another session holds), was refused a lock
    within ``lock_timeout``, or lost a deadlock or a serialization conflict to another
    session. The connection stays open; the transaction the statement ran in committed
    nothing. The message says which; retry.
    """


class DatabaseClosed(ToolcardsError):
    """The connections were closed; no more reads or writes."""


class StoreError(ToolcardsError):
    """The store cannot be opened where it was asked for (a directory, a read-only or
    special location, a corrupt file); the message names the path and what to do."""


class StoreLockedError(ToolcardsError):
    """Another process holds the store file open for writing (single writer per SQLite file)."""


class StoreClosedError(ToolcardsError):
    """The store was closed (its team stopped); no more reads or writes."""


class StoreUnavailable(DatabaseUnavailable):
    """The store cannot be reached right now (connection lost or refused); retry later.

    Nothing acknowledged before it was raised is lost. The call it ends committed nothing,
    unless its message says "outcome unknown" (see :class:`DatabaseUnavailable`).
    """


class SchemaTooNew(ToolcardsError):
    """The store was written by a newer toolcards; this one cannot read it safely."""


class UnknownStoreScheme(StoreError):
    """A store location with a URL scheme no backend serves (``mysql://...``)."""


class UnstorableText(RetriableError):
    """A text the store cannot keep (PostgreSQL text holds no NUL character); the message
    names the field and nothing was written."""
