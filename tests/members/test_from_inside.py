"""Members acting on the team from inside their own turn, and long conversations."""

from __future__ import annotations

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from members.support import StaffCard, lifecycle
from support.scripted import Script, call_tool, wait_until
from toolcards.runtime import RoleProfile, Team
from toolcards.runtime.member_actor import trim_history


def _team(team_id: str, script: Script, **fields: object) -> Team:
    profile = RoleProfile.model_validate(
        {"role": "lead", "model": script.model, "cards": [StaffCard()], **fields}
    )
    return Team(team_id, profiles=[profile])


def test_member_hires_a_colleague_from_a_tool_call() -> None:
    with _team("recruit", Script(call_tool("recruit", {"role": "lead"}))) as team:
        lead = team.hire("lead")
        assert team.send(lead, "get help") == "tool said: @lead-2"
        assert [m.name for m in team.members()] == [lead, "@lead-2"]


def test_member_that_fires_itself_answers_then_stops() -> None:
    with _team("resign", Script(call_tool("resign", {}))) as team:
        lead = team.hire("lead")
        assert team.send(lead, "you may go") == "tool said: bye"
        assert team.members() == []
        wait_until(lambda: team.actor(lead) is None)
        assert lifecycle(team, "member_fired")[0]["clean"] is False  # stopped after its turn


def test_history_keeps_only_the_newest_whole_turns_within_max_history() -> None:
    script = Script()
    with _team("trim", script, max_history=4) as team:
        lead = team.hire("lead")
        for text in ("one", "two", "three", "four"):
            team.send(lead, text)
        assert script.prompts() == ["two", "three", "four"]  # 4 stored + the new turn
        assert [len(messages) for messages, _ in script.calls] == [1, 3, 5, 5]


def _turn(text: str) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart(text)]),
        ModelResponse(parts=[ToolCallPart("t", {}, tool_call_id=text)]),
        ModelRequest(parts=[ToolReturnPart("t", "ok", tool_call_id=text)]),
        ModelResponse(parts=[TextPart("done")]),
    ]


def test_trimmed_history_never_starts_between_a_tool_call_and_its_result() -> None:
    history = _turn("a") + _turn("b")
    assert trim_history(history, 6) == history[4:]
    assert trim_history(history, 2) == history[4:]  # the last turn is always kept whole
    assert trim_history(history, None) == history
