"""JSON text from outside (a client's request, a remote server's answer, a command line):
parsed by :func:`loads`, which a handler of ``ValueError`` handles whatever the text holds.

``json.loads`` recurses once per nested array or object and raises ``RecursionError`` past
the interpreter's limit (about a thousand levels, fewer on a deep stack): a line of
``[[[[...`` then escaped every ``except ValueError`` around it, and ended the stdio server."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["loads"]


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
