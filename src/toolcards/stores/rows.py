"""What both team-store backends write and read alike: the layout version, the row shapes
handed back (:class:`EventRow`, :class:`AppliedCall`, :class:`Compaction`), the JSON text of a
value and the check of a text a store keeps."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic_core import to_jsonable_python

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
]

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
