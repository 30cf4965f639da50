"""Canonical argument digests and redaction of secrets before anything is written down.

Two rules apply everywhere (audit rows, approval requests, error texts, telemetry):

- an argument whose *name* looks secret (``password``, ``token``, ``api_key``...) or is declared
  ``sensitive`` is replaced whole;
- any *text* is searched for secret-looking values (:data:`BUILTIN_PATTERNS`: ``key=value`` pairs
  with secret-like keys, bearer tokens, private-key blocks, cloud and SaaS token shapes, URLs
  with ``user:password@``), and each match is replaced by ``[REDACTED]``.

A :class:`Redactor` holds the value patterns; a policy's ``redaction:`` section builds one with
extra patterns or some built-ins disabled. Every pattern names literal *anchors* (one of which
any match contains), so text without any anchor costs a few substring tests, not a regex scan.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic_core import to_jsonable_python

REDACTED = "[REDACTED]"
_MAX_DEPTH = 12
_MAX_STRING = 2_000
_GATED = 256  # below this length one combined anchor regex is cheaper than substring tests

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
# Keys whose value is a secret in free text (``key=value`` / ``key: value``): the key must END
# with one of these words, so ``max_tokens=5`` or ``password_hint=...`` stay readable.
_SECRET_KEYS = (
    r"pass(?:word|wd|phrase)|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credentials?|authorization|cookie|session[_-]?(?:id|key)"
    r"|signature|account[_-]?key|sig"
)


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """One value pattern. ``anchors`` are lower-case substrings of which every match contains
    at least one (empty: always searched). A named group ``secret`` limits the replacement to
    that group (the key of a ``key=value`` pair stays readable)."""

    name: str
    regex: re.Pattern[str]
    anchors: tuple[str, ...] = ()

    @classmethod
    def compile(cls, name: str, pattern: str, anchors: Iterable[str] = ()) -> SecretPattern:
        return cls(name, re.compile(pattern), tuple(a.lower() for a in anchors))

    def sub(self, text: str) -> str:
        if "secret" not in self.regex.groupindex:
            return self.regex.sub(REDACTED, text)

        def keep_key(match: re.Match[str]) -> str:
            start, end = match.span("secret")
            whole = match.group(0)
            offset = match.start()
            return whole[: start - offset] + REDACTED + whole[end - offset :]

        return self.regex.sub(keep_key, text)


_P = SecretPattern.compile
BUILTIN_PATTERNS: tuple[SecretPattern, ...] = (
    _P(
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)",
        ["-----begin"],
    ),
    _P(
        "secret_assignment",
        rf"(?i)(?:{_SECRET_KEYS})(?:\\?[\"'])?[ \t]*[:=][ \t]*"
        r"(?:(?:basic|bearer|token|digest)[ \t]+)?"
        r"(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&]+)",
        ["pass", "secret", "token", "key", "credential", "auth", "cookie", "session", "sig"],
    ),
    _P(
        "secret_flag",
        r"(?i)--(?:password|passwd|token|secret|api[_-]?key|access[_-]?token)[ \t]+"
        r"(?P<secret>[^\s\"']+)",
        ["--"],
    ),
    _P("bearer", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}", ["bearer"]),
    _P("url_credentials", r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)", ["://"]),
    _P(
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[A-Z0-9]{16}\b",
        ["akia", "asia", "abia", "acca", "agpa", "aida", "aipa", "anpa", "anva", "apka", "aroa"],
    ),
    _P(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{22,255})",
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    ),
    _P("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}", ["glpat-"]),
    _P("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", ["xox"]),
    _P("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+", ["hooks.slack"]),
    _P("openai_key", r"\bsk-[A-Za-z0-9_-]{16,}", ["sk-"]),
    _P("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", ["_live_", "_test_"]),
    _P("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", ["aiza"]),
    _P("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ["eyj"]),
    _P("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", ["npm_"]),
    _P("pypi_token", r"\bpypi-[A-Za-z0-9_-]{50,}", ["pypi-"]),
    _P("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}", ["hf_"]),
    _P("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", ["sg."]),
)
BUILTIN_NAMES = frozenset(p.name for p in BUILTIN_PATTERNS)


class Redactor:
    """Finds and replaces secrets. ``patterns`` adds value patterns (regexes, by name or as a
    list); ``disable`` switches built-in patterns off by name (``"all"`` for every one; name
    based redaction stays). ``span_arguments`` allows redacted argument values on telemetry
    spans (off by default)."""

    __slots__ = ("_anchors", "_free", "_gate", "patterns", "span_arguments")

    def __init__(
        self,
        patterns: Mapping[str, str] | Iterable[str] = (),
        *,
        disable: Iterable[str] = (),
        span_arguments: bool = False,
    ) -> None:
        off = frozenset(disable)
        unknown = off - BUILTIN_NAMES - {"all"}
        if unknown:
            known = ", ".join(sorted(BUILTIN_NAMES))
            raise ValueError(f"unknown built-in pattern(s) {sorted(unknown)} (known: {known})")
        named = patterns.items() if isinstance(patterns, Mapping) else enumerate(patterns)
        extra = tuple(SecretPattern.compile(f"custom_{key}", str(rx)) for key, rx in named)
        builtin = () if "all" in off else tuple(p for p in BUILTIN_PATTERNS if p.name not in off)
        self.patterns: tuple[SecretPattern, ...] = builtin + extra
        self._anchors = tuple((a, p) for p in self.patterns for a in p.anchors)
        self._free = tuple(p for p in self.patterns if not p.anchors)
        # one pass over short text answers "any anchor at all?" (the usual answer is no)
        gate = "|".join(sorted({re.escape(a) for a, _ in self._anchors}, key=len, reverse=True))
        self._gate = re.compile(gate or "(?!)")
        self.span_arguments = span_arguments

    def _candidates(self, text: str) -> list[SecretPattern]:
        """The patterns whose anchors occur in ``text`` (in pattern order), then the free ones."""
        low = text.lower()
        if len(low) <= _GATED and self._gate.search(low) is None:
            return [*self._free]
        hits = {id(p): p for a, p in self._anchors if a in low}
        found = [p for p in self.patterns if id(p) in hits] if len(hits) > 1 else [*hits.values()]
        found.extend(self._free)
        return found

    def has_secret(self, text: str) -> bool:
        """Whether ``text`` holds something a value pattern would replace."""
        return any(p.regex.search(text) for p in self._candidates(text))

    def text(self, text: str) -> str:
        """``text`` with secret-looking substrings replaced (and cut to a bounded length)."""
        if len(text) > _MAX_STRING:
            text = text[:_MAX_STRING] + "...[truncated]"
        for pattern in self._candidates(text):
            text = pattern.sub(text)
        return text

    def value(self, value: Any, sensitive: Iterable[str] = ()) -> Any:
        """A JSON-able copy of ``value`` with secret names and secret-looking values replaced."""
        names = sensitive if isinstance(sensitive, frozenset) else frozenset(sensitive)
        return self._walk(to_jsonable_python(value, fallback=repr), names, 0)

    def _walk(self, value: Any, names: frozenset[str], depth: int) -> Any:
        if depth > _MAX_DEPTH:
            return "[...]"
        if isinstance(value, dict):
            return {
                str(k): REDACTED
                if str(k) in names or is_secret_name(str(k))
                else self._walk(v, names, depth + 1)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._walk(v, names, depth + 1) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def digest_and_redacted(
        self, args: Mapping[str, Any] | None, sensitive: Iterable[str] = ()
    ) -> tuple[str, str]:
        """(SHA-256 of the canonical JSON, redacted canonical JSON) in one pass over ``args``.

        When nothing needs redacting (the common case) the canonical text is stored as is.
        """
        text = canonical_json(args)
        digest = hashlib.sha256(text.encode()).hexdigest()
        names = frozenset(sensitive)
        if (
            len(text) <= _MAX_STRING
            and not self.has_secret(text)
            and not _has_secret_key(args, names, 0)
        ):
            return digest, text
        return digest, _encode(self.value(args or {}, names))

    def __repr__(self) -> str:
        return f"Redactor({len(self.patterns)} patterns, span_arguments={self.span_arguments})"


DEFAULT_REDACTOR = Redactor()


def _json_default(obj: Any) -> Any:
    return to_jsonable_python(obj, fallback=repr)


def _canonical_encoder() -> Callable[[Any], str]:
    """Compact, key-sorted JSON. The C encoder is built once (``json.dumps`` builds one per
    call, which costs more than the encoding of small arguments)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - interpreters without the C accelerator
        encoder = json.JSONEncoder(
            sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default
        )
        return encoder.encode
    chunks = make(
        None, _json_default, json.encoder.encode_basestring, None, ":", ",", True, False, True
    )

    def encode(obj: Any) -> str:
        return "".join(chunks(obj, 0))

    return encode


_encode = _canonical_encoder()


def canonical_json(args: Mapping[str, Any] | None) -> str:
    """Arguments as compact JSON with sorted keys (dates, models, enums made JSON first)."""
    try:
        return _encode(args or {})
    except (TypeError, ValueError, RecursionError):  # keys that are not strings, cycles
        return _encode(to_jsonable_python(args or {}, fallback=repr))


def args_digest(args: Mapping[str, Any] | None) -> str:
    """SHA-256 of the canonical JSON of ``args``: equal arguments, equal digest."""
    return hashlib.sha256(canonical_json(args).encode()).hexdigest()


# Values with no names inside: nothing to redact by name.
_PLAIN = (str, int, float, bool, type(None), dt.date, dt.time, dt.timedelta, Decimal, uuid.UUID)
_PLAIN_TYPES = frozenset(_PLAIN)
_SECRET_NAME = re.compile("|".join(_SECRET_NAMES), re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether an argument name always holds a secret (password, token, api_key, ...)."""
    return _SECRET_NAME.search(name) is not None


def _has_secret_key(value: Any, names: frozenset[str], depth: int) -> bool:
    """Whether ``value`` holds a secret-named (or ``names``) key, or an object whose JSON form
    must be walked to know."""
    kind = type(value)
    if kind is dict or (kind not in _PLAIN_TYPES and isinstance(value, Mapping)):
        if depth > _MAX_DEPTH:
            return True
        keys = tuple(value)
        if _secret_keys(keys) or (names and not names.isdisjoint(keys)):
            return True
        items: Iterable[Any] = value.values()
    elif kind is list or kind is tuple:
        items = value
    else:
        return kind not in _PLAIN_TYPES and not isinstance(value, _PLAIN)
    return any(
        type(item) not in _PLAIN_TYPES and _has_secret_key(item, names, depth + 1) for item in items
    )


@functools.lru_cache(maxsize=4096)
def _secret_keys(keys: tuple[Any, ...]) -> bool:
    return any(is_secret_name(str(key)) for key in keys)


def digest_and_redacted(
    args: Mapping[str, Any] | None, sensitive: Iterable[str] = ()
) -> tuple[str, str]:
    """:meth:`Redactor.digest_and_redacted` with the default patterns."""
    return DEFAULT_REDACTOR.digest_and_redacted(args, sensitive)


def redact_text(text: str) -> str:
    """:meth:`Redactor.text` with the default patterns."""
    return DEFAULT_REDACTOR.text(text)


def redact(value: Any, sensitive: Iterable[str] = ()) -> Any:
    """:meth:`Redactor.value` with the default patterns."""
    return DEFAULT_REDACTOR.value(value, sensitive)
