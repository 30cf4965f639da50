"""Tools beyond the decision table, importable by a config (``extra_tools:TOOLS``)."""

from __future__ import annotations

from toolcards.core.errors import RetriableError
from toolcards.core.spec import annotate


def explode(reason: str) -> str:
    """Always fails with a server-side error."""
    raise RuntimeError(f"secret internals: {reason}")


def pick(index: int) -> str:
    """Picks one of three items; asks for a fix when the index is out of range."""
    if not 0 <= index < 3:
        raise RetriableError("index must be 0, 1 or 2")
    return ["a", "b", "c"][index]


def configure(limit: int, ratio: float, enabled: bool, tags: list[str], name: str) -> dict:
    """Echoes typed arguments."""
    return {"limit": limit, "ratio": ratio, "enabled": enabled, "tags": tags, "name": name}


def publish(text: str) -> str:
    """Publishes text (a human approves each call)."""
    return f"published: {text}"


TOOLS = [explode, pick, configure, annotate(publish, requires_approval=True)]
