"""JSON text from outside (a client's request, a remote server's answer, a command line):
parsed by :func:`loads`, which a handler of ``ValueError`` handles whatever the text holds.

``json.loads`` recurses once per nested array or object and raises ``RecursionError`` past
the interpreter's limit (about a thousand levels, fewer on a deep stack): a line of
``[[[[...`` then escaped every ``except ValueError`` around it, and ended the stdio server.

A request is bounded in values as well as in bytes: :func:`over_values` tells, before anything
is parsed, whether a text holds more than :data:`MAX_VALUES` values."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_VALUES", "load_object", "loads", "over_values"]

MAX_VALUES = 100_000
"""Values one message may hold, counted at each comma and opening bracket outside strings (as
the MCP client counts a server's answers): parsed, each costs far more than its characters (a
4 MiB request of 1.4 M empty objects took the server 108 MiB and seconds of its event loop),
while the largest ordinary messages hold tens of thousands."""

_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
"""A whole string (possessive: a string never closed costs no backtracking)."""


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``; ``json.JSONDecodeError`` (a ``ValueError``) for text it cannot
    read, nesting too deep and integers too long included (named at the text's start: where
    is not known)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as exc:  # too deep; an integer over 4,300 digits
        doc = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
        start = len(doc) - len(doc.lstrip())
        if isinstance(exc, RecursionError):
            why = "Nested too deeply"
        elif isinstance(exc, UnicodeDecodeError):
            why = "Not UTF-8 text"
        else:
            why = "Number too long" if "digits" in str(exc) else "Unreadable"
        raise json.JSONDecodeError(why, doc, start) from None


def load_object(text: str | bytes | bytearray) -> dict[str, Any]:
    """The JSON object ``text`` holds, as :func:`loads` reads it; ``ValueError`` saying ``not
    JSON`` or ``not a JSON object`` otherwise (what a remote server's answer must be)."""
    try:
        data = loads(text)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def over_values(text: str | bytes, limit: int = MAX_VALUES) -> bool:
    """Whether JSON ``text`` holds more than ``limit`` values (see :data:`MAX_VALUES`), told
    without parsing it (C speed, a few milliseconds a megabyte); a text whose commas and
    brackets, with those in its strings, are within the limit is not even copied."""
    if _structure(text) <= limit:
        return False
    if isinstance(text, bytes):  # decoded as json.loads decodes it, UTF-16 and UTF-32 included
        text = text.decode(json.detect_encoding(text), "replace")
    return _structure(_STRING.sub("", text)) > limit


def _structure(text: str | bytes) -> int:
    """Commas and opening brackets, inside strings or not (in bytes of any encoding json.loads
    reads, each of them is its ASCII byte)."""
    if isinstance(text, bytes):
        return text.count(b",") + text.count(b"[") + text.count(b"{")
    return text.count(",") + text.count("[") + text.count("{")
