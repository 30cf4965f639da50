from __future__ import annotations

import pytest

from core_cards import DependentCard, EchoCard, OtherCard
from toolcards import RetriableError, SkillTool, ToolFactory
from toolcards.core import annotations_of, describe
from toolcards.tools.skills.card import Skill


class Recorder:
    def __init__(self) -> None:
        self.team_id = "t"


def test_cards_are_ordered_by_dependencies_stably() -> None:
    a = DependentCard(needs=["EchoCard"])
    b = EchoCard()
    factory = ToolFactory([a, SkillTool(), b])
    assert [type(c).__name__ for c in factory.cards] == ["SkillTool", "EchoCard", "DependentCard"]


def test_missing_dependency_names_the_cards() -> None:
    with pytest.raises(ValueError, match="DependentCard depends on EchoCard"):
        ToolFactory([DependentCard(needs=["EchoCard"])])


def test_optional_dependency_orders_but_may_be_absent() -> None:
    card = DependentCard(wants=["EchoCard"])
    assert ToolFactory([card]).cards == [card]
    factory = ToolFactory([card, EchoCard()])
    assert [type(c).__name__ for c in factory.cards] == ["EchoCard", "DependentCard"]


def test_cycle_is_rejected_before_observer_is_attached() -> None:
    class CycleA(DependentCard):
        pass

    class CycleB(DependentCard):
        pass

    a, b = CycleA(needs=["CycleB"]), CycleB(needs=["CycleA"])
    with pytest.raises(ValueError, match="cycle.*CycleA.*CycleB"):
        ToolFactory([a, b], observer=Recorder())
    assert a.observer_or_none() is None and b.observer_or_none() is None


def test_duplicate_tool_names_name_both_cards() -> None:
    with pytest.raises(ValueError, match="'echo'.*EchoCard and OtherCard"):
        ToolFactory([EchoCard(), OtherCard()])


def test_duplicate_command_names_name_both_cards() -> None:
    class Shouter(OtherCard):
        def get_tools(self):  # type: ignore[no-untyped-def]
            return []

        def get_commands(self):  # type: ignore[no-untyped-def]
            def shout(text: str) -> str:
                return text

            return [shout]

    with pytest.raises(ValueError, match="command name 'shout'.*EchoCard and Shouter"):
        ToolFactory([EchoCard(), Shouter()])


def test_observer_is_attached_to_every_card() -> None:
    owner = Recorder()
    cards = [EchoCard(), SkillTool()]
    ToolFactory(cards, observer=owner)
    assert all(c.get_observer() is owner for c in cards)


def test_retry_exception_converts_sync_retriable_error() -> None:
    class Retry(Exception):
        pass

    tools = {t.__name__: t for t in ToolFactory([EchoCard()], retry_exception=Retry).get_tools()}
    with pytest.raises(Retry, match="say something else"):
        tools["echo"]("bad")
    assert tools["echo"]("ok") == "echo: ok"


@pytest.mark.anyio
async def test_retry_exception_converts_async_retriable_error() -> None:
    class Retry(Exception):
        pass

    tools = {t.__name__: t for t in ToolFactory([EchoCard()], retry_exception=Retry).get_tools()}
    with pytest.raises(Retry, match="async: say something else"):
        await tools["echo_async"]("bad")


def test_without_retry_exception_retriable_error_is_kept() -> None:
    tools = {t.__name__: t for t in ToolFactory([EchoCard()]).get_tools()}
    with pytest.raises(RetriableError):
        tools["echo"]("bad")


def test_instructions_are_appended_to_descriptions() -> None:
    from toolcards.tools.skills.card import UseSkill

    card = SkillTool(use_skill=UseSkill(instructions="Only load skills you need."))
    text = ToolFactory([card]).tool_descriptions()["use_skill"]
    assert text.startswith("Load the full instructions")
    assert text.endswith("Only load skills you need.")


def test_annotations_are_kept_on_tools() -> None:
    tools = {t.__name__: t for t in ToolFactory([EchoCard()]).get_tools()}
    assert annotations_of(tools["echo"]).readonly is True
    assert annotations_of(tools["echo_async"]).readonly is False
    assert describe(tools["echo"]).startswith("Repeat the text.")


def test_system_prompts_and_commands_come_from_every_card() -> None:
    skill = SkillTool(skills=[Skill(name="x", summary="does x", content="...")])
    factory = ToolFactory([EchoCard(), skill])
    assert "- x: does x" in factory.get_system_prompts()[0]()
    commands = factory.get_commands()
    assert commands.names() == ["shout", "skills", "use_skill"]
    assert commands.dispatch("/use_skill x") == "# Skill: x\n..."
    assert commands.dispatch("/shout hello there") == "HELLO THERE"


@pytest.mark.anyio
async def test_toolset_lists_tools_with_metadata() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    factory = ToolFactory([EchoCard(), SkillTool()])
    model = TestModel(call_tools=[])
    agent = Agent(model, toolsets=[factory.toolset()])
    await agent.run("hi")
    defs = {d.name: d for d in model.last_model_request_parameters.function_tools}  # type: ignore[union-attr]
    assert set(defs) == {"echo", "echo_async", "use_skill"}
    assert defs["echo"].metadata is not None and defs["echo"].metadata["readonly"] is True
    assert defs["use_skill"].metadata is not None
    assert defs["use_skill"].metadata["idempotent"] is True
