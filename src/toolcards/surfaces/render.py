"""Tool values as text: strings as they are, everything else as indented JSON (the CLI and
the MCP server's text content share this)."""

from __future__ import annotations

import json
from typing import Any


def render_value(value: Any) -> tuple[str, dict[str, Any] | None]:
    """A tool value as text and, for objects, the structured (JSON-ready) value."""
    if isinstance(value, str):
        return value, None
    from pydantic_core import to_jsonable_python

    plain = to_jsonable_python(value, fallback=str)
    text = json.dumps(plain, ensure_ascii=False, indent=2)
    return text, plain if isinstance(plain, dict) else None
