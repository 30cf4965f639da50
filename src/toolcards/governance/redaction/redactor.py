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
import itertools
import json
import math
import re
import unicodedata
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from pydantic_core import to_jsonable_python

from toolcards.core.identity import UNSTORABLE
from toolcards.governance.redaction.patterns import (
    BUILTIN_NAMES,
    BUILTIN_PATTERNS,
    REDACTED,
    SECRET_NAME,
    SecretPattern,
    match_deadline,
)

__all__ = [
    "BUILTIN_NAMES",
    "BUILTIN_PATTERNS",
    "DEFAULT_REDACTOR",
    "REDACTED",
    "Redactor",
    "SecretPattern",
    "args_digest",
    "canonical_json",
    "digest_and_redacted",
    "is_secret_name",
    "redact",
    "redact_text",
    "storable",
]

_MAX_DEPTH = 12
_MAX_STRING = 2_000
_GATED = 256  # below this length one combined anchor regex is cheaper than substring tests
MAX_PATTERNS = 64
"""How many patterns of its own a :class:`Redactor` (a policy) may add: each is searched in
every text that holds its anchors."""


class Redactor:
    """Finds and replaces secrets. ``patterns`` adds value patterns (regexes, by name or as a
    list); ``disable`` switches built-in patterns off by name (``"all"`` for every one; name
    based redaction stays). ``span_arguments`` allows redacted argument values on telemetry
    spans (off by default)."""

    __slots__ = ("_anchors", "_free", "_gate", "_timed", "patterns", "span_arguments")

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
        named = list(patterns.items() if isinstance(patterns, Mapping) else enumerate(patterns))
        if len(named) > MAX_PATTERNS:
            raise ValueError(f"more than {MAX_PATTERNS} patterns ({len(named)})")
        extra = tuple(SecretPattern.compile(f"custom_{key}", str(rx)) for key, rx in named)
        builtin = () if "all" in off else tuple(p for p in BUILTIN_PATTERNS if p.name not in off)
        self.patterns: tuple[SecretPattern, ...] = builtin + extra
        self._timed = bool(extra)  # the built-in patterns are linear: no deadline to keep
        by_anchor: dict[str, list[int]] = {}
        for index, pattern in enumerate(self.patterns):
            for anchor in pattern.anchors:
                by_anchor.setdefault(anchor, []).append(index)
        self._anchors = tuple((a, frozenset(i)) for a, i in by_anchor.items())
        self._free = tuple(p for p in self.patterns if not p.anchors)
        # one pass over short text answers "any anchor at all?" (the usual answer is no)
        self._gate = re.compile(_any_of(by_anchor) or "(?!)")
        self.span_arguments = span_arguments

    def _candidates(self, text: str) -> list[SecretPattern]:
        """The patterns whose anchors occur in ``text`` (in pattern order), then the free ones."""
        low = text.lower()
        if len(low) <= _GATED and self._gate.search(low) is None:
            return [*self._free]
        hits: set[int] = set()
        for anchor, indexes in self._anchors:
            if anchor in low:
                hits |= indexes
        found = [self.patterns[i] for i in sorted(hits)]
        found.extend(self._free)
        return found

    def _deadline(self, text: str) -> float | None:
        """One deadline for all of a policy's patterns on ``text`` (None: no policy patterns;
        a clock read costs a tenth of a search)."""
        return match_deadline(text) if self._timed else None

    def _found(self, text: str) -> bool:
        deadline = self._deadline(text)
        try:
            return any(p.search(text, deadline) for p in self._candidates(text))
        except TimeoutError:  # a policy's pattern ran out of time: it may have matched
            return True

    def _replaced(self, text: str) -> str:
        """``text`` with every match replaced; withheld whole when a policy's patterns run out
        of time on it (what they would hide is not known)."""
        deadline = self._deadline(text)
        try:
            for pattern in self._candidates(text):
                text = pattern.sub(text, deadline)
        except TimeoutError:
            return REDACTED
        return text

    def _plain(self, text: str) -> bool:
        """Short ASCII text with no anchor and nothing to decode: nothing to replace."""
        return (
            len(text) <= _GATED
            and not self._free
            and text.isascii()
            and "%" not in text
            and "\\" not in text
            and self._gate.search(text.lower()) is None
        )

    def has_secret(self, text: str) -> bool:
        """Whether ``text``, or a decoded spelling of it (JSON escapes, percent-encoding,
        NFKC), holds something a value pattern would replace."""
        if self._plain(text):
            return False
        return self._found(text) or any(self._found(view) for view in views(text))

    def text(self, text: str) -> str:
        """``text`` with secret-looking substrings replaced (and cut to a bounded length).
        When a decoded spelling of it (see :mod:`.secret_views`) still shows a secret, the
        redacted decoded spelling is returned instead."""
        if len(text) > _MAX_STRING:
            text = text[:_MAX_STRING] + "...[truncated]"
        return self.scrub(text)

    def scrub(self, text: str) -> str:
        """``text`` with secret-looking substrings replaced, at any length (:meth:`text` cuts
        it first, for a log line or an audit row); a decoded spelling as :meth:`text` says."""
        if self._plain(text):
            return text
        text = self._replaced(text)
        for _ in range(VIEW_DEPTH):
            for view in views(text):
                redone = self._replaced(view)
                if redone != view:
                    text = redone
                    break
            else:
                return text
        return text

    def name(self, name: str) -> str:
        """A name (a dictionary key, a tool name a caller sent) as it may be written down: its
        secret-looking parts replaced, and ``[REDACTED]`` whole when it reads as a random
        token."""
        shown = self.text(name)
        return REDACTED if shown == name and looks_random(name) else shown

    def value(self, value: Any, sensitive: Iterable[str] = ()) -> Any:
        """A JSON-able copy of ``value`` with secret names and secret-looking values replaced."""
        names = sensitive if isinstance(sensitive, frozenset) else frozenset(sensitive)
        return self._walk(value, names, 0)

    def _walk(self, value: Any, names: frozenset[str], depth: int) -> Any:
        """Walks ``value`` as given and converts to JSON only what is not JSON yet, where it
        meets it: converted whole first, a value nesting past ~255 levels made pydantic-core
        raise, though the walk cuts it at ``_MAX_DEPTH`` anyway."""
        if depth > _MAX_DEPTH:
            return "[...]"
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind in _JSON_SCALARS:
            return value
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            alike: dict[str, int] = {}
            for k, v in value.items():
                key = k if type(k) is str else _json_key(k)
                shown = self.name(key)
                if shown != key:  # keys redacted alike stay apart
                    alike[shown] = alike.get(shown, 0) + 1
                    shown = shown if alike[shown] == 1 else f"{shown}#{alike[shown]}"
                secret = key in names or is_secret_name(key)
                out[shown] = REDACTED if secret else self._walk(v, names, depth + 1)
            return out
        if isinstance(value, list | tuple | set | frozenset):
            return [self._walk(v, names, depth + 1) for v in value]
        jsonable = _jsonable(value)  # a model, a dataclass, a date...
        if isinstance(jsonable, dict | list | str):
            return self._walk(jsonable, names, depth)
        return jsonable

    def error(self, text: str, args: Mapping[str, Any] | None, sensitive: Iterable[str]) -> str:
        """``text`` (what a call ended with) redacted, without the values ``args`` hold under
        secret or ``sensitive`` names and without their random-looking keys: an exception or
        validation message that repeats an argument hides what the arguments' column hides."""
        names = frozenset(sensitive)
        if args and _has_secret_key(args, names, 0):
            hidden: list[str] = []
            read = _hidden(args, names, 0, hidden)
            if not read or len(hidden) > _MAX_HIDDEN:  # not all known: none is written
                kind = text.partition(":")[0] if ":" in text[:80] else "error"
                why = "one of many secret arguments" if read else "a secret nested too deep"
                return f"{kind}: {REDACTED} (the text may repeat {why})"
            spellings = {s for value in hidden for s in _spellings(value)}
            for secret in sorted(spellings, key=len, reverse=True):
                text = text.replace(secret, REDACTED)
            text = _INPUT_VALUE.sub(rf"\1{REDACTED}\2", text)
        return self.text(text)

    def digest_and_redacted(
        self, args: Mapping[str, Any] | None, sensitive: Iterable[str] = ()
    ) -> tuple[str, str]:
        """(SHA-256 of the canonical JSON, redacted canonical JSON) in one pass over ``args``.

        When nothing needs redacting (the common case) the canonical text is stored as is.
        """
        text = canonical_json(args)
        return hashlib.sha256(text.encode()).hexdigest(), self.redacted_json(args, sensitive, text)

    def redacted_json(
        self, args: Mapping[str, Any] | None, sensitive: Iterable[str] = (), text: str = ""
    ) -> str:
        """The redacted canonical JSON of ``args``; ``text``: their :func:`canonical_json`,
        when the caller has it (the audit log digests the arguments when a call ends and
        redacts them later). When nothing needs redacting (the common case) the canonical
        text is stored as is."""
        if not text:
            try:
                text = canonical_json(args)
            except ValueError:  # too deep to encode whole: the walk cuts it
                text = ""
        names = frozenset(sensitive)
        if (
            text
            and len(text) <= _MAX_STRING
            and not self.has_secret(text)
            and not _has_secret_key(args, names, 0)
        ):
            return text
        return _encode(self.value(args or {}, names))

    def __repr__(self) -> str:
        return f"Redactor({len(self.patterns)} patterns, span_arguments={self.span_arguments})"


def _any_of(words: Collection[str]) -> str:
    """A regex matching where any of ``words`` starts, as a tree of their first
    characters: ``a(?:uth|kia)|bearer``. The regex engine tries the branches of an
    alternation one after the other at each position: with one branch per first character it
    tries a few, not one per word (a search of short text costs half as much). A word with
    another as its prefix is left out: where it occurs, the shorter one does."""
    tails: dict[str, list[str]] = {}
    if "" in words:
        return "(?:)"  # the empty word occurs everywhere
    for word in words:
        tails.setdefault(word[0], []).append(word[1:])
    branches = []
    for first, rest in sorted(tails.items()):
        head = re.escape(first)
        if "" in rest:
            branches.append(head)
        elif len(rest) == 1:
            branches.append(head + re.escape(rest[0]))
        else:
            branches.append(f"{head}(?:{_any_of(rest)})")
    return "|".join(branches)


DEFAULT_REDACTOR = Redactor()


def _json_default(obj: Any) -> Any:
    return to_jsonable_python(obj, fallback=repr)


_JSON_SCALARS = frozenset({int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    """``value`` as JSON; ``[...]`` when it nests too deep for pydantic-core (or in a cycle)."""
    try:
        return to_jsonable_python(value, fallback=repr)
    except ValueError:
        return "[...]"


def _json_key(key: Any) -> str:
    """A key that is not a string as pydantic-core writes it (``1``, ``None``, ``1,2``, an
    enum's value)."""
    try:
        return str(next(iter(to_jsonable_python({key: None}, fallback=repr))))
    except (TypeError, ValueError):  # a frozenset, a key nesting too deep
        return repr(key)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def storable(text: str) -> str:
    """``text`` as every store can keep it: a NUL (which PostgreSQL's text refuses) or a lone
    surrogate (a string decoded from bytes that are not UTF-8, which no UTF-8 store takes)
    is written as its ``\\u`` escape; any other text is returned as is."""
    if text.isascii() and "\x00" not in text:
        return text
    return UNSTORABLE.sub(_escaped, text)


def _canonical_encoder() -> Callable[[Any], str]:
    """Compact, key-sorted JSON. The C encoder is built once (``json.dumps`` builds one per
    call, which costs more than the encoding of small arguments). A lone surrogate (a string
    decoded from bytes that are not UTF-8) is written as its ``\\u`` escape: the text is then
    UTF-8, as the digests, stores and trails that take it need."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - interpreters without the C accelerator
        encoder = json.JSONEncoder(
            sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default
        )
        chunks: Callable[[Any, bool], Iterable[str]] = encoder.iterencode
    else:
        chunks = make(
            None, _json_default, json.encoder.encode_basestring, None, ":", ",", True, False, True
        )

    def encode(obj: Any) -> str:
        text = "".join(chunks(obj, False))
        return text if text.isascii() else _SURROGATE.sub(_escaped, text)

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
    for item in items:  # a loop: a generator cost as much as the check of a flat dict
        if type(item) not in _PLAIN_TYPES and _has_secret_key(item, names, depth + 1):
            return True
    return False


_INPUT_VALUE = re.compile(r"(input_value=).*?(, input_type=)")
"""The input a pydantic validation error repeats (shortened as pydantic likes): dropped from
the error of a call that holds secrets."""
_MAX_HIDDEN = 64
_MIN_HIDDEN = 4
_MIN_CUT = 16
"""Values this long are also searched for by their head and tail, :data:`_KEPT_END` each."""
_KEPT_END = 12
"""Values shorter than this are not searched for in error text (``1`` is in every number)."""


def _hidden(value: Any, names: frozenset[str], depth: int, out: list[str]) -> bool:
    """Collect into ``out`` the text of every value under a secret or ``names`` key and every
    random-looking key, as an error message would repeat them (past ``_MAX_HIDDEN`` of
    them the walk stops: one more says there are too many). False when a mapping or list
    lies past ``_MAX_DEPTH``: what it holds is not known (the arguments' column shows
    ``[...]``), so no text that may repeat it can be written."""
    if len(out) > _MAX_HIDDEN:
        return True
    if isinstance(value, Mapping):
        if depth > _MAX_DEPTH:
            return False
        for k, v in value.items():
            key = str(k)
            if key in names or is_secret_name(key):
                if not _leaves(v, depth + 1, out):
                    return False
                continue
            if looks_random(key):
                out.append(key)
            if not _hidden(v, names, depth + 1, out):
                return False
    elif isinstance(value, list | tuple):
        return depth <= _MAX_DEPTH and all(_hidden(v, names, depth + 1, out) for v in value)
    elif not isinstance(value, _PLAIN):  # a dataclass or model: what its JSON form holds
        return _hidden(to_jsonable_python(value, fallback=repr), names, depth, out)
    return True


def _leaves(value: Any, depth: int, out: list[str]) -> bool:
    """Collect into ``out`` the text of every scalar in ``value`` (a secret's); False as
    :func:`_hidden` says."""
    if len(out) > _MAX_HIDDEN:
        return True
    if not isinstance(value, (*_PLAIN, Mapping, list, tuple)):  # a dataclass or model
        value = to_jsonable_python(value, fallback=repr)
    if isinstance(value, Mapping | list | tuple):
        items = value.values() if isinstance(value, Mapping) else value
        return depth <= _MAX_DEPTH and all(_leaves(v, depth + 1, out) for v in items)
    if value is not None and not isinstance(value, bool):
        text = str(value)
        if len(text) >= _MIN_HIDDEN:
            out.append(text)
    return True


def _spellings(text: str) -> list[str]:
    """How an error message may repeat ``text``: as it is, as ``repr``, ``ascii`` and JSON
    escape it, as its UTF-8 bytes' ``repr``, percent-encoded (a URL or form body in an HTTP
    client's error), and for a long one its head and tail (pydantic shortens an input in its
    middle: ``abc...xyz``)."""
    found = [text, repr(text)[1:-1], ascii(text)[1:-1], json.dumps(text)[1:-1]]
    quote = urllib.parse.quote
    found += [repr(text.encode())[2:-1], quote(text), quote(text, safe="")]
    found.append(urllib.parse.quote_plus(text))
    if len(text) >= _MIN_CUT:
        found += [text[:_KEPT_END], text[-_KEPT_END:]]
    return list(dict.fromkeys(found))


@functools.lru_cache(maxsize=4096)
def _secret_keys(keys: tuple[Any, ...]) -> bool:
    return any(is_secret_name(str(key)) or looks_random(str(key)) for key in keys)


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


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether an argument name always holds a secret (password, token, api_key, db_pass,
    ``ｐａｓｓｗｏｒｄ`` in fullwidth letters, ...)."""
    if not name.isascii():
        name = unicodedata.normalize("NFKC", name)
    return SECRET_NAME.search(name) is not None


_VOWELS = frozenset("aeiouAEIOU")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_.~-]{20,512}")


def looks_random(name: str) -> bool:
    """Whether ``name`` reads as a random token rather than words: at least 20 characters of
    a token alphabet, upper and lower case letters and digits (or 32 letters of both cases),
    high character entropy, and few vowels or frequent changes of character class. Hex digests
    and UUIDs (one case) never count; about one random 24-character token in 14 is missed."""
    if len(name) < 20 or _TOKEN_CHARS.fullmatch(name) is None:
        return False
    upper = any(c.isupper() for c in name)
    lower = any(c.islower() for c in name)
    digit = any(c.isdigit() for c in name)
    if not (upper and lower and (digit or len(name) >= 32)):
        return False
    counts = Counter(name)
    size = len(name)
    if -sum(n / size * math.log2(n / size) for n in counts.values()) < 3.8:
        return False
    letters = [c for c in name if c.isalpha()]
    vowels = sum(c in _VOWELS for c in letters) / len(letters)
    changes = sum(_kind(a) != _kind(b) for a, b in itertools.pairwise(name))
    return vowels < 0.28 or changes / (size - 1) >= 0.6


def _kind(char: str) -> int:
    return 0 if char.islower() else 1 if char.isupper() else 2 if char.isdigit() else 3


# -- other spellings ----------------------------------------------------------------------
# One decoding step undoes JSON string escapes (``{\\"password\\": ...}`` inside a string,
# ``\\u0070``), percent-encoding (``password%3D...``, UTF-8 included), compatibility forms of
# Unicode (NFKC: fullwidth ``ｐａｓｓｗｏｒｄ＝``, mathematical letters) and drops invisible
# format characters (zero-width spaces, soft hyphens, bidi controls). :func:`views` yields the
# text after one, two and three steps (``%253D`` is two), stopping once nothing changes. Each
# step is linear in the text.

VIEW_DEPTH = 3
"""How many decoding steps :func:`views` takes at most."""
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|[\"\\/bfnrt'])")
_SIMPLE = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n"}
_SIMPLE |= {"r": "\r", "t": "\t"}
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u180e\u3164\ufeff\uffa0"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f]"
)
# an escape worth undoing: a quote, a backslash or a \u (a bare \n alone changes nothing a
# pattern reads: the YAML pattern knows the escaped line break too)
_WORTH = ('\\"', "\\'", "\\\\", "\\u")


def _unescape(match: re.Match[str]) -> str:
    escape = match.group(0)
    if escape[1] != "u":
        return _SIMPLE[escape[1]]
    code = int(escape[2:], 16)
    return "\ufffd" if 0xD800 <= code <= 0xDFFF else chr(code)


def decoded(text: str) -> str:
    """``text`` after one decoding step (the same text when there is nothing to decode)."""
    if "\\" in text and any(w in text for w in _WORTH):
        text = _ESCAPE.sub(_unescape, text)
    if "%" in text and _PERCENT.search(text) is not None:
        text = urllib.parse.unquote(text, errors="replace")
    if not text.isascii():
        text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return text


def views(text: str) -> Iterator[str]:
    """The spellings of ``text`` one, two and three decoding steps down (fewer when a step
    changes nothing)."""
    for _ in range(VIEW_DEPTH):
        deeper = decoded(text)
        if deeper == text:
            return
        yield deeper
        text = deeper
