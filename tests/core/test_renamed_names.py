"""Former public names: ``Capability`` is now ``CardCapability`` (a card's builders) and
``ToolCapability`` (an executable tool); ``ToolCards`` (one letter from ``ToolCard``) is now
``GovernedCards``. The old name works one release, with a warning."""

from __future__ import annotations

import importlib

import pytest

RENAMED = [
    ("toolcards", "Capability", "CardCapability"),
    ("toolcards.core", "Capability", "CardCapability"),
    ("toolcards.core.card", "Capability", "CardCapability"),
    ("toolcards.governance", "Capability", "ToolCapability"),
    ("toolcards", "ToolCards", "GovernedCards"),
    ("toolcards.surfaces.agent", "ToolCards", "GovernedCards"),
    ("toolcards.governance.capability", "Capability", "ToolCapability"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED)
def test_the_former_name_is_the_new_class_with_a_warning_naming_it(
    module: str, old: str, new: str
) -> None:
    facade = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"it is now {module}\.{new}\b"):
        former = getattr(facade, old)
    assert former is getattr(facade, new)


def test_the_warning_points_at_the_line_that_used_the_former_name() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        from toolcards import Capability  # noqa: F401
    assert caught[0].filename == __file__


@pytest.mark.parametrize(("module", "old", "new"), RENAMED[:-1])  # the modules with an __all__
def test_the_former_name_is_not_exported(module: str, old: str, new: str) -> None:
    facade = importlib.import_module(module)
    assert old not in facade.__all__
    assert new in facade.__all__


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import toolcards.governance

    with pytest.raises(AttributeError, match="no attribute 'Capabilty'"):
        _ = toolcards.governance.Capabilty  # type: ignore[attr-defined]
