"""A tool's return value as MCP tool-result content.

- a string: one text block;
- an MCP content block (``mcp.types.TextContent``, ``ImageContent``, ``AudioContent``,
  ``EmbeddedResource``, ``ResourceLink``): passed through;
- pydantic-ai ``BinaryContent``: an image or audio block by its media type, else an embedded
  blob resource;
- a list or tuple holding at least one of the above (strings allowed beside them): one block
  per item, in order;
- anything else: JSON text, plus ``structuredContent`` when it is an object.
"""

from __future__ import annotations

import base64
import re
import sys
from typing import Any

import mcp.types as types

from toolcards.surfaces.outcomes import render_value

_BLOCKS = (
    types.TextContent,
    types.ImageContent,
    types.AudioContent,
    types.EmbeddedResource,
    types.ResourceLink,
)
Blocks = list[types.ContentBlock]


def is_content_type(tp: type) -> bool:
    """Whether values of ``tp`` are content of their own (MCP blocks, pydantic-ai binary or
    file content), never structured output."""
    if issubclass(tp, _BLOCKS):
        return True
    messages = sys.modules.get("pydantic_ai.messages")  # not loaded: tp cannot be one of them
    return messages is not None and issubclass(tp, (messages.BinaryContent, messages.FileUrl))


def _binary(value: Any) -> types.ContentBlock | None:
    # lazy: pydantic-ai, ~1 s; only binary content needs it
    from pydantic_ai.messages import BinaryContent

    if not isinstance(value, BinaryContent):
        return None
    data = base64.b64encode(value.data).decode("ascii")
    media = value.media_type
    if media.startswith("image/"):
        return types.ImageContent(type="image", data=data, mime_type=media)
    if media.startswith("audio/"):
        return types.AudioContent(type="audio", data=data, mime_type=media)
    uri = f"toolcards://blob/{value.identifier}"
    blob = types.BlobResourceContents(uri=uri, blob=data, mime_type=media)
    return types.EmbeddedResource(type="resource", resource=blob)


def _block(item: Any) -> types.ContentBlock | None:
    if isinstance(item, _BLOCKS):
        return item
    return _binary(item)


def tool_content(value: Any) -> tuple[Blocks, dict[str, Any] | None]:
    """The content blocks and structured content for a tool's value (see the module doc)."""
    single = None if isinstance(value, str) else _block(value)
    if single is not None:
        return [single], None
    if isinstance(value, list | tuple) and value and not all(isinstance(v, str) for v in value):
        blocks = [_block(v) if not isinstance(v, str) else _text(v) for v in value]
        if all(b is not None for b in blocks):
            return [b for b in blocks if b is not None], None
    text, structured = render_value(value)
    if structured is not None and not text.isascii() and _SURROGATE.search(text):
        structured = visible_json(structured)
    return [_text(text)], structured


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=visible_surrogates(text))


_SURROGATE = re.compile("[\ud800-\udfff]")


def visible_json(value: Any) -> Any:
    """A JSON value with :func:`visible_surrogates` applied to its strings and keys (what a
    client is sent, and what a task keeps of its result)."""
    if isinstance(value, str):
        return visible_surrogates(value)
    if isinstance(value, dict):
        return {visible_surrogates(str(k)): visible_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [visible_json(v) for v in value]
    return value


def visible_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (a file name decoded from bytes that are not UTF-8)
    written as the text of its ``\\u`` escape: no JSON writer sends a lone surrogate, so the
    whole response failed (the audit shows such a name the same way)."""
    if text.isascii():
        return text
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
