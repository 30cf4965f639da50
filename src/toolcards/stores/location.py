"""Where a team's stores live, parsed once, and the one table from a location's kind to the
backend that serves it. Nothing else in toolcards reads a store location's text.

Accepted spellings: a file path (``team.db``, ``/var/lib/team.db``: kind ``sqlite``),
``":memory:"`` (``memory``), ``postgresql://`` or ``postgres://`` URLs (``postgres``), and
``<scheme>://`` for a scheme an installed distribution declares in the ``toolcards.stores``
entry-point group (kind: the scheme)::

    [project.entry-points."toolcards.stores"]
    mystore = "mypackage.store:MyBackend"    # a StoreBackend: mystore://... opens with it

Any other ``scheme://`` is refused with one line naming the accepted forms, so
``mysql://u:pw@host/x`` never becomes a SQLite file (and a folder with the password in its
name). No dotted path read from data is ever imported: a scheme names a built-in kind or an
entry point the host installed (its value is the distribution's own code), and an entry point
cannot take over a built-in kind.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from toolcards.stores.errors import UnknownStoreScheme

MEMORY = ":memory:"
POSTGRES_SCHEMES = ("postgresql", "postgres")
BUILT_IN = ("a file path", "':memory:'", "postgresql://", "postgres://")
ENTRY_POINT_GROUP = "toolcards.stores"
BACKENDS = {
    "sqlite": ("toolcards.stores.sqlite.backend", "SqliteBackend"),
    "memory": ("toolcards.stores.sqlite.backend", "SqliteBackend"),
    "postgres": ("toolcards.stores.postgres.backend", "PostgresBackend"),
}
"""The built-in kinds' backends, imported when first chosen (a SQLite-only install never
imports psycopg)."""

_installed: dict[str, object] = {}
_lock = threading.Lock()

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):(//)?")


@dataclass(frozen=True)
class StoreLocation:
    """A parsed store location. ``kind`` is ``sqlite``, ``memory``, ``postgres`` or an
    installed backend's scheme; ``target`` is the file path or the full URL (with its
    password: use :attr:`display` for anything printed)."""

    kind: str
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
            raise UnknownStoreScheme(f"the store location is empty; use {accepted()}")
        found = _SCHEME.match(text)
        scheme = found.group(1).lower() if found is not None else ""
        if found is None or (not found.group(2) and scheme not in POSTGRES_SCHEMES):
            return cls("sqlite", text)  # "notes:v2.db" is a file name
        if found.group(2):
            if scheme in POSTGRES_SCHEMES:
                return cls("postgres", text)
            if installed(scheme):
                return cls(scheme, text)
        shown = f"{scheme}://" if found.group(2) else f"{scheme}:"
        raise UnknownStoreScheme(f"unknown store scheme {shown!r}; use {accepted()}")

    @property
    def is_memory(self) -> bool:
        return self.kind == "memory"

    @property
    def shared(self) -> bool:
        """True for a location several processes and machines share (a database server):
        the team may run in many of them at once, and a configuration keeps its audit trail,
        approvals and rate limits there too. Its backend says so."""
        return getattr(backend_class(self.kind), "shared", False) is True

    @property
    def path(self) -> Path | None:
        """The SQLite file (None for memory and PostgreSQL)."""
        return Path(self.target) if self.kind == "sqlite" else None

    @property
    def display(self) -> str:
        """Printable: a URL without its password (``postgresql://u:***@host/db``)."""
        return self.target if self.kind in ("sqlite", "memory") else redact_url(self.target)

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


def backend_class(kind: str) -> object:
    """What serves locations of ``kind``: a built-in backend, or the object the installed
    entry point of that name loads (once); :class:`UnknownStoreScheme` for neither.
    :func:`toolcards.stores.backend.backend_of` checks that it is a backend."""
    builtin = BACKENDS.get(kind)
    if builtin is not None:
        return getattr(importlib.import_module(builtin[0]), builtin[1])
    found = _installed.get(kind)
    if found is None:
        for ep in _entry_points():
            if ep.name.lower() == kind:
                with _lock:
                    found = _installed.setdefault(kind, ep.load())
                break
        else:
            raise UnknownStoreScheme(f"no installed store backend serves {kind}://")
    return found


def installed(scheme: str) -> bool:
    """True when an installed distribution declares ``scheme`` (lower case), not a built-in
    kind, in the ``toolcards.stores`` group."""
    return scheme not in BACKENDS and any(ep.name.lower() == scheme for ep in _entry_points())


def installed_schemes() -> list[str]:
    """The schemes installed distributions declare, sorted (built-in kinds excluded)."""
    return sorted({ep.name.lower() for ep in _entry_points()} - set(BACKENDS))


def _entry_points() -> Any:
    """The entry points of the group (read for a ``scheme://`` location that is not built in)."""
    from importlib.metadata import entry_points  # lazy: ~10 ms of imports the CLI needs not

    return entry_points(group=ENTRY_POINT_GROUP)


def accepted() -> str:
    """The spellings of a store location, the installed backends' schemes included."""
    forms = [*BUILT_IN, *(f"{scheme}://" for scheme in installed_schemes())]
    return f"{', '.join(forms[:-1])} or {forms[-1]}"


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
