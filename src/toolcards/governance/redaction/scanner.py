"""SecretScanner: an output guardrail that keeps secret-looking values out of tool results.

It finds what the audit trail's redaction finds (:mod:`.secret_patterns`: cloud and SaaS
token shapes, ``key=value`` pairs with secret-like keys, bearer tokens, private-key blocks,
URLs with credentials; the policy's own ``redaction:`` patterns too) and replaces each match
with ``[REDACTED]``, at any length of text. A value under a secret-named key (``password``,
``api_key``, ``pin``...) is replaced whole, whatever it is (a text, a number, a list).

A result with nothing to replace is handed on as it is (the same object). One that needs
redacting comes back as its JSON form (a pydantic model or a dataclass becomes a dict), with
the secrets replaced. ``action="refuse"`` withholds such a result instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from toolcards.core.errors import ToolcardsError
from toolcards.governance.guardrails import HookContext, Refuse, ToolHook
from toolcards.governance.redaction.patterns import REDACTED
from toolcards.governance.redaction.redactor import Redactor, is_secret_name

__all__ = ["SecretScanner"]

MAX_DEPTH = 64
"""A result nested deeper than this is refused, not passed on unscanned."""


class ResultTooDeep(ToolcardsError):
    """A result nested deeper than :data:`MAX_DEPTH` (the scanner refuses it)."""


class OpaqueResult(ToolcardsError):
    """A result the scanner reads as its JSON form (a model, a dataclass)."""


class SecretScanner(ToolHook):
    """Redacts secret-looking values in every result of the tools it guards (``tools``:
    globs on tool ids, None for all). ``redactor`` defaults to the policy's."""

    name = "secret_scanner"

    def __init__(
        self,
        *,
        action: Literal["redact", "refuse"] = "redact",
        tools: Sequence[str] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        if action not in ("redact", "refuse"):
            raise ValueError("action must be 'redact' or 'refuse'")
        self.action = action
        self.tools = tools
        self.redactor = redactor

    def after_call(self, ctx: HookContext, result: Any) -> Any:
        redactor = self.redactor or ctx.redaction
        try:
            try:
                scanned = _scan(redactor, result, 0)
            except OpaqueResult:  # a model or a dataclass: its JSON form is what leaves
                plain = to_jsonable_python(result, fallback=repr)
                scanned = _scan(redactor, plain, 0)
                if scanned is plain:
                    scanned = result
        except ResultTooDeep:
            return Refuse(f"the result of {ctx.tool_id} is nested too deeply to check")
        if scanned is result:
            return result
        if self.action == "refuse":
            return Refuse(f"the result of {ctx.tool_id} held a secret")
        return scanned


def _scan(redactor: Redactor, value: Any, depth: int) -> Any:
    """``value`` itself when nothing in it needs replacing, else a redacted copy; OpaqueResult
    for a value of another kind than JSON's."""
    if depth > MAX_DEPTH:
        raise ResultTooDeep
    if isinstance(value, str):
        scrubbed = redactor.scrub(value)
        return value if scrubbed == value else scrubbed
    if value is None or isinstance(value, int | float | bool):
        return value
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            shown = _scan(redactor, key, depth + 1) if isinstance(key, str) else key
            if isinstance(key, str) and is_secret_name(key):  # a list, a number: whole
                new: Any = REDACTED
            else:
                new = _scan(redactor, item, depth + 1)
            changed = changed or shown is not key or new is not item
            out[shown] = new
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [_scan(redactor, item, depth + 1) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    raise OpaqueResult
