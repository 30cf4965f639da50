"""The pydantic-ai side of the core: a FunctionToolset carrying card annotations, whose calls
run under the idempotency key of their tool call.

Imported only when a toolset is requested, so ``import toolcards`` does not load pydantic-ai.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset, ToolsetTool

from toolcards.core.actors import call_key, calling_call_key
from toolcards.core.retry import ToolFunc, wrap_retriable
from toolcards.core.spec import annotations_of, describe

log = logging.getLogger("toolcards.core")


class CardToolset(FunctionToolset[Any]):
    """The cards' tools as a pydantic-ai toolset. Each call runs under the idempotency key of
    its tool call (:func:`~toolcards.core.actors.call_key` of the run id and the tool call
    id), so a tool actor's mutation that committed answers the same call made again (a
    durable run replaying it, a retry after "outcome unknown") from its record instead of
    writing twice. A key set around the call (a governed call's) is kept."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if calling_call_key.get() is not None or not (ctx.run_id and ctx.tool_call_id):
            return await super().call_tool(name, tool_args, ctx, tool)
        with call_key(ctx.run_id, ctx.tool_call_id):
            return await super().call_tool(name, tool_args, ctx, tool)


def build_function_toolset(
    tools: Sequence[ToolFunc], deferred: Collection[str] = ()
) -> CardToolset:
    """A toolset of ``tools``: names from ``__name__``, descriptions with instructions,
    annotations in ``ToolDefinition.metadata``, destructive tools sequential, approval-required
    tools deferred for approval, the tools named in ``deferred`` hidden until a tool search
    finds them (``defer_loading``), ``RetriableError`` raised as ``ModelRetry``, and each call
    under its tool call's idempotency key (:class:`CardToolset`)."""
    toolset = CardToolset()
    for fn in tools:
        notes = annotations_of(fn)
        toolset.add_function(
            wrap_retriable(fn, ModelRetry),
            name=fn.__name__,
            description=describe(fn),
            metadata=notes.as_metadata(),
            sequential=notes.destructive or None,
            requires_approval=notes.requires_approval or None,
            defer_loading=fn.__name__ in deferred or None,
        )
    return toolset


@dataclass
class FirstNameWins(CombinedToolset[Any]):
    """Toolsets whose tool names are chosen elsewhere (remote servers'), combined: on a name
    two of them list, the earlier toolset's tool is kept and the later one's left out, with a
    warning. pydantic-ai's ``CombinedToolset`` raises on it, which ended the run with no tools
    at all (one server could take every tool away). Decided once all have listed, so which
    toolset lists first does not matter."""

    warned: set[tuple[str, str]] = field(default_factory=set, repr=False)
    """(toolset label, tool name) pairs already warned of (shared with per-run copies)."""

    def _merge_tools(
        self, toolsets_tools: Sequence[dict[str, ToolsetTool[Any]]]
    ) -> dict[str, ToolsetTool[Any]]:
        owners: dict[str, AbstractToolset[Any]] = {}
        kept: list[dict[str, ToolsetTool[Any]]] = []
        for toolset, tools in zip(self.toolsets, toolsets_tools, strict=True):
            mine: dict[str, ToolsetTool[Any]] = {}
            for name, tool in tools.items():
                first = owners.setdefault(name, toolset)
                if first is toolset:
                    mine[name] = tool
                else:
                    self._left_out(toolset, first, name)
            kept.append(mine)
        return super()._merge_tools(kept)

    def _left_out(
        self, toolset: AbstractToolset[Any], first: AbstractToolset[Any], name: str
    ) -> None:
        if (toolset.label, name) in self.warned:
            return
        self.warned.add((toolset.label, name))
        log.warning(
            "%s lists a tool named %r, which %s already offers: it is left out (a tool_prefix "
            "on its card keeps it)",
            toolset.label,
            name,
            first.label,
        )
