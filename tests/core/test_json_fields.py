"""A card (or param) field JSON cannot carry is refused when the class is defined."""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, SecretStr

import toolcards.tools
from toolcards.core.card import ToolCard
from toolcards.core.params import BaseToolParam


def test_a_callable_card_field_is_refused_naming_class_and_field() -> None:
    with pytest.raises(TypeError, match=r"^HookCard\.on_call: .* cannot round-trip through JSON"):

        class HookCard(ToolCard):
            on_call: Callable[..., Any] | None = None


def test_an_arbitrary_object_field_is_refused_even_when_excluded() -> None:
    with pytest.raises(TypeError, match=r"^LockCard\.lock: type threading\.Event"):

        class LockCard(ToolCard):
            model_config = ConfigDict(arbitrary_types_allowed=True)
            lock: threading.Event | None = Field(default=None, exclude=True)


def test_a_class_valued_param_field_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^KindParam\.kind: "):

        class KindParam(BaseToolParam):
            kind: type[int] = int


def test_a_non_json_field_nested_in_a_model_is_refused() -> None:
    class Inner(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        event: threading.Event

    with pytest.raises(TypeError, match=r"^NestedCard\.inner: "):

        class NestedCard(ToolCard):
            inner: Inner | None = None


def test_json_types_and_excluded_secrets_are_accepted() -> None:
    class DataCard(ToolCard):
        root: Path = Path("/srv")
        tags: set[str] = Field(default_factory=set)
        limits: dict[str, float] = Field(default_factory=dict)
        extra: Any = None
        api_key: SecretStr | None = Field(default=None, exclude=True)

    card = DataCard(tags={"a"}, api_key=SecretStr("s"))
    again = DataCard.model_validate_json(card.model_dump_json())
    assert again.tags == {"a"} and again.api_key is None


def _classes(base: type) -> Iterator[type]:
    for sub in base.__subclasses__():
        yield sub
        yield from _classes(sub)


def test_every_built_in_card_and_param_defines_and_round_trips() -> None:
    for info in pkgutil.walk_packages(toolcards.tools.__path__, "toolcards.tools."):
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue  # an optional extra that is not installed
    cards = [c for c in _classes(ToolCard) if c.__module__.startswith("toolcards.")]
    assert len(cards) >= 10
    for card in cards:
        try:
            default = card()
        except ValueError:
            continue  # needs configuration (an MCP server's address)
        assert card.model_validate_json(default.model_dump_json()) == default, card
