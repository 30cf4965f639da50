"""Per-turn context: a full block first, then only what changed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field


class ContextState(BaseModel):
    """A snapshot of what a card wants the model to know this turn.

    ``key`` identifies the state across turns; ``title`` heads its block; ``items`` maps a stable
    item id to the line shown for it. Subclasses may override the two renderers.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    title: str
    items: dict[str, str] = Field(default_factory=dict)
    added_label: str = "added"
    removed_label: str = "removed"
    changed_label: str = "changed"

    def render_full(self) -> str:
        """The whole state as text."""
        if not self.items:
            return f"## {self.title}\n(none)"
        lines = [f"- {line}" for line in self.items.values()]
        return f"## {self.title}\n" + "\n".join(lines)

    def render_delta(self, previous: ContextState | None) -> str | None:
        """What changed since ``previous``; None when nothing did."""
        if previous is None:
            return self.render_full()
        old, new = previous.items, self.items
        lines: list[str] = []
        for item_id, line in new.items():
            if item_id not in old:
                lines.append(f"+ {self.added_label}: {line}")
            elif old[item_id] != line:
                lines.append(f"~ {self.changed_label}: {line}")
        lines.extend(
            f"- {self.removed_label}: {line}" for item_id, line in old.items() if item_id not in new
        )
        if not lines and previous.title == self.title:
            return None
        return f"## {self.title}\n" + "\n".join(lines)


ContextProvider = Callable[[], ContextState]


class ContextUpdater:
    """Turns context providers into one ``Context update N`` block per turn.

    The first block is full, later ones hold only deltas, and a turn where nothing changed
    yields None (no block at all). ``previous`` and ``count`` resume from the states and the
    number of the last block already shown (for example, as recorded in a message history).
    """

    def __init__(
        self,
        providers: Sequence[ContextProvider],
        *,
        previous: Mapping[str, ContextState] | None = None,
        count: int = 0,
    ) -> None:
        self._providers = list(providers)
        self._previous: dict[str, ContextState] = dict(previous or {})
        self._count = count

    @property
    def count(self) -> int:
        """How many blocks were emitted so far."""
        return self._count

    def next_block(self) -> str | None:
        """The block for this turn, or None when nothing changed."""
        sections = self.next_sections()
        if not sections:
            return None
        self._count += 1
        return f"Context update {self._count}\n\n" + "\n\n".join(sections)

    def next_sections(self) -> list[str]:
        """What changed since the states shown last, one section per state (all of them in
        full when none was shown); empty when nothing changed. Not counted as a block."""
        parts: list[str] = []
        seen: dict[str, ContextState] = {}
        for state in (provider() for provider in self._providers):
            seen[state.key] = state
            rendered = state.render_delta(self._previous.get(state.key))
            if rendered:
                parts.append(rendered)
        parts.extend(
            f"## {old.title}\n(gone)" for key, old in self._previous.items() if key not in seen
        )
        self._previous = seen
        return parts

    def snapshot(self) -> Mapping[str, ContextState]:
        """The states shown so far, by key."""
        return dict(self._previous)
