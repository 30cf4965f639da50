"""Who may read a card's summary and context: the one rule of every surface that shows them
(the pydantic-ai capability, team members' agents, the MCP server's card prompts).

A card's system prompt and per-turn context show team state (a planning board, a graph
summary, the roster). They reach a caller only when the policy lets it call at least one of
the card's tools, or when a rule allows it the target ``context:<CardType>`` (a declared read
right, for a caller that reads a board but may not change it). The read right is a rule that
names ``context:`` targets, never the default effect nor a catch-all ``*`` rule: a policy that
allows everything else (by default or by a last ``*`` rule) and denies a caller every planning
tool does not hand it the board.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolcards.core.identity import Identity
from toolcards.governance.policy.policy import Policy

__all__ = ["CardReads", "may_read_card", "read_target"]


def read_target(card_type: str) -> str:
    """The policy target of the read right on a card's summary and context."""
    return f"context:{card_type}"


def may_read_card(policy: Policy, identity: Identity, card_type: str, tools: Iterable[str]) -> bool:
    """True when ``identity`` may read the summary and context of a ``card_type`` card whose
    tools are ``tools``."""
    if any(policy.visible(identity, tool) for tool in tools):
        return True
    return policy.grants_by_name(identity, read_target(card_type))


@dataclass(frozen=True)
class CardReads:
    """:func:`may_read_card` as a capability's ``readable`` filter (see
    :class:`~toolcards.core.agent_capability.CardsCapability`): the caller of a run is
    ``identity_of(ctx)``, as a governed toolset resolves it."""

    policy: Policy
    identity_of: Callable[[Any], Identity]

    def __call__(self, ctx: Any, card_type: str, tools: Sequence[str]) -> bool:
        return may_read_card(self.policy, self.identity_of(ctx), card_type, tools)
