"""The capability table: one way a card turns its fields into tools, commands, prompts and
context, and a clear error for a channel a capability does not support."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import ValidationError

from toolcards import BaseToolParam, CardCapability, Channels, ToolCard, load_cards
from toolcards.core import ToolFunc
from toolcards.tools.planning.card import GetPlanning, PlanningTool, UpdatePlanning
from toolcards.tools.workspace.card import ReadParam


class Shout(BaseToolParam):
    pass


class Echo(ToolCard):
    shout: bool | Shout = True
    quiet: bool | Shout = False

    def _shout(self, param: Shout) -> ToolFunc:
        def shout(text: str) -> str:
            """Say it loudly."""
            return text.upper()

        return shout

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "shout": CardCapability(tool=_shout, command=_shout),
        "quiet": CardCapability(tool=_shout, command=_shout),
    }


def test_fields_switch_capabilities_on_each_channel() -> None:
    card = Echo()
    assert [f.__name__ for f in card.get_tools()] == ["shout"]
    assert [f.__name__ for f in card.get_commands()] == ["shout"]
    assert card.get_system_prompts() == [] and card.get_context_states() == []
    only_command = Echo(shout=Shout(expose={Channels.COMMAND}))
    assert only_command.get_tools() == [] and len(only_command.get_commands()) == 1


def test_instructions_reach_the_description() -> None:
    from toolcards.core import describe

    (tool,) = Echo(shout=Shout(instructions="Only for headlines.")).get_tools()
    assert describe(tool).endswith("Only for headlines.")


@pytest.mark.parametrize(
    ("build", "unsupported", "supported"),
    [
        (lambda: GetPlanning(expose={Channels.TOOL_CALL}), "tool_call", "command, llm_context"),
        (lambda: UpdatePlanning(expose={Channels.COMMAND}), "command", "tool_call"),
        (lambda: Shout(expose={Channels.SYSTEM_PROMPT}), "system_prompt", "command, tool_call"),
        (lambda: ReadParam(expose={Channels.SYSTEM_PROMPT}), "system_prompt", "command, tool_call"),
    ],
)
def test_an_unsupported_channel_is_a_clear_error(
    build: object, unsupported: str, supported: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        build()  # type: ignore[operator]
    text = str(caught.value)
    assert f"cannot be exposed on {unsupported}" in text
    assert f"it supports: {supported}" in text


def test_the_error_also_comes_when_a_card_is_loaded() -> None:
    with pytest.raises(ValidationError, match="cannot be exposed on command"):
        load_cards([{"type": "PlanningTool", "update_planning": {"expose": ["command"]}}])
    with pytest.raises(ValidationError, match="cannot be exposed on tool_call"):
        PlanningTool(get_planning={"expose": ["tool_call"]})


def test_a_table_naming_a_missing_field_fails_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="not a field"):

        class Broken(ToolCard):
            capabilities: ClassVar[dict[str, CardCapability]] = {"ghost": CardCapability()}


def test_a_default_exposure_the_table_cannot_serve_fails_when_the_class_is_defined() -> None:
    class Loud(BaseToolParam):  # default expose: tool_call and command
        pass

    with pytest.raises(TypeError, match="default expose.*command"):

        class ToolOnly(ToolCard):
            loud: bool | Loud = True

            def _loud(self, param: Loud) -> ToolFunc:
                return lambda: "!"

            capabilities: ClassVar[dict[str, CardCapability]] = {"loud": CardCapability(tool=_loud)}
