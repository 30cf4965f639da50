"""The docs hook that links the first mention of each public name to the API reference, and the
reference itself: it documents every name of the public contract."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "reference_links", REPO / "docs" / "_hooks" / "reference_links.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_first_mention_is_linked_and_later_ones_are_not() -> None:
    text = "A `Team` holds actors; a `Team` stops.\n"
    out = hook().link_first_mentions(text, "guide.md")
    assert out == (
        "A [`Team`](reference/runtime.md#toolcards.runtime.Team) holds actors; a `Team` stops.\n"
    )


def test_links_are_relative_to_the_page() -> None:
    out = hook().link_first_mentions("Use `ToolFactory`.", "cards/workspace.md")
    assert "(../reference/core.md#toolcards.core.ToolFactory)" in out


def test_a_code_span_starting_with_the_name_is_linked_whole() -> None:
    out = hook().link_first_mentions('Call `Team.resume("t1")` later.', "guide.md")
    assert '[`Team.resume("t1")`](reference/runtime.md#toolcards.runtime.Team)' in out


def test_code_blocks_headings_and_existing_links_are_left_alone() -> None:
    text = (
        "## The `Team`\n"
        "```python\nTeam('t1')  # `Team`\n```\n"
        "See [`Team`](elsewhere.md) and `Team` again.\n"
    )
    assert hook().link_first_mentions(text, "guide.md") == text


def test_reference_pages_are_not_rewritten() -> None:
    text = "The `Team` class."
    assert hook().link_first_mentions(text, "reference/runtime.md") == text


CONTRACT = {
    "core": ["ToolCard", "BaseToolParam", "Channels", "ToolFactory", "CommandRegistry",
             "RetriableError", "ToolObserverGone", "ToolStateEvent"],
    "cards": ["WorkspaceTool", "PlanningTool", "KnowledgeGraphTool", "VectorStoreTool",
              "SearchTool", "TeamTool", "NotificationTool", "MCPTool", "ExecTool", "SkillTool"],
    "governance": ["Identity", "Policy", "GovernedToolset", "AuditLog", "Executor"],
    "runtime": ["Team", "RoleProfile", "RayActorSystem", "PostgresStore", "ToolActor"],
    "surfaces": ["SurfaceRuntime", "serve_mcp", "run_cli", "load_config"],
}  # fmt: skip


def test_the_reference_documents_every_name_of_the_public_contract() -> None:
    for page, names in CONTRACT.items():
        text = (REPO / "docs" / "reference" / f"{page}.md").read_text()
        documented = {m.rsplit(".", 1)[1] for m in re.findall(r"^::: (\S+)", text, flags=re.M)}
        assert set(names) <= documented, (page, set(names) - documented)


def test_every_card_param_class_is_in_the_reference() -> None:
    from toolcards.core.card import ToolCard
    from toolcards.core.params import BaseToolParam

    text = (REPO / "docs" / "reference" / "cards.md").read_text()
    documented = set(re.findall(r"^::: (\S+)", text, flags=re.M))
    for card in CONTRACT["cards"]:
        cls = getattr(__import__("toolcards", fromlist=[card]), card)
        assert issubclass(cls, ToolCard)
        assert f"{cls.__module__}.{card}" in documented
        for field in cls.model_fields.values():
            for param in _params_in(field.annotation, BaseToolParam):
                assert f"{param.__module__}.{param.__name__}" in documented, (card, param)


def _params_in(annotation: object, base: type) -> list[type]:
    import typing

    if isinstance(annotation, type):
        return [annotation] if issubclass(annotation, base) else []
    return [p for arg in typing.get_args(annotation) for p in _params_in(arg, base)]
