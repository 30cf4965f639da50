"""The rules for names: provider-safe tool names and shell-style globs, in one place.

Every model provider accepts tool names made of ``[A-Za-z0-9_-]``, at most 64 characters. A
name that already is one is kept. Any other name is translated the same way everywhere (the
governed toolset, MCP server tools, apcore modules): each run of other characters becomes
``_``, and a suffix hashed from the original name makes it unique and short enough.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Callable, Iterable

MAX_NAME = 64
_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_-]+")
_DIGEST = 8


def is_provider_safe(name: str) -> bool:
    """True when every major model provider accepts ``name`` as it is."""
    return bool(_SAFE.fullmatch(name))


def _base(name: str) -> str:
    return _UNSAFE_RUN.sub("_", name).strip("_") or "tool"


def _suffixed(base: str, original: str) -> str:
    digest = hashlib.sha256(original.encode("utf-8")).hexdigest()[:_DIGEST]
    return f"{base[: MAX_NAME - _DIGEST - 1]}_{digest}"


def provider_safe_name(name: str) -> str:
    """``name`` if it is provider-safe, else its translation with a hash of ``name``: the same
    name always gets the same answer, whatever other names exist."""
    return name if is_provider_safe(name) else _suffixed(_base(name), name)


def provider_safe_names(names: Iterable[str]) -> dict[str, str]:
    """A unique provider-safe name for each of ``names`` (original -> safe), readable where it
    can be: a safe name is kept, a translation without a suffix is used when no other name
    claims it, else :func:`provider_safe_name`'s. The result does not depend on the order."""
    originals = sorted(set(names))
    safe = {n for n in originals if is_provider_safe(n)}
    wanted = {n: _base(n) for n in originals if n not in safe}
    claims: dict[str, int] = {}
    for base in wanted.values():
        claims[base] = claims.get(base, 0) + 1
    result = {n: n for n in safe}
    for name, base in wanted.items():
        unique = claims[base] == 1 and base not in safe and len(base) <= MAX_NAME
        result[name] = base if unique else provider_safe_name(name)
    return result


def glob_matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    """A case-sensitive test of a name against shell-style ``patterns`` (``*``, ``?``,
    ``[...]``); no pattern matches nothing."""
    compiled = glob_pattern(patterns)
    return lambda name: compiled.match(name) is not None


def glob_pattern(patterns: Iterable[str]) -> re.Pattern[str]:
    """One regex matching any of the shell-style ``patterns`` (for callers that keep it)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns) or "(?!)")
