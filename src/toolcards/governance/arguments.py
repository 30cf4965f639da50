"""Arguments checked against the tool's schema before the policy looks at them.

A caller who may see a tool may see its schema, so a call missing a required argument, or
giving one of the wrong type, is ``invalid_args`` with the schema's error: a deny rule with a
condition on that argument does not turn it into "denied" (a condition that cannot be
evaluated counts against the caller, which is right for a valid call and misleading for a
broken one). A tool the caller may not see is not checked: its schema stays hidden, and the
call reads as unknown.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from toolcards.core.errors import ToolcardsError
from toolcards.governance.capability import ToolCapability

__all__ = ["InvalidArguments", "parse_arguments", "validation_errors"]


class InvalidArguments(ToolcardsError, ValueError):
    """The arguments do not fit the schema; the message is safe to show the caller (field
    names and what is wrong, never the values)."""


def validation_errors(exc: ValidationError, limit: int = 8) -> str:
    """Compact validation errors without echoing input values (they may hold secrets)."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def parse_arguments(cap: ToolCapability, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` parsed into the tool's types (unchanged for a tool without a validator);
    :class:`InvalidArguments` naming the tool and every problem otherwise."""
    if cap.validator is None:
        return args
    try:
        return cap.validate(args)
    except ValidationError as exc:
        raise InvalidArguments(
            f"invalid arguments for {cap.id}: {validation_errors(exc)}"
        ) from None
