"""The listing layers of :class:`~toolcards.governance.GovernedToolset`, each one small wrapper
over pydantic-ai's ``WrapperToolset`` (usable on their own):

- :class:`SelectedToolset`: only the tools whose names match ``include`` and not ``exclude``;
- :class:`SafeNamedToolset`: names every model provider accepts (the id in ``tool_id``);
- :class:`DescribedToolset`: annotations made explicit in metadata, a warning line on
  destructive tools, which also run one at a time;
- :class:`ApprovalMarkedToolset`: a tool that pydantic-ai defers declaratively becomes one
  whose calls governance sees: approval asked by governance, bound to its arguments and its
  caller; a call the host runs handed to it once governance admitted the call.

A layer that changes a tool lists a :class:`DerivedTool` and, on a call, hands the tool it
got from below back down, as pydantic-ai's own wrappers do. :func:`listed_tools` lists the
four stacked as a governed toolset stacks them in one pass. :func:`listing_fingerprint` says
whether a stack of toolsets would list the same tools again, without listing them.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition, ToolDefinitionKind
from pydantic_ai.toolsets import (
    AbstractToolset,
    CombinedToolset,
    FunctionToolset,
    PrefixedToolset,
    RenamedToolset,
    ToolsetTool,
    WrapperToolset,
)

from toolcards.core.names import provider_safe_name
from toolcards.governance.policy.parse import compile_globs

DESTRUCTIVE_WARNING = "Warning: destructive. Its changes may not be undoable; call it deliberately."
APPROVAL_NOTE = "A human must approve each call before it runs."

Fingerprint = tuple[object, ...]


@dataclass(kw_only=True)
class DerivedTool(ToolsetTool[Any]):
    """A tool as a layer changed it; ``source`` is the tool the layer below listed and
    ``tag`` the listing layer's (kept by the layer's per-run copies)."""

    source: ToolsetTool[Any]
    tag: object = None


def derive(tool: ToolsetTool[Any], layer: _Layer, **changes: Any) -> DerivedTool:
    """``tool`` listed by ``layer`` with its definition changed by ``changes``."""
    return built(
        DerivedTool,
        toolset=layer,
        tool_def=built(ToolDefinition, **{**tool.tool_def.__dict__, **changes}),
        max_retries=tool.max_retries,
        args_validator=tool.args_validator,
        args_validator_func=tool.args_validator_func,
        source=tool,
        tag=layer.tag,
    )


T = TypeVar("T")


def built(cls: type[T], **fields: Any) -> T:
    """An instance of the dataclass ``cls`` with ``fields`` set as given, without running its
    constructor: for copies of valid instances with a few fields changed, where the
    constructor (``dataclasses.replace``) costs more than all else a listing does per tool.
    ``fields`` must name every field."""
    new = object.__new__(cls)
    new.__dict__.update(fields)
    return new


def source_of(tool: ToolsetTool[Any]) -> ToolsetTool[Any]:
    """The innermost tool under a stack of derived ones."""
    while isinstance(tool, DerivedTool):
        tool = tool.source
    return tool


async def list_tools(
    toolset: AbstractToolset[Any], ctx: RunContext[Any]
) -> dict[str, ToolsetTool[Any]]:
    """``toolset.get_tools(ctx)``. A plain ``FunctionToolset`` without ``prepare`` functions is
    listed from its tool definitions directly: what it would list, without the per-tool copy
    of the run context that only a ``prepare`` function reads. A subclass that lists or
    builds its tools its own way is asked through ``get_tools``."""
    if _lists_like_function_toolset(toolset) and not _has_prepare(toolset):
        build = toolset.tool_for_tool_def
        return {
            name: build(tool.tool_def, ctx=ctx, original_name=name)
            for name, tool in toolset.tools.items()
        }
    return await toolset.get_tools(ctx)


def _lists_like_function_toolset(toolset: AbstractToolset[Any]) -> TypeGuard[FunctionToolset[Any]]:
    """Whether ``toolset`` is a ``FunctionToolset`` whose listing is ``FunctionToolset``'s own."""
    if not isinstance(toolset, FunctionToolset):
        return False
    cls = type(toolset)
    return (
        cls.get_tools is FunctionToolset.get_tools
        and cls.tool_for_tool_def is FunctionToolset.tool_for_tool_def
    )


_prepared: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], bool]] = (
    weakref.WeakKeyDictionary()
)


def _has_prepare(toolset: FunctionToolset[Any]) -> bool:
    """Whether a tool of ``toolset`` has a ``prepare`` function (remembered per set of tools)."""
    tools = tuple(toolset.tools.values())
    seen = _prepared.get(toolset)
    if seen is not None and seen[0] == tools:
        return seen[1]
    found = any(tool.prepare is not None for tool in tools)
    _prepared[toolset] = (tools, found)
    return found


@dataclass
class _Layer(WrapperToolset[Any]):
    """A listing layer: a call hands the tool it got from below back down. ``tag`` marks the
    tools it derived; its copies for a run (``for_run`` replaces ``wrapped``) keep the tag, so
    a tool listed by one copy is recognised by another."""

    tag: object = field(default_factory=object, kw_only=True, repr=False, compare=False)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if isinstance(tool, DerivedTool) and tool.tag is self.tag:
            tool = tool.source
            name = tool.tool_def.name
        return await self.wrapped.call_tool(name, tool_args, ctx, tool)

    def _params(self) -> Hashable:
        return ()

    def listing_fingerprint(self, ctx: RunContext[Any]) -> Fingerprint | None:
        below = listing_fingerprint(self.wrapped, ctx)
        return None if below is None else (type(self), self._params(), below)


@dataclass
class SelectedToolset(_Layer):
    """Only the tools whose name matches a glob of ``include`` (None: every tool) and none of
    ``exclude``."""

    include: Sequence[str] | None = None
    exclude: Sequence[str] = ()
    _include: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._include = compile_globs(tuple(self.include)) if self.include is not None else None
        self._exclude = compile_globs(tuple(self.exclude)) if self.exclude else None

    def selected(self, name: str) -> bool:
        if self._include is not None and self._include.fullmatch(name) is None:
            return False
        return self._exclude is None or self._exclude.fullmatch(name) is None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await list_tools(self.wrapped, ctx)
        if self._include is None and self._exclude is None:
            return tools
        return {name: tool for name, tool in tools.items() if self.selected(name)}

    def _params(self) -> Hashable:
        return (None if self.include is None else tuple(self.include), tuple(self.exclude))


@dataclass
class SafeNamedToolset(_Layer):
    """Provider-safe names (:func:`provider_safe_name`); a renamed tool keeps its id in
    ``metadata["tool_id"]``. Two ids that would share a name are an error."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await list_tools(self.wrapped, ctx)
        out: dict[str, ToolsetTool[Any]] = {}
        renamed: dict[str, str] = {}
        for name, tool in tools.items():
            safe = provider_safe_name(name)
            if safe in out:
                first = renamed.get(safe, safe)
                raise ValueError(f"tool ids {first!r} and {name!r} clash as {safe!r}")
            if safe != name:
                renamed[safe] = name
                metadata = {**(tool.tool_def.metadata or {}), "tool_id": name}
                tool = derive(tool, self, name=safe, metadata=metadata)
            out[safe] = tool
        return out


@dataclass
class DescribedToolset(_Layer):
    """Every annotation explicit in ``metadata`` (with the ``tool_id``); destructive tools get
    a warning line and run one at a time."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await list_tools(self.wrapped, ctx)
        out: dict[str, ToolsetTool[Any]] = {}
        for name, tool in tools.items():
            tdef = tool.tool_def
            metadata = _explicit(tdef.metadata or {}, name)
            if metadata["destructive"]:
                description = _with_line(tdef.description, DESTRUCTIVE_WARNING)
                out[name] = derive(
                    tool, self, metadata=metadata, description=description, sequential=True
                )
            else:
                out[name] = derive(tool, self, metadata=metadata)
        return out


@dataclass
class ApprovalMarkedToolset(_Layer):
    """A tool that pydantic-ai defers declaratively becomes a plain function tool, whose calls
    reach the governed toolset instead of going around it. One that asks for approval
    (``requires_approval`` in its metadata, or ``kind="unapproved"``) is annotated
    ``requires_approval``, with a note in its description: approval is then asked by
    governance, bound to the call's arguments and caller, which a declaration cannot be. One
    the host runs (``kind="external"``) is handed to the host by the governed toolset once
    governance admitted the call. Only for use under a :class:`GovernedToolset`: alone, it
    would drop pydantic-ai's own approval step and fail the host's calls."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await list_tools(self.wrapped, ctx)
        out: dict[str, ToolsetTool[Any]] = {}
        for name, tool in tools.items():
            tdef = tool.tool_def
            given = tdef.metadata or {}
            kind = _governed_kind(tdef)
            if tdef.kind == "unapproved" or given.get("requires_approval"):
                tool = derive(
                    tool,
                    self,
                    kind=kind,
                    metadata={**given, "requires_approval": True},
                    description=_with_line(tdef.description, APPROVAL_NOTE),
                )
            elif kind != tdef.kind:
                tool = derive(tool, self, kind=kind)
            out[name] = tool
        return out


def _governed_kind(tdef: ToolDefinition) -> ToolDefinitionKind:
    """The kind of ``tdef`` under governance: a kind pydantic-ai defers without calling the
    toolset (``"unapproved"``, ``"external"``) becomes ``"function"``."""
    return "function" if tdef.kind in ("unapproved", "external") else tdef.kind


Listed = tuple[ToolDefinition, int, ToolsetTool[Any]]
"""A tool as a stack lists it: its definition, its retries, and the innermost tool under it."""


async def listed_tools(stack: AbstractToolset[Any], ctx: RunContext[Any]) -> dict[str, Listed]:
    """What ``stack`` lists (:data:`Listed`, by name). The stack a governed toolset builds
    (``ApprovalMarkedToolset(DescribedToolset(SafeNamedToolset(SelectedToolset(inner))))``,
    these very classes) is listed in one pass over ``inner``'s tools: each tool's definition
    is made once, as the four layers make it in turn, not once per layer."""
    selected = _standard(stack)
    if selected is None:
        tools = await list_tools(stack, ctx)
        return {n: (t.tool_def, t.max_retries, source_of(t)) for n, t in tools.items()}
    tools = await list_tools(selected.wrapped, ctx)
    choose = selected.include is not None or bool(selected.exclude)
    out: dict[str, Listed] = {}
    renamed: dict[str, str] = {}
    for name, tool in tools.items():
        if choose and not selected.selected(name):
            continue
        tdef = tool.tool_def
        given = tdef.metadata or {}
        safe = provider_safe_name(name)  # SafeNamedToolset
        if safe in out:
            first = renamed.get(safe, safe)
            raise ValueError(f"tool ids {first!r} and {name!r} clash as {safe!r}")
        if safe != name:
            renamed[safe] = name
            given = {**given, "tool_id": name}
        metadata = _explicit(given, safe)  # DescribedToolset
        description, sequential = tdef.description, tdef.sequential
        if metadata["destructive"]:
            description, sequential = _with_line(description, DESTRUCTIVE_WARNING), True
        kind = _governed_kind(tdef)  # ApprovalMarkedToolset
        if tdef.kind == "unapproved" or metadata["requires_approval"]:
            metadata["requires_approval"] = True
            description = _with_line(description, APPROVAL_NOTE)
        final = ToolDefinition(
            **{**tdef.__dict__, "name": safe, "metadata": metadata, "description": description,
               "sequential": sequential, "kind": kind}
        )  # fmt: skip
        out[safe] = (final, tool.max_retries, source_of(tool))
    return out


def _standard(stack: AbstractToolset[Any]) -> SelectedToolset | None:
    """The selection at the bottom of ``stack`` when ``stack`` is the one a governed toolset
    builds, layer for layer (a subclass may list its own way: not this one)."""
    if type(stack) is not ApprovalMarkedToolset:
        return None
    described = stack.wrapped
    if type(described) is not DescribedToolset:
        return None
    named = described.wrapped
    if type(named) is not SafeNamedToolset:
        return None
    selected = named.wrapped
    return selected if type(selected) is SelectedToolset else None


def _explicit(given: dict[str, Any], name: str) -> dict[str, Any]:
    """``given`` with every annotation of :class:`ToolAnnotations` explicit, and the tool id
    (what ``ToolAnnotations.from_metadata(given).as_metadata()`` adds, built directly)."""
    sensitive = given.get("sensitive") or ()  # () when none: immutable and shared
    if sensitive and (type(sensitive) is not list or not all(type(s) is str for s in sensitive)):
        sensitive = [sensitive] if isinstance(sensitive, str) else [str(s) for s in sensitive]
    return {
        **given,
        "readonly": bool(given.get("readonly", False)),
        "destructive": bool(given.get("destructive", False)),
        "idempotent": bool(given.get("idempotent", False)),
        "open_world": bool(given.get("open_world", False)),
        "requires_approval": bool(given.get("requires_approval", False)),
        "sensitive": sensitive,
        "tool_id": given.get("tool_id", name),
    }


def _with_line(description: str | None, line: str) -> str:
    return f"{description}\n\n{line}" if description else line


def listing_fingerprint(toolset: AbstractToolset[Any], ctx: RunContext[Any]) -> Fingerprint | None:
    """A value equal from one listing to the next when ``toolset`` would list the same tools,
    computed without listing them (compare with ``==``); None when that cannot be known (a
    toolset that lists per run, such as an MCP server or a tool with a ``prepare`` function).

    Known: ``FunctionToolset`` (adding, removing or replacing a tool changes it; a ``Tool``
    changed in place does not), ``CombinedToolset``, ``PrefixedToolset``, ``RenamedToolset``
    and the layers of this module.
    """
    own = getattr(toolset, "listing_fingerprint", None)
    if own is not None:
        result: Fingerprint | None = own(ctx)
        return result
    kind = type(toolset)
    if kind is FunctionToolset:
        if _has_prepare(toolset):  # type: ignore[arg-type]
            return None
        # the Tool objects themselves: compared by identity first, and kept alive meanwhile
        tools = tuple(toolset.tools.values())  # type: ignore[attr-defined]
        return (toolset, toolset.max_retries, ctx.max_retries, tools)  # type: ignore[attr-defined]
    if kind is CombinedToolset:
        parts = [listing_fingerprint(t, ctx) for t in toolset.toolsets]  # type: ignore[attr-defined]
        return None if any(p is None for p in parts) else (kind, *parts)
    if kind is PrefixedToolset or kind is RenamedToolset:
        below = listing_fingerprint(toolset.wrapped, ctx)  # type: ignore[attr-defined]
        param = (
            toolset.prefix  # type: ignore[attr-defined]
            if kind is PrefixedToolset
            else tuple(sorted(toolset.name_map.items()))  # type: ignore[attr-defined]
        )
        return None if below is None else (kind, param, below)
    return None
