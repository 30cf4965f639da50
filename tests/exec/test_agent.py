"""End to end: a pydantic-ai Agent (FunctionModel) calls exec_command through the toolset."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from tests.exec.support import BWRAP_REASON, RUNNABLE

from toolcards.core.factory import ToolFactory
from toolcards.tools.exec.card import ExecTool

MODE = "bwrap" if BWRAP_REASON is None else "local"


def _model(commands: list[str]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if len(returns) < len(commands):
            args = {"command": commands[len(returns)]}
            return ModelResponse(parts=[ToolCallPart("exec_command", args, tool_call_id="c")])
        return ModelResponse(parts=[TextPart(f"done: {returns[-1].content}")])

    return FunctionModel(respond)


def test_agent_runs_a_command_in_the_sandbox() -> None:
    factory = ToolFactory([ExecTool(mode=MODE, limits=RUNNABLE, workspace_id="agent")])
    agent = Agent(_model(["python3 -c \"print('hello from exec')\""]))
    result = agent.run_sync("run it", toolsets=[factory.toolset()])
    assert "hello from exec" in result.output
    assert "exit_code: 0" in result.output


def test_agent_sees_a_refused_command_as_retry_and_recovers() -> None:
    factory = ToolFactory(
        [ExecTool(mode=MODE, limits=RUNNABLE, allowed_commands=["ls"])], retry_exception=None
    )
    agent = Agent(_model(["rm -rf /", "ls -a"]))
    result = agent.run_sync("go", toolsets=[factory.toolset()])
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert "not allowed" in str(returns[0].content)
    assert "exit_code: 0" in result.output
