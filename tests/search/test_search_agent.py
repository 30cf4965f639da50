"""SearchTool through ToolFactory and a pydantic-ai agent driven by FunctionModel."""

from __future__ import annotations

import httpx
from pydantic import SecretStr
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolcards import ToolFactory
from toolcards.tools.search import SearchTool


def test_agent_calls_web_search_and_gets_retry_for_private_url() -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"results": [{"title": "Doc", "url": "https://a.example", "content": "c"}]}
        )

    card = SearchTool(api_key=SecretStr("k"))
    card._transport = httpx.MockTransport(reply)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("web_search", {"query": "docs"}),
                    ToolCallPart("web_fetch", {"url": "http://169.254.169.254/"}),
                ]
            )
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(" | ".join(str(r.content) for r in returns))])

    agent = Agent(FunctionModel(model), toolsets=[ToolFactory([card]).toolset()])
    out = agent.run_sync("go").output
    assert "1. Doc" in out
    assert "169.254.169.254" in out and "link-local" in out
