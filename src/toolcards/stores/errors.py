"""The errors every store raises, whatever its backend.

ToolcardsError
 ├── StoreError               cannot open the store where asked (names the place, what to do)
 │    └── UnknownStoreScheme  a location that is neither a path, ":memory:" nor postgresql://
 ├── StoreLockedError         another process writes this SQLite file
 ├── StoreClosedError         the store was closed
 ├── DatabaseClosed           the PostgreSQL connections were closed
 ├── SchemaTooNew             written by a newer toolcards
 └── RetriableError
      └── DatabaseUnavailable  the database cannot be reached right now
           └── StoreUnavailable
"""

from __future__ import annotations

from toolcards.core.errors import RetriableError, ToolcardsError


class DatabaseUnavailable(RetriableError):
    """The database cannot be reached right now (refused, or the connection was lost).

    Nothing acknowledged before it was raised is lost: a failed call committed nothing.
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

    Nothing acknowledged before it was raised is lost: a failed call committed nothing.
    """


class SchemaTooNew(ToolcardsError):
    """The store was written by a newer toolcards; this one cannot read it safely."""


class UnknownStoreScheme(StoreError):
    """A store location with a URL scheme no backend serves (``mysql://...``)."""
