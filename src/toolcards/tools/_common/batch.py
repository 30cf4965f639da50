"""Validation of the list arguments a card's batch tool takes."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from toolcards.core.errors import RetriableError
from toolcards.governance.approvals.view import reads_as_itself


def parse_batch(adapter: TypeAdapter[Any], value: Any, what: str, max_items: int) -> list[Any]:
    """Validate a list argument (dicts from direct calls too); errors become retries.

    ``None`` is an empty list; a non-list, more than ``max_items`` items or an invalid item
    raise :class:`RetriableError` naming ``what`` and the failing locations.
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise RetriableError(f"{what} must be a list")
    if len(value) > max_items:
        raise RetriableError(f"{what}: at most {max_items} items per call")
    try:
        return list(adapter.validate_python(value))
    except ValidationError as exc:
        problems = "; ".join(
            f"{what}.{'.'.join(str(p) for p in err['loc'])}: "
            + err["msg"].removeprefix("Value error, ")  # pydantic's prefix says nothing here
            for err in exc.errors()
        )
        raise RetriableError(problems) from None


def one_line(value: str) -> str:
    """A name, type or owner other members read inside one line of a listing: a line break
    or hidden character in it could make it read as more lines (another member's items)."""
    if not reads_as_itself(value):
        raise ValueError(
            "must be one line of visible text: no line breaks, tabs or hidden characters"
        )
    return value


def short_reason(exc: Exception) -> str:
    """The first line of ``exc``, at most 200 characters: why a stored row was skipped, in
    one log line."""
    return str(exc).splitlines()[0][:200]


def unpadded(value: str) -> str:
    """A name or id as written, or ValueError for one blank space pads: the policy and any
    approver decided on it as written, and a stripped one named another item (an entity, a
    record or a skill a rule protects)."""
    if value != value.strip():
        raise ValueError("must not start or end with blank space")
    return value


def exact(value: str, what: str) -> str:
    """:func:`unpadded` for a tool's plain argument: a retry naming ``what``."""
    try:
        return unpadded(value)
    except ValueError as exc:
        raise RetriableError(f"{what} {exc}: {value!r:.80}") from None
