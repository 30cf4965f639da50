"""An offline single-agent demo: a card's tools, a retry, a system prompt and a slash-command.

The agent is driven by a scripted pydantic-ai ``FunctionModel``, so no API key is needed.
"""

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
from rich.console import Console
from rich.panel import Panel

from toolcards import SkillTool, ToolFactory
from toolcards.tools.skills.card import Skill

SKILLS = [
    Skill(name="release-notes", summary="write release notes", content="Group changes by kind."),
    Skill(name="bug-triage", summary="triage a bug report", content="Reproduce, then bisect."),
]


def _scripted_model() -> Any:
    plan = [("use_skill", {"name": "triage"}), ("use_skill", {"name": "bug-triage"})]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        results = [
            p
            for m in messages
            for p in getattr(m, "parts", [])
            if isinstance(p, ToolReturnPart | RetryPromptPart)
        ]
        if len(results) < len(plan):
            name, args = plan[len(results)]
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f"call-{len(results)}")]
            )
        return ModelResponse(parts=[TextPart(f"Loaded the skill:\n{results[-1].content}")])

    return FunctionModel(respond)


def run(console: Console | None = None) -> str:
    """Run the demo and print what happened; returns the agent's final answer."""
    console = console or Console()
    factory = ToolFactory([SkillTool(skills=SKILLS)])
    agent = Agent(_scripted_model(), instructions=factory.get_system_prompts())
    console.print(Panel(factory.get_system_prompts()[0](), title="system prompt (from the card)"))
    result = agent.run_sync("Please triage issue #42.", toolsets=[factory.toolset()])
    for message in result.all_messages():
        for part in getattr(message, "parts", []):
            if isinstance(part, ToolCallPart):
                console.print(f"[cyan]model calls[/] {part.tool_name}({part.args_as_dict()})")
            elif isinstance(part, RetryPromptPart | ToolReturnPart):
                outcome = getattr(part, "outcome", "retry")
                style = "yellow" if outcome != "success" else "green"
                console.print(f"[{style}]tool {outcome}[/]: {str(part.content)[:120]}")
    console.print(Panel(str(result.output), title="agent answer"))
    commands = factory.get_commands()
    console.print(Panel(str(commands.dispatch("/skills")), title="/skills (slash-command)"))
    return str(result.output)
