"""Known card types, and the polymorphic (tagged) form of card lists.

Loading never imports a dotted path found in data: a type tag resolves through this registry,
through the built-in table registered by the package, or through the ``toolcards.cards``
entry-point group.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable
from typing import Annotated, Any, cast

from pydantic import BeforeValidator, PlainSerializer, ValidationError, ValidationInfo

from toolcards._builtin import BUILTIN_CARDS
from toolcards._lazy import entry_point_classes
from toolcards.core.card import ToolCard
from toolcards.core.factory import card_views
from toolcards.core.trust import FROM_DATA, TRUST, HostTrust
from toolcards.core.views import CardView

TYPE_KEY = "type"
ENTRY_POINT_GROUP = "toolcards.cards"


class CardTypes:
    """Registry of card classes by type tag: explicit registrations, then every card class
    defined in the process, then the built-in table, then the entry points."""

    def __init__(self) -> None:
        self._classes: dict[str, type[ToolCard]] = {}
        self._lazy: dict[str, tuple[str, str]] = {}
        self._entry: dict[str, type[ToolCard]] = {}
        self._entry_points_loaded = False
        self._lock = threading.Lock()

    def register(self, cls: type[ToolCard], name: str | None = None) -> None:
        """Register ``cls`` under ``name`` (default: its ``card_type``); wins over the rest."""
        self._classes[name or cls.card_type] = cls

    def register_lazy(self, name: str, module: str, attr: str) -> None:
        """Register a built-in card that is imported only when first needed."""
        self._lazy[name] = (module, attr)

    def names(self) -> list[str]:
        """Every known type tag."""
        self._load_entry_points()
        known = set(self._classes) | set(self._lazy) | set(self._entry)
        return sorted(known | set(ToolCard.defined_types()))

    def resolve(self, name: str) -> type[ToolCard]:
        """The class for type tag ``name``; ValueError listing the known tags when unknown."""
        found = self._classes.get(name) or ToolCard.defined_types().get(name)
        if found is not None:
            return found
        lazy = self._lazy.get(name)
        if lazy is not None:
            cls: type[ToolCard] = getattr(importlib.import_module(lazy[0]), lazy[1])
            return cls
        self._load_entry_points()
        found = self._entry.get(name)
        if found is None:
            raise ValueError(f"unknown card type {name!r}; known types: {', '.join(self.names())}")
        return found

    def _load_entry_points(self) -> None:
        with self._lock:
            if self._entry_points_loaded:
                return
            self._entry_points_loaded = True
        for name, cls in entry_point_classes(ENTRY_POINT_GROUP, ToolCard):
            card = cast(type[ToolCard], cls)
            self._entry.setdefault(name, card)
            self._entry.setdefault(card.card_type, card)


def registered_views() -> list[CardView]:
    """The views of every known card type's card with its defaults (a card type that needs
    configuration has none here): what a surface offers for a team it knows only from its
    store."""
    cards: dict[type[ToolCard], ToolCard] = {}
    for name in CARD_TYPES.names():
        try:
            cls = CARD_TYPES.resolve(name)
            if cls not in cards:
                cards[cls] = cls()
        except (ValidationError, TypeError, ImportError):
            continue
    return card_views(cards.values())


CARD_TYPES = CardTypes()
for _name, (_module, _attr) in BUILTIN_CARDS.items():
    CARD_TYPES.register_lazy(_name, _module, _attr)


def dump_card(card: ToolCard) -> dict[str, Any]:
    """One card as a JSON-ready dict with its type tag."""
    return {TYPE_KEY: card.card_type, **card.model_dump(mode="json")}


def load_card(data: Any, *, trust: object = None) -> ToolCard:
    """One card from a tagged dict (or a card instance, returned as is).

    ``trust`` is the host program's decision about what a card from data may do on this
    host (a :class:`~toolcards.core.trust.HostTrust`, a list of allowed commands, or a config
    mapping of grants): every card field that reaches the host (a program, an environment
    variable, a URL that gets a host credential, a private-network allowance, a folder outside
    the workspace) is refused unless it allows that value. The default trusts nothing.
    """
    if isinstance(data, ToolCard):
        return data
    if not isinstance(data, dict) or not isinstance(data.get(TYPE_KEY), str):
        raise ValueError(f"a card must be a mapping with a {TYPE_KEY!r} tag, got {data!r:.80}")
    fields = {k: v for k, v in data.items() if k != TYPE_KEY}
    cls = CARD_TYPES.resolve(data[TYPE_KEY])
    return cls.model_validate(fields, context={FROM_DATA: True, TRUST: HostTrust.of(trust)})


def dump_cards(cards: Iterable[ToolCard]) -> list[dict[str, Any]]:
    """A list of cards as tagged dicts."""
    return [dump_card(c) for c in cards]


def load_cards(data: Any, *, trust: object = None) -> list[ToolCard]:
    """A list of cards from tagged dicts; each entry is validated by its own class, with
    ``trust`` (see :func:`load_card`)."""
    if isinstance(data, str | bytes):
        raise ValueError(
            "cards must be a list of tagged mappings, not text: parse it first, e.g. "
            "load_cards(yaml.safe_load(text)) or load_cards(json.loads(text))"
        )
    if not isinstance(data, list | tuple):
        raise ValueError(f"cards must be a list of tagged mappings, got {type(data).__name__}")
    decided = HostTrust.of(trust)
    return [load_card(item, trust=decided) for item in data]


def _validate_cards(value: Any, info: ValidationInfo) -> list[Any]:
    context = info.context if isinstance(info.context, dict) else {}
    return load_cards(value, trust=context.get(TRUST))


CardList = Annotated[
    list[Any],
    BeforeValidator(_validate_cards),
    PlainSerializer(lambda cards: dump_cards(cards), return_type=list[dict[str, Any]]),
]
"""A pydantic field type for a polymorphic list of cards (tagged in JSON and YAML). Cards
given as data are loaded with the trust in the validation context under ``TRUST`` (none by
default): ``Model.model_validate(data, context={TRUST: trust})``."""
