"""Provider-safe tool names: ``[a-zA-Z0-9_-]``, at most 64 characters, collisions resolved."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MAX_NAME = 64
_INVALID = re.compile(r"[^A-Za-z0-9_-]+")


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]


def _base(name: str) -> str:
    return _INVALID.sub("_", name).strip("_") or "tool"


def _with_digest(base: str, original: str) -> str:
    return f"{base[: MAX_NAME - 9]}_{_digest(original)}"


def join_prefix(prefix: str, name: str) -> str:
    """``prefix`` and ``name`` joined with ``_`` (``crm`` + ``foo`` -> ``crm_foo``); a prefix
    that already ends in ``_`` or ``-`` is used as it is."""
    if not prefix or prefix.endswith(("_", "-")):
        return prefix + name
    return f"{prefix}_{name}"


def sanitize_names(originals: Iterable[str], prefix: str = "") -> dict[str, str]:
    """Map each original name to a unique, provider-safe name (``prefix_`` prepended).

    A name that is already valid keeps its spelling. A changed or too-long name that would clash
    gets a short digest of the original appended, so the result does not depend on the order
    in which the server lists its tools.
    """
    names = sorted(set(originals))
    wanted = {n: _base(join_prefix(prefix, n)) for n in names}
    for name, base in wanted.items():
        if len(base) > MAX_NAME:
            wanted[name] = _with_digest(base, name)
    counts: dict[str, int] = {}
    for base in wanted.values():
        counts[base] = counts.get(base, 0) + 1
    result: dict[str, str] = {}
    for name, base in wanted.items():
        clash = counts[base] > 1 and join_prefix(prefix, name) != base
        result[name] = _with_digest(base, name) if clash else base
    return result
