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
    read, nesting too deep included (at the first bracket: where the JSON goes too deep is
    not known)."""
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
        start = len(doc) - len(doc.lstrip())
        raise json.JSONDecodeError("Nested too deeply", doc, start) from None
