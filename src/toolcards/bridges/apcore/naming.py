"""Provider-safe tool names for dotted apcore module ids (the rule of
:mod:`toolcards.core.names`: safe ids keep their name; others are translated, with a suffix
hashed from the id when the translation is taken or too long; the outcome never depends on
the order in which modules were registered)."""

from __future__ import annotations

from collections.abc import Iterable

from toolcards.core.names import MAX_NAME, is_provider_safe, provider_safe_names

MAX_TOOL_NAME = MAX_NAME


def is_safe_name(name: str) -> bool:
    """Whether ``name`` is accepted verbatim by the major model providers."""
    return is_provider_safe(name)


def assign_names(module_ids: Iterable[str], *, sanitize: bool = True) -> dict[str, str]:
    """Map each module id to a unique tool name (module id -> tool name)."""
    ids = sorted(set(module_ids))
    if not sanitize:
        return {mid: mid for mid in ids}
    return provider_safe_names(ids)
