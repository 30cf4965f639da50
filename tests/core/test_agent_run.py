"""End to end: cards through a pydantic-ai Agent driven by FunctionModel."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core_cards import EchoCard
from toolcards import SkillTool, ToolFactory
from toolcards.tools.skills.card import Skill


def _tool_results(messages: list[ModelMessage]) -> list[Any]:
    found: list[Any] = []
    for message in messages:
        for part in getattr(message, "parts", []):
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                found.append(part)
    return found


def _script(calls: list[tuple[str, dict[str, object]]]) -> FunctionModel:
    """A model that makes the given tool calls one per turn, then answers with the last result."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(
            1
            for m in messages
            for p in getattr(m, "parts", [])
            if isinstance(p, ToolReturnPart | RetryPromptPart)
        )
        if done < len(calls):
            name, args = calls[done]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{done}")])
        last = _tool_results(messages)[-1]
        return ModelResponse(parts=[TextPart(f"final: {getattr(last, 'content', '')}")])

    return FunctionModel(respond)


def test_async_retriable_error_reaches_model_as_retry_and_run_continues() -> None:
    factory = ToolFactory([EchoCard()])
    agent = Agent(_script([("echo_async", {"text": "bad"}), ("echo_async", {"text": "ok"})]))
    result = agent.run_sync("go", toolsets=[factory.toolset()])
    parts = _tool_results(result.all_messages())
    first = parts[0]
    # A ModelRetry raised by a tool is recorded as a retried tool return or a retry prompt.
    if isinstance(first, ToolReturnPart):
        assert first.outcome == "retried"
    assert "async: say something else" in str(getattr(first, "content", ""))
    assert result.output == "final: echo: ok"


def test_sync_retriable_error_reaches_model_as_retry() -> None:
    factory = ToolFactory([EchoCard()])
    agent = Agent(_script([("echo", {"text": "bad"}), ("echo", {"text": "fine"})]))
    result = agent.run_sync("go", toolsets=[factory.toolset()])
    assert "say something else" in str(_tool_results(result.all_messages())[0].content)
    assert result.output == "final: echo: fine"


def test_unknown_skill_lists_valid_names_then_model_recovers() -> None:
    skills = [
        Skill(name="pdf", summary="read PDFs", content="Use pdftotext."),
        Skill(name="csv", summary="read CSVs", content="Use the csv module."),
    ]
    factory = ToolFactory([SkillTool(skills=skills)])
    seen_prompts: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not seen_prompts:
            seen_prompts.append(str(getattr(messages[0], "instructions", "")))
        results = _tool_results(messages)
        if not results:
            return ModelResponse(parts=[ToolCallPart("use_skill", {"name": "docx"}, "a")])
        if len(results) == 1:
            return ModelResponse(parts=[ToolCallPart("use_skill", {"name": "csv"}, "b")])
        return ModelResponse(parts=[TextPart(str(results[-1].content))])

    agent = Agent(FunctionModel(respond), instructions=factory.get_system_prompts())
    result = agent.run_sync("read data.csv", toolsets=[factory.toolset()])
    first = _tool_results(result.all_messages())[0]
    assert "valid names: csv, pdf" in str(getattr(first, "content", ""))
    assert result.output == "# Skill: csv\nUse the csv module."
    assert "- pdf: read PDFs" in seen_prompts[0]


def test_slash_command_is_dispatched_without_the_model() -> None:
    factory = ToolFactory([SkillTool(skills=[Skill(name="pdf", summary="read", content="c")])])
    commands = factory.get_commands()
    assert commands.dispatch("/skills") == "Skills:\n- pdf: read"
