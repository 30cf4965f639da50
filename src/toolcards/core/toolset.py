"""The pydantic-ai side of the core: a FunctionToolset carrying card annotations.

Imported only when a toolset is requested, so ``import toolcards`` does not load pydantic-ai.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pydantic_ai import ModelRetry
from pydantic_ai.toolsets import FunctionToolset

from toolcards.core.retry import ToolFunc, wrap_retriable
from toolcards.core.spec import annotations_of, describe


def build_function_toolset(
    tools: Sequence[ToolFunc], deferred: Collection[str] = ()
) -> FunctionToolset[Any]:
    """A toolset of ``tools``: names from ``__name__``, descriptions with instructions,
    annotations in ``ToolDefinition.metadata``, destructive tools sequential, approval-required
    tools deferred for approval, the tools named in ``deferred`` hidden until a tool search
    finds them (``defer_loading``), and ``RetriableError`` raised as ``ModelRetry``."""
    toolset: FunctionToolset[Any] = FunctionToolset()
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
