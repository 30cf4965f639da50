"""An MCP server's sampling request answered by a pydantic-ai model, within bounds.

Only text is sampled: the server's messages become the model's history (user turns as
prompts, assistant turns as its earlier replies, the server's system prompt first), the
``max_tokens`` asked is capped by the card, and the text in and out is bounded.
"""

from __future__ import annotations

from typing import Any

from toolcards.tools.mcp.server_requests import Refused
from toolcards.tools.mcp.wire_json import truncated

_SHOWN_MESSAGES = 3  # messages of a sampling request its audit row shows
_SHOWN_CHARS = 1_000  # characters of each text shown
_STOP_REASONS = {"length": "maxTokens", "stop": "endTurn"}


def _text(content: Any) -> str:
    items = content if isinstance(content, list) else [content]
    parts = []
    for item in items:
        if getattr(item, "type", None) != "text":
            raise Refused("sample refused by the client: only text content is sampled")
        parts.append(str(item.text))
    return "".join(parts)


def request_size(params: Any) -> int:
    """The characters of text a sampling request carries (messages and system prompt)."""
    size = len(params.system_prompt or "")
    for message in params.messages:
        items = message.content if isinstance(message.content, list) else [message.content]
        size += sum(len(getattr(item, "text", "") or "") for item in items)
    return size


def sampling_args(params: Any) -> dict[str, Any]:
    """What the audit row records of a sampling request: how many messages it has and the first
    few, cut (a refused request is not bounded by the card: recording every message made
    one tool call write 335 MB of audit)."""
    return {
        "messages": len(params.messages),
        "shown": [
            {"role": m.role, "text": _shown(m.content) if _is_text(m.content) else "[non-text]"}
            for m in params.messages[:_SHOWN_MESSAGES]
        ],
        "system_prompt": truncated(params.system_prompt or "", _SHOWN_CHARS),
        "output_limit": params.max_tokens,  # (a key named *tokens* would be redacted)
    }


def _shown(content: Any) -> str:
    return truncated(_text(content), _SHOWN_CHARS)


def _is_text(content: Any) -> bool:
    items = content if isinstance(content, list) else [content]
    return all(getattr(item, "type", None) == "text" for item in items)


async def sample(model: Any, params: Any, *, max_tokens: int, max_chars: int) -> Any:
    """A ``CreateMessageResult`` from ``model`` (a pydantic-ai model or model name)."""
    # lazy: pydantic-ai, ~1 s; only a server's sampling request
    from mcp import types as mcp_types
    from pydantic_ai.direct import model_request
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.settings import ModelSettings

    if params.tools or params.tool_choice:
        raise Refused("sample refused by the client: tool use in sampling is not offered")
    size = request_size(params)
    if size > max_chars:
        raise Refused(f"sample refused by the client: the request exceeds {max_chars} characters")
    history: list[ModelMessage] = []
    if params.system_prompt:
        history.append(ModelRequest(parts=[SystemPromptPart(params.system_prompt)]))
    for message in params.messages:
        text = _text(message.content)
        if message.role == "assistant":
            history.append(ModelResponse(parts=[TextPart(text)]))
        else:
            history.append(ModelRequest(parts=[UserPromptPart(text)]))
    settings = ModelSettings(max_tokens=min(int(params.max_tokens), max_tokens))
    if params.temperature is not None:
        settings["temperature"] = params.temperature
    if params.stop_sequences:
        settings["stop_sequences"] = list(params.stop_sequences)
    response = await model_request(model, history, model_settings=settings)
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    if len(text) > max_chars:
        text = text[:max_chars]
    return mcp_types.CreateMessageResult(
        role="assistant",
        content=mcp_types.TextContent(type="text", text=text),
        model=response.model_name or "unknown",
        stop_reason=_STOP_REASONS.get(str(response.finish_reason), "endTurn"),
    )
