"""Turn an apcore module descriptor into what a model sees: description, metadata, flags."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_EXAMPLES = 3
MODULE_ID_KEY = "apcore_module_id"

DESTRUCTIVE_LINE = "WARNING: DESTRUCTIVE. This tool changes or deletes data; it runs on its own."
APPROVAL_LINE = "REQUIRES APPROVAL: every call waits for a human decision before it runs."

_METADATA_FLAGS = (
    "readonly",
    "destructive",
    "idempotent",
    "open_world",
    "requires_approval",
    "streaming",
    "cacheable",
    "paginated",
)


@dataclass(frozen=True)
class ToolShape:
    """Everything the toolset needs from one descriptor."""

    description: str
    parameters: dict[str, Any]
    metadata: dict[str, Any]
    destructive: bool
    requires_approval: bool


def _flag(annotations: Any, name: str, default: bool = False) -> bool:
    if annotations is None:
        return default
    return bool(getattr(annotations, name, default))


def is_discoverable(descriptor: Any) -> bool:
    """Modules marked ``discoverable=False`` are never offered to a model."""
    return _flag(getattr(descriptor, "annotations", None), "discoverable", default=True)


def _example_line(example: Any) -> str:
    title = str(getattr(example, "title", "") or "example")
    text = getattr(example, "description", None)
    inputs = json.dumps(getattr(example, "inputs", {}) or {}, sort_keys=True, default=str)
    line = f"- {title}"
    if text:
        line += f": {text}"
    line += f"\n  arguments: {inputs}"
    output = getattr(example, "output", None)
    if output:
        line += f"\n  result: {json.dumps(output, sort_keys=True, default=str)}"
    return line


def build_description(descriptor: Any) -> str:
    """Compose the model-facing description of a module."""
    annotations = getattr(descriptor, "annotations", None)
    parts: list[str] = []
    head = (getattr(descriptor, "description", "") or "").strip()
    if head:
        parts.append(head)
    sunset = getattr(descriptor, "sunset_date", None)
    if sunset:
        parts.append(f"DEPRECATED: this tool is retired on {sunset}; prefer an alternative.")
    if _flag(annotations, "destructive"):
        parts.append(DESTRUCTIVE_LINE)
    if _flag(annotations, "requires_approval"):
        parts.append(APPROVAL_LINE)
    documentation = (getattr(descriptor, "documentation", None) or "").strip()
    if documentation:
        parts.append(documentation)
    examples = list(getattr(descriptor, "examples", None) or [])[:MAX_EXAMPLES]
    if examples:
        parts.append("Examples:\n" + "\n".join(_example_line(e) for e in examples))
    return "\n\n".join(parts)


def build_metadata(descriptor: Any) -> dict[str, Any]:
    """Annotations and descriptor fields a caller may want next to the tool definition."""
    annotations = getattr(descriptor, "annotations", None)
    metadata: dict[str, Any] = {MODULE_ID_KEY: descriptor.module_id}
    for name in _METADATA_FLAGS:
        default = name == "open_world" and annotations is None
        metadata[name] = _flag(annotations, name, default=default)
    metadata["version"] = getattr(descriptor, "version", None)
    metadata["tags"] = list(getattr(descriptor, "tags", None) or [])
    sunset = getattr(descriptor, "sunset_date", None)
    if sunset:
        metadata["sunset_date"] = sunset
    return metadata


def shape(descriptor: Any) -> ToolShape:
    """Derive the tool shape of one descriptor (the input schema passes through untouched)."""
    annotations = getattr(descriptor, "annotations", None)
    schema = dict(getattr(descriptor, "input_schema", None) or {})
    if not schema:
        schema = {"type": "object", "properties": {}}
    return ToolShape(
        description=build_description(descriptor),
        parameters=schema,
        metadata=build_metadata(descriptor),
        destructive=_flag(annotations, "destructive"),
        requires_approval=_flag(annotations, "requires_approval"),
    )
