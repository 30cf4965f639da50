"""Where a team's stores live, parsed once: a SQLite file, this process's memory, or a
PostgreSQL database. Nothing else in toolcards reads a store location's text.

Accepted spellings: a file path (``team.db``, ``/var/lib/team.db``), ``":memory:"``, and
``postgresql://`` or ``postgres://`` URLs. Any other ``scheme://`` is refused with one line
naming the accepted forms, so ``mysql://u:pw@host/x`` never becomes a SQLite file (and a folder
with the password in its name).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from toolcards.stores.errors import UnknownStoreScheme

Kind = Literal["sqlite", "memory", "postgres"]

MEMORY = ":memory:"
POSTGRES_SCHEMES = ("postgresql", "postgres")
ACCEPTED = "a file path, ':memory:', postgresql:// or postgres://"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):(//)?")


@dataclass(frozen=True)
class StoreLocation:
    """A parsed store location. ``target`` is the file path or the full URL (with its
    password: use :attr:`display` for anything printed)."""

    kind: Kind
    target: str

    @classmethod
    def parse(cls, value: str | os.PathLike[str] | StoreLocation) -> StoreLocation:
        """The location ``value`` names; :class:`UnknownStoreScheme` for another scheme."""
        if isinstance(value, StoreLocation):
            return value
        text = os.fspath(value)
        if not isinstance(text, str):
            raise UnknownStoreScheme(f"a store location must be text, not {type(text).__name__}")
        if text == MEMORY:
            return cls("memory", MEMORY)
        if not text.strip():
            raise UnknownStoreScheme(f"the store location is empty; use {ACCEPTED}")
        found = _SCHEME.match(text)
        scheme = found.group(1).lower() if found is not None else ""
        if found is None or (not found.group(2) and scheme not in POSTGRES_SCHEMES):
            return cls("sqlite", text)  # "notes:v2.db" is a file name
        if scheme in POSTGRES_SCHEMES and found.group(2):
            return cls("postgres", text)
        shown = f"{scheme}://" if found.group(2) else f"{scheme}:"
        raise UnknownStoreScheme(f"unknown store scheme {shown!r}; use {ACCEPTED}")

    @property
    def is_postgres(self) -> bool:
        return self.kind == "postgres"

    @property
    def is_memory(self) -> bool:
        return self.kind == "memory"

    @property
    def path(self) -> Path | None:
        """The SQLite file (None for memory and PostgreSQL)."""
        return Path(self.target) if self.kind == "sqlite" else None

    @property
    def display(self) -> str:
        """Printable: a URL without its password (``postgresql://u:***@host/db``)."""
        return redact_url(self.target) if self.is_postgres else self.target

    @property
    def key(self) -> str:
        """One text per place: the real path of a file, the URL of a database."""
        return os.path.realpath(self.target) if self.kind == "sqlite" else self.target

    def resolved(self, base: Path) -> StoreLocation:
        """A relative file path made relative to ``base`` (a config file's folder)."""
        if self.kind != "sqlite" or Path(self.target).is_absolute():
            return self
        return StoreLocation("sqlite", str(base / self.target))

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"StoreLocation({self.kind!r}, {self.display!r})"


def redact_url(url: str) -> str:
    """``url`` without its password (``postgresql://u:***@host/db``), for logs and errors."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


def is_postgres_url(location: str | os.PathLike[str] | StoreLocation) -> bool:
    """True for a location that parses as PostgreSQL (an unknown scheme raises)."""
    return StoreLocation.parse(location).is_postgres
