"""Who is calling a card's tool: the member the card is bound to, never a tool argument."""

from __future__ import annotations

from toolcards.core.card import ToolCard
from toolcards.core.identity import calling_principal


def caller_address(card: ToolCard) -> str:
    """The address of the member ``card`` is bound to, or ``"user"`` when it is unbound."""
    address = getattr(card.observer_or_none(), "address", None)
    return str(address) if address else "user"


def writer_of(card: ToolCard) -> str:
    """Who writes through ``card`` now: the principal of the governed call that runs the tool
    (an MCP client's token, the CLI's local principal), else :func:`caller_address`. A team
    member governed as ``agent.<address>`` is its address."""
    return governed_writer(caller_address(card))


def governed_writer(address: str) -> str:
    """:func:`writer_of` for a member whose ``address`` was read already (at binding: a card
    holds its owner weakly)."""
    who = calling_principal.get()
    if who is None or who.id == f"agent.{address}":
        return address
    return who.id
