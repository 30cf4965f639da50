"""Provider-safe tool names for dotted apcore module ids.

Model providers accept tool names made of ``[a-zA-Z0-9_-]`` and at most 64 characters.
Module ids that already satisfy this keep their name. Others are translated (every other
character becomes ``_``) and, when the translation collides with a name already taken or is too
long, get a suffix derived from a hash of the original id, so the outcome never depends on the
order in which modules were registered.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MAX_TOOL_NAME = 64
_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE_CHAR = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LEN = 8


def is_safe_name(name: str) -> bool:
    """Whether ``name`` is accepted verbatim by the major model providers."""
    return bool(_SAFE.match(name))


def _digest(module_id: str) -> str:
    return hashlib.sha256(module_id.encode("utf-8")).hexdigest()[:_HASH_LEN]


def _with_suffix(base: str, module_id: str) -> str:
    suffix = "_" + _digest(module_id)
    return base[: MAX_TOOL_NAME - len(suffix)] + suffix


def translate(module_id: str) -> str:
    """Translate one module id, without regard to collisions."""
    base = _UNSAFE_CHAR.sub("_", module_id) or "tool"
    if len(base) > MAX_TOOL_NAME:
        return _with_suffix(base, module_id)
    return base


def assign_names(module_ids: Iterable[str], *, sanitize: bool = True) -> dict[str, str]:
    """Map each module id to a unique tool name (module id -> tool name).

    Ids that are already safe claim their own names first; translated ids follow in sorted
    order and fall back to a hash suffix on collision. The result is deterministic for a given
    set of ids.
    """
    ids = sorted(set(module_ids))
    if not sanitize:
        return {mid: mid for mid in ids}
    names: dict[str, str] = {}
    taken: set[str] = set()
    for mid in ids:
        if is_safe_name(mid):
            names[mid] = mid
            taken.add(mid)
    for mid in ids:
        if mid in names:
            continue
        name = translate(mid)
        if name in taken:
            name = _with_suffix(name, mid)
        counter = 2
        candidate = name
        while candidate in taken:  # a hash collision on top of a name collision
            candidate = _with_suffix(name, f"{mid}#{counter}")
            counter += 1
        names[mid] = candidate
        taken.add(candidate)
    return names
