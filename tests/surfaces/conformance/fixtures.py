"""The tools, resources and prompts the official MCP conformance suite's server scenarios call,
served through `toolcards serve` (config: ``toolcards.yaml`` beside this file)."""

from __future__ import annotations

import base64
import logging
import struct
import time

import mcp.types as types
from pydantic import BaseModel, ConfigDict
from pydantic_ai.messages import BinaryContent

from toolcards.core.progress import report_progress
from toolcards.surfaces.mcp_server.resource_sources import StaticResource, TemplateResource

log = logging.getLogger("toolcards.conformance")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _wav() -> bytes:
    """A tenth of a second of silence, 8 kHz mono 16-bit."""
    frames = b"\x00\x00" * 800
    header = b"RIFF" + struct.pack("<I", 36 + len(frames)) + b"WAVEfmt "
    header += struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16)
    return header + b"data" + struct.pack("<I", len(frames)) + frames


def _embedded(uri: str = "test://embedded-resource") -> types.EmbeddedResource:
    text = "This is an embedded resource content."
    contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)
    return types.EmbeddedResource(type="resource", resource=contents)


def test_simple_text() -> str:
    """Returns simple text content."""
    return "This is a simple text response for testing."


def test_image_content() -> BinaryContent:
    """Returns image content."""
    return BinaryContent(data=PNG, media_type="image/png")


def test_audio_content() -> BinaryContent:
    """Returns audio content."""
    return BinaryContent(data=_wav(), media_type="audio/wav")


def test_embedded_resource() -> types.EmbeddedResource:
    """Returns an embedded resource."""
    return _embedded()


def test_multiple_content_types() -> list[object]:
    """Returns text, an image and a resource."""
    return ["Multiple content types test:", test_image_content(), _embedded()]


def test_tool_with_logging() -> str:
    """Logs three messages while it runs."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        log.info(text)
        time.sleep(0.05)
    return "Tool with logging executed successfully"


def test_tool_with_progress() -> str:
    """Reports progress at 0, 50 and 100 of 100."""
    for step in (0, 50, 100):
        report_progress(step, 100, f"Progress {step}%")
        time.sleep(0.05)
    return "Progress tool completed"


def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


class address(BaseModel):
    model_config = ConfigDict(extra="forbid")
    street: str = ""
    city: str = ""


def json_schema_2020_12_tool(name: str = "", address: address | None = None) -> str:
    """Tool with JSON Schema 2020-12 features."""
    return f"{name} at {address}"


TOOLS = [
    test_simple_text,
    test_image_content,
    test_audio_content,
    test_embedded_resource,
    test_multiple_content_types,
    test_tool_with_logging,
    test_tool_with_progress,
    test_error_handling,
    json_schema_2020_12_tool,
]

RESOURCES = [
    StaticResource(
        "test://static-text",
        "Static Text Resource",
        lambda: "This is the content of the static text resource.",
        "text/plain",
        "A static text resource for testing",
    ),
    StaticResource(
        "test://static-binary",
        "Static Binary Resource",
        lambda: PNG,
        "image/png",
        "A static binary resource (image) for testing",
    ),
    StaticResource(
        "test://watched-resource",
        "Watched Resource",
        lambda: "Watched resource content",
        "text/plain",
        "A resource for subscription tests",
    ),
    TemplateResource(
        "test://template/{id}/data",
        "Resource Template",
        lambda v: f'{{"id": "{v["id"]}", "templateTest": true, "data": "Data for ID: {v["id"]}"}}',
        "application/json",
        "A resource template with a parameter",
    ),
]


def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


def test_prompt_with_embedded_resource(resourceUri: str) -> list[tuple[str, object]]:
    """A prompt that embeds a resource."""
    return [
        ("user", _embedded(resourceUri)),
        ("user", "Please process the embedded resource above."),
    ]


def test_prompt_with_image() -> list[tuple[str, object]]:
    """A prompt with an image."""
    return [("user", test_image_content()), ("user", "Please analyze the image above.")]


PROMPTS = [
    test_simple_prompt,
    test_prompt_with_arguments,
    test_prompt_with_embedded_resource,
    test_prompt_with_image,
]
