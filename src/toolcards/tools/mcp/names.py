"""Provider-safe tool names: ``[a-zA-Z0-9_-]``, at most 64 characters, collisions resolved."""

from __future__ import annotations

from collections.abc import Iterable

from toolcards.core.names import provider_safe_names


def join_prefix(prefix: str, name: str) -> str:
    """``prefix`` and ``name`` joined with ``_`` (``crm`` + ``foo`` -> ``crm_foo``); a prefix
    that already ends in ``_`` or ``-`` is used as it is."""
    if not prefix or prefix.endswith(("_", "-")):
        return prefix + name
    return f"{prefix}_{name}"


def sanitize_names(originals: Iterable[str], prefix: str = "") -> dict[str, str]:
    """Map each original name to a unique, provider-safe name (``prefix_`` prepended), by the
    one rule of :mod:`toolcards.core.names`; the result does not depend on the listing order."""
    joined = {name: join_prefix(prefix, name) for name in set(originals)}
    safe = provider_safe_names(joined.values())
    return {name: safe[full] for name, full in joined.items()}
