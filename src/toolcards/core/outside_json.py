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
        why = "Nested too deeply" if isinstance(exc, RecursionError) else "Number too long"
        raise json.JSONDecodeError(why, doc, start) from None
