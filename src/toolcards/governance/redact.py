"""Canonical argument digests and redaction of secrets before anything is written down."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_core import to_jsonable_python

REDACTED = "[REDACTED]"
_MAX_DEPTH = 12
_MAX_STRING = 2_000

# Argument names that always hold secrets (matched as substrings of the lower-cased name).
_SECRET_NAMES = (
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "credential",
    "authorization",
    "cookie",
    "session_id",
)
# Values that look like secrets wherever they appear.
_SECRET_VALUES = re.compile(
    r"(?:sk-[A-Za-z0-9_-]{16,}"  # OpenAI-style keys
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWTs
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{12,}"
    r"|(?<=://)[^/\s:@]+:[^/\s@]+(?=@))"  # user:password in URLs
)


def canonical_json(args: Mapping[str, Any] | None) -> str:
    """Arguments as compact JSON with sorted keys (dates, models, enums made JSON first)."""
    return json.dumps(
        to_jsonable_python(args or {}, fallback=repr),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def args_digest(args: Mapping[str, Any] | None) -> str:
    """SHA-256 of the canonical JSON of ``args``: equal arguments, equal digest."""
    return hashlib.sha256(canonical_json(args).encode()).hexdigest()


_SECRET_NAME = re.compile("|".join(_SECRET_NAMES), re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether an argument name always holds a secret (password, token, api_key, ...)."""
    return _SECRET_NAME.search(name) is not None


def digest_and_redacted(
    args: Mapping[str, Any] | None, sensitive: Iterable[str] = ()
) -> tuple[str, str]:
    """(SHA-256 of the canonical JSON, redacted canonical JSON) in one pass over ``args``.

    When nothing needs redacting (the common case) the canonical text is stored as is.
    """
    jsonable = to_jsonable_python(args or {}, fallback=repr)
    text = json.dumps(jsonable, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(text.encode()).hexdigest()
    names = frozenset(sensitive)
    if (
        len(text) <= _MAX_STRING
        and not _SECRET_VALUES.search(text)
        and not _has_secret_key(jsonable, names, 0)
    ):
        return digest, text
    redacted = redact(jsonable, names)
    return digest, json.dumps(redacted, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _has_secret_key(value: Any, names: frozenset[str], depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return True
    if isinstance(value, dict):
        for key, item in value.items():
            if key in names or is_secret_name(str(key)) or _has_secret_key(item, names, depth + 1):
                return True
    elif isinstance(value, list):
        return any(_has_secret_key(item, names, depth + 1) for item in value)
    return False


def redact_text(text: str) -> str:
    """``text`` with secret-looking substrings replaced (and cut to a bounded length)."""
    if len(text) > _MAX_STRING:
        text = text[:_MAX_STRING] + "...[truncated]"
    return _SECRET_VALUES.sub(REDACTED, text)


def redact(value: Any, sensitive: Iterable[str] = (), _depth: int = 0) -> Any:
    """A JSON-able copy of ``value`` with sensitive names and secret-looking values replaced."""
    names = sensitive if isinstance(sensitive, frozenset) else frozenset(sensitive)
    if _depth == 0:
        value = to_jsonable_python(value, fallback=repr)
    if _depth > _MAX_DEPTH:
        return "[...]"
    if isinstance(value, dict):
        return {
            str(k): REDACTED
            if str(k) in names or is_secret_name(str(k))
            else redact(v, names, _depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v, names, _depth + 1) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
