"""Where the completions of a prompt argument come from (MCP ``completion/complete``).

A prompt function marks an argument with ``Annotated[str, Complete(source)]``; ``source`` is
``"tools"`` (the tool names the caller may see), ``"resources"`` (the resource URIs the caller
may see), ``"prompts"`` (the prompt names the caller may see), or a callable
``(value, context) -> Iterable[str]`` of the function's own. ``ToolName`` and ``ResourceUri``
are the first two, ready to use. An argument typed ``Literal[...]`` or as an ``Enum``
completes with its values without a marker. A resource template completes its variables
through :attr:`toolcards.surfaces.mcp_server.resource_sources.TemplateResource.complete`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

Source = Literal["tools", "resources", "prompts"] | Callable[[str, dict[str, str]], Iterable[str]]


@dataclass(frozen=True)
class Complete:
    """``Annotated`` metadata: the completions of a prompt argument (see the module doc)."""

    source: Source


ToolName = Annotated[str, Complete("tools")]
ResourceUri = Annotated[str, Complete("resources")]
