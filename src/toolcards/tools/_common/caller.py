"""Who is calling a card's tool: the member the card is bound to, never a tool argument."""

from __future__ import annotations

from toolcards.core.card import ToolCard


def caller_address(card: ToolCard) -> str:
    """The address of the member ``card`` is bound to, or ``"user"`` when it is unbound."""
    address = getattr(card.observer_or_none(), "address", None)
    return str(address) if address else "user"
