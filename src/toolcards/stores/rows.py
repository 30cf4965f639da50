"""What both team-store backends write and read alike: the layout version, the row shapes
handed back (:class:`EventRow`, :class:`AppliedCall`, :class:`Compaction`), the JSON text of a
value (written and read back) and the check of a text a store keeps."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic_core import to_jsonable_python

from toolcards.core import outside_json
from toolcards.stores.errors import UnstorableText

__all__ = [
    "DEFAULT_TEAM",
    "EVENT_ENVELOPE_COLUMNS",
    "LIFECYCLE_TOOL",
    "SCHEMA_VERSION",
    "AppliedCall",
    "Compaction",
    "EventRow",
    "check_text",
    "compaction_marker",
    "dumps",
    "key_end",
    "read_page",
    "read_value",
    "read_values",
]

logger = logging.getLogger(__name__)

Fetch = Callable[[str, bool, int], Sequence[tuple[str, str]]]
"""Reads ``(key, JSON text)`` state rows in key order from a key (included or not), at most
so many (0: all)."""

SCHEMA_VERSION = 2
"""The version of the store layout this code writes (both backends)."""

DEFAULT_TEAM = "toolcards"
"""The team of whatever names none: a store or audit log opened without one (a standalone
executor, a plain ``AuditLog("audit.db")``) and a surfaces config without ``team_id:``, so a
trail written from Python and read with ``toolcards audit tail`` is one team's. A SQLite file
opened first by a named team belongs to that team, and readers naming no team read it."""


class EventRow(NamedTuple):
    """One stored event: its position in the team log, tool, seq and JSON payload, and the
    envelope fields rows written before they existed lack (None there): the event's id, its
    sender and its display type."""

    position: int
    tool_id: str
    seq: int
    payload: str
    payload_type: str | None
    timestamp: float
    event_id: str | None = None
    sender: str | None = None
    display_type: str | None = None


class AppliedCall(NamedTuple):
    """What a call committed under an idempotency key left (:mod:`.applied_calls`): the
    actor and digest of the call (its method and arguments), its result as JSON text, and
    when it committed (epoch seconds)."""

    actor: str
    digest: str
    result: str
    at: float


EVENT_ENVELOPE_COLUMNS = (("event_id", "TEXT"), ("sender", "TEXT"), ("display_type", "TEXT"))
"""Nullable columns of the events table added after schema 2 (both backends add them to an
older table when it lacks them; older rows keep NULL)."""


@dataclass(frozen=True)
class Compaction:
    """What :meth:`Store.compact_events` did for one tool: every event before ``through_seq``
    is gone and event ``through_seq`` became a ``compacted`` marker (``removed`` rows
    changed)."""

    tool_id: str
    through_seq: int
    removed: int


def check_text(field: str, text: str) -> None:
    """Refuse ``text`` (a key or a name a store writes as text) when a store cannot keep it:
    PostgreSQL text holds no NUL character. JSON values need no check (``dumps`` escapes)."""
    if "\x00" in text:
        raise UnstorableText(
            f"{field} {text!r:.80} contains a NUL character (\\x00), which the store cannot "
            "keep; nothing was stored: remove the character and call again"
        )


def dumps(value: Any) -> str:
    """JSON text of ``value``; pydantic models, dates and sets are converted on the way."""
    return json.dumps(value, default=to_jsonable_python, separators=(",", ":"))


_LAST_CHAR = chr(0x10FFFF)
_SURROGATES = range(0xD800, 0xE000)


def read_values(
    actor: str, rows: Iterable[tuple[str, str]]
) -> tuple[list[tuple[str, Any]], list[str]]:
    """``(key, value)`` of the state rows whose JSON text reads, and the keys of those whose
    text does not (nested too deep, a number too long, broken: written around the store),
    logged in one line. Such a row reads as absent: one planted ``[[[[...`` row raised
    ``RecursionError`` from every read of its actor's state, and the actor never started."""
    found: list[tuple[str, Any]] = []
    unreadable: list[str] = []
    for key, text in rows:
        try:
            found.append((key, outside_json.loads(text)))
        except ValueError:
            unreadable.append(key)
    if unreadable:
        logger.warning(
            "state of %s: %d row(s) are not readable JSON and read as absent (the first: %.80r)",
            actor,
            len(unreadable),
            unreadable[0],
        )
    return found, unreadable


def read_value(actor: str, key: str, text: str | None) -> Any | None:
    """The value of ``actor``'s state row ``key`` of JSON ``text``: None when there is no row
    (``text`` None) or its text does not read (see :func:`read_values`)."""
    found = [] if text is None else read_values(actor, [(key, text)])[0]
    return found[0][1] if found else None


def read_page(
    fetch: Fetch, actor: str, low: str, inclusive: bool, limit: int
) -> list[tuple[str, Any]]:
    """The readable rows ``fetch`` reads from ``low``, at most ``limit`` (0: all): past an
    unreadable row it reads on, so a page is short only at the end (a reader paging by
    ``limit`` stops at a short page)."""
    found: list[tuple[str, Any]] = []
    while True:
        want = limit - len(found) if limit else 0
        rows = fetch(low, inclusive, want)
        found += read_values(actor, rows)[0]
        if not limit or len(rows) < want or len(found) == limit:
            return found
        low, inclusive = rows[-1][0], False


def key_end(prefix: str) -> str | None:
    """The least key above every key that starts with ``prefix``, or None when none is (an
    empty prefix, or U+10FFFF alone): a prefix's keys run from the prefix up to this, excluded.
    A key may hold U+10FFFF itself, so the prefix followed by it bounds nothing. Keys compare
    by code point in every backend (Python, SQLite's BINARY collation of UTF-8, PostgreSQL's
    ``COLLATE "C"``): the bound is the prefix without its trailing U+10FFFF, last character
    incremented (past the surrogates, which UTF-8 cannot hold)."""
    stem = prefix.rstrip(_LAST_CHAR)
    if not stem:
        return None
    code = ord(stem[-1]) + 1
    return stem[:-1] + chr(_SURROGATES.stop if code in _SURROGATES else code)


LIFECYCLE_TOOL = "team"
"""The tool id of the team's lifecycle events (never compacted)."""


def compaction_marker(through_seq: int) -> dict[str, Any]:
    """The payload that replaces the newest compacted event of a tool: every earlier event of
    the tool is gone; the tool's state rows hold what they added up to."""
    return {"compacted": {"through_seq": through_seq}}
