"""``load_card(s)(..., trust=...)``: cards from data are validated knowing they come from data
and with the host's trust decision; cards built in code never see either."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import BaseModel, ValidationInfo, model_validator

from toolcards import HostTrust, ToolCard, load_cards
from toolcards.core import load_card
from toolcards.core.registry import FROM_DATA, TRUST, CardList


class ContextProbe(ToolCard):
    """Records the validation context it was built with."""

    seen: ClassVar[list[dict[str, Any] | None]] = []

    @model_validator(mode="after")
    def _record(self, info: ValidationInfo) -> Self:
        ContextProbe.seen.append(info.context)
        return self


class Holder(BaseModel):
    cards: CardList


def setup_function() -> None:
    ContextProbe.seen.clear()


def test_a_card_from_data_is_validated_as_data_trusted_with_nothing_by_default() -> None:
    load_card({"type": "ContextProbe"})
    (context,) = ContextProbe.seen
    assert context is not None and context[FROM_DATA] is True
    trust = context[TRUST]
    assert isinstance(trust, HostTrust)
    assert (trust.commands, trust.env, trust.urls, trust.paths) == ((), frozenset(), (), ())
    assert not trust.private_network and not trust.execution


def test_the_trust_given_to_load_cards_reaches_every_card() -> None:
    trust = HostTrust(env=["X"])
    load_cards([{"type": "ContextProbe"}, {"type": "ContextProbe"}], trust=trust)
    assert [c[TRUST] for c in ContextProbe.seen if c] == [trust, trust]


def test_a_card_built_in_code_is_not_marked_as_data() -> None:
    card = ContextProbe()
    assert load_card(card) is card
    assert ContextProbe.seen == [None]


def test_a_card_list_field_passes_the_trust_in_its_validation_context() -> None:
    trust = HostTrust(env=["X"])
    Holder.model_validate({"cards": [{"type": "ContextProbe"}]}, context={TRUST: trust})
    Holder.model_validate({"cards": [{"type": "ContextProbe"}]})
    given, default = (c[TRUST] if c else None for c in ContextProbe.seen)
    assert given is trust and isinstance(default, HostTrust) and not default.env
