"""The scripted model of the cluster-member tests, importable by Ray workers by module name
(``tests`` is on their ``PYTHONPATH``)."""

from __future__ import annotations

import os

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo

from support.scripted import user_prompts


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """``plan X`` creates task X on the shared board; anything else says where the member
    runs and how many prompts its conversation holds. A cluster member's messages are
    relayed, so each reads ``Message from <sender>:`` and its text on the next line."""
    prompts = user_prompts(messages)
    text = prompts[-1].removeprefix("Message from user:\n")
    returned = [p for p in messages[-1].parts if hasattr(p, "tool_name")]  # beside team state
    if text.startswith("plan ") and not returned:
        create = [{"description": text.removeprefix("plan ")}]
        return ModelResponse(parts=[ToolCallPart("update_planning", {"create": create})])
    if returned:
        return ModelResponse(parts=[TextPart(f"planned: {returned[-1].content}")])
    return ModelResponse(parts=[TextPart(f"pid {os.getpid()} prompts {len(prompts)}")])


class Whereabouts:
    """A tool actor's target that tells which process serves it and that process's parent
    (on Ray: its node's raylet)."""

    def where(self) -> tuple[int, int]:
        return os.getpid(), os.getppid()


def hire(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """``hire N`` hires N more members of the role ``remote`` (the team card's
    ``hire_members``), then answers with what the tool said."""
    text = user_prompts(messages)[-1].removeprefix("Message from user:\n")
    returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"tool said: {returned[-1].content}")])
    roles = ["remote"] * int(text.removeprefix("hire "))
    return ModelResponse(parts=[ToolCallPart("hire_members", {"roles": roles})])
