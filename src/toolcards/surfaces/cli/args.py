"""Command-line arguments for a tool call: ``k=v`` pairs coerced by the tool's JSON schema,
or one JSON object. Values that do not fit the schema are passed on as text, so the policy
and the validator (not the parser) decide about them."""

from __future__ import annotations

import json
import sys

from toolcards._lazy import TYPE_CHECKING
from toolcards.core import outside_json
from toolcards.core.errors import ToolcardsError

if TYPE_CHECKING:
    from typing import Any

MAX_ARGS_BYTES = 1_000_000


class ArgsError(ToolcardsError, ValueError):
    """The command line cannot be read as arguments (a usage error)."""


def _types(schema: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    kind = schema.get("type")
    if isinstance(kind, str):
        found.add(kind)
    elif isinstance(kind, list):
        found.update(k for k in kind if isinstance(k, str))
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            if isinstance(option, dict):
                found |= _types(option)
    return found


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def coerce(text: str, schema: dict[str, Any] | None) -> Any:
    """One ``v`` of ``k=v`` as the schema asks; unknown or ill-fitting values stay text."""
    kinds = _types(schema or {})
    if not kinds:
        return _json_or_text(text)
    if "integer" in kinds:
        try:
            return int(text)
        except ValueError:
            pass
    if "number" in kinds:
        try:
            return float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            pass
    if "boolean" in kinds and text.lower() in _TRUE | _FALSE:
        return text.lower() in _TRUE
    if kinds & {"array", "object"}:
        try:
            value = outside_json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, list | dict):
            return value
    if "null" in kinds and text == "null":
        return None
    return text


def _json_or_text(text: str) -> Any:
    try:
        return outside_json.loads(text)
    except ValueError:
        return text


def parse_pairs(pairs: list[str], schema: dict[str, Any]) -> dict[str, Any]:
    """``["k=v", ...]`` -> arguments, each value coerced by its property schema."""
    props = schema.get("properties") or {}
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ArgsError(f"expected key=value, got {pair!r:.80}")
        if key in args:
            raise ArgsError(f"argument {key!r} given twice")
        prop = props.get(key)
        args[key] = coerce(text, prop if isinstance(prop, dict) else None)
    return args


EXAMPLE = """--args '{"path": "notes/a.md"}'"""
_JSON_KINDS = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


def parse_json(text: str) -> dict[str, Any]:
    """``--args`` (alias ``--json``) arguments: one JSON object (``-`` reads it from stdin)."""
    if text == "-":
        text = sys.stdin.read(MAX_ARGS_BYTES + 1)
    if len(text) > MAX_ARGS_BYTES:
        raise ArgsError(f"arguments larger than {MAX_ARGS_BYTES} bytes")
    try:
        value = outside_json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgsError(
            f"the arguments are not valid JSON ({exc.msg.lower()} at line {exc.lineno}, "
            f"column {exc.colno}); give one JSON object, e.g. {EXAMPLE}"
        ) from None
    if not isinstance(value, dict):
        kind = _JSON_KINDS.get(type(value), "a number")
        raise ArgsError(f"the arguments must be one JSON object, not {kind}; e.g. {EXAMPLE}")
    return value
