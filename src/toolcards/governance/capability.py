"""Capabilities: what the executor can run, built once from tools or any pydantic-ai toolset.

A registry of plain tools or a ToolFactory's tools is *deferred*: its ids, descriptions and
annotations (:meth:`CapabilityRegistry.summaries`) are read from the callables, and the JSON
schemas, validators and invokers (which need pydantic-ai) are built on first use. Listing
tools therefore never imports pydantic-ai.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolcards._lazy import renamed_names
from toolcards.core.spec import ToolAnnotations, annotations_of, describe

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

    from toolcards.core.factory import ToolFactory

Invoke = Callable[[dict[str, Any]], Coroutine[Any, Any, Any]]
__getattr__ = renamed_names(__name__, {"Capability": "ToolCapability"})


@dataclass(slots=True, eq=False)
class ToolCapability:
    """One callable tool as governance sees it.

    ``invoke`` receives validated arguments (None for a capability whose surface always
    passes its own, as :class:`GovernedToolset` does). ``validator`` (a pydantic-core
    validator built once) parses raw arguments into Python types and rejects extras; None
    passes arguments through (remote tools validate themselves). ``timeout`` overrides the
    executor's.
    """

    id: str
    description: str
    json_schema: dict[str, Any]
    annotations: ToolAnnotations
    invoke: Invoke | None = None
    validator: Any = None
    timeout: float | None = None
    sensitive: frozenset[str] = field(default_factory=frozenset)
    abandon_threads: bool = True
    """Whether ``invoke`` may wait on an anyio worker thread that a timeout must abandon."""

    def __post_init__(self) -> None:
        if not self.sensitive and self.annotations.sensitive:
            self.sensitive = frozenset(self.annotations.sensitive)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Raw arguments -> typed arguments; raises pydantic ``ValidationError``."""
        if self.validator is None:
            return args
        result = self.validator.validate_python(args)
        return result if isinstance(result, dict) else dict(result)


@dataclass(frozen=True, slots=True)
class ToolSummary:
    """What a listing shows of a capability, known without building it."""

    id: str
    description: str
    annotations: ToolAnnotations

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> ToolSummary:
        """The summary of a tool callable, as :meth:`CapabilityRegistry.from_tools` builds
        its capability (name, description with instructions, declared annotations)."""
        return cls(fn.__name__, describe(fn), annotations_of(fn))


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def tool_threads() -> ThreadPoolExecutor:
    """The worker threads sync tools run in (created on first use)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                workers = min(32, (os.cpu_count() or 1) + 4)
                _pool = ThreadPoolExecutor(workers, thread_name_prefix="toolcards-tool")
    return _pool


def direct_invoke(schema: Any, ctx: RunContext[Any]) -> Invoke:
    """Call a pydantic-ai ``FunctionSchema``'s function with validated arguments: async
    functions awaited, sync ones in a worker thread (abandoned, not killed, on timeout)."""
    if schema.positional_fields or schema.var_positional_field:

        async def via_schema(args: dict[str, Any]) -> Any:
            return await schema.call(args, ctx)

        return via_schema
    fn = schema.function
    lead = (ctx,) if schema.takes_ctx else ()
    if schema.is_async:

        async def call_async(args: dict[str, Any]) -> Any:
            return await fn(*lead, **args)

        return call_async

    async def call_sync(args: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        job = functools.partial(fn, *lead, **args)
        result = await loop.run_in_executor(tool_threads(), contextvars.copy_context().run, job)
        if inspect.isawaitable(result):
            result = await result
        return result

    return call_sync


def surface_context() -> RunContext[None]:
    """A RunContext for calls that do not come from an agent run (MCP server, CLI).

    Tools that read ``ctx.deps`` or call ``ctx.model`` are not meaningful outside a run.
    """
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    return RunContext(deps=None, model=TestModel(), usage=RunUsage())


class CapabilityRegistry:
    """Capabilities by id (the tool name). Build with :meth:`from_tools`,
    :meth:`from_factory` (sync) or :meth:`from_toolset` (async, any pydantic-ai toolset)."""

    def __init__(self, capabilities: Iterable[ToolCapability] = ()) -> None:
        self._caps: dict[str, ToolCapability] = {}
        self._pending: dict[str, ToolSummary] = {}
        self._build: Callable[[], Iterable[ToolCapability]] | None = None
        self._lock = threading.Lock()
        for cap in capabilities:
            self.add(cap)

    @classmethod
    def deferred(
        cls, summaries: Iterable[ToolSummary], build: Callable[[], Iterable[ToolCapability]]
    ) -> CapabilityRegistry:
        """A registry whose capabilities ``build()`` makes on first use (exactly the ids of
        ``summaries``, which answer listings until then)."""
        registry = cls()
        for summary in summaries:
            if summary.id in registry._pending:
                raise ValueError(f"duplicate capability id {summary.id!r}")
            registry._pending[summary.id] = summary
        registry._build = build
        return registry

    @classmethod
    def combine(cls, registries: Sequence[CapabilityRegistry]) -> CapabilityRegistry:
        """One registry of several (still deferred); ValueError when two share an id."""
        parts = list(registries)
        summaries = [summary for part in parts for summary in part.summaries()]
        return cls.deferred(summaries, lambda: [cap for part in parts for cap in part])

    def _resolved(self) -> dict[str, ToolCapability]:
        if self._build is not None:
            with self._lock:
                build = self._build
                if build is not None:
                    built = {cap.id: cap for cap in build()}
                    if set(built) != set(self._pending):
                        raise RuntimeError("the built capabilities differ from the listed ones")
                    self._caps = {tool_id: built[tool_id] for tool_id in self._pending}
                    self._pending = {}
                    self._build = None
        return self._caps

    def add(self, cap: ToolCapability) -> None:
        caps = self._resolved()
        if cap.id in caps:
            raise ValueError(f"duplicate capability id {cap.id!r}")
        caps[cap.id] = cap

    def get(self, tool_id: str) -> ToolCapability | None:
        return self._resolved().get(tool_id)

    def __getitem__(self, tool_id: str) -> ToolCapability:
        return self._resolved()[tool_id]

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in (self._pending or self._caps)

    def __iter__(self) -> Iterator[ToolCapability]:
        return iter(self._resolved().values())

    def __len__(self) -> int:
        return len(self._pending or self._caps)

    def ids(self) -> list[str]:
        return list(self._pending or self._caps)

    def summaries(self) -> list[ToolSummary]:
        """Id, description and annotations of every capability (builds nothing)."""
        if self._pending:
            return list(self._pending.values())
        return [ToolSummary(c.id, c.description, c.annotations) for c in self._caps.values()]

    # -- builders ---------------------------------------------------------------------------

    @classmethod
    def from_tools(cls, tools: Sequence[Callable[..., Any]]) -> CapabilityRegistry:
        """Capabilities of plain tool callables (names from ``__name__``, annotations from
        :func:`toolcards.core.spec.annotate`), built on first use."""
        tools = list(tools)

        def build() -> CapabilityRegistry:
            from toolcards.core.toolset import build_function_toolset

            return cls.from_function_toolset(build_function_toolset(tools))

        return cls.deferred([ToolSummary.of(fn) for fn in tools], build)

    @classmethod
    def from_factory(cls, factory: ToolFactory) -> CapabilityRegistry:
        """Capabilities of a ToolFactory's TOOL_CALL tools (sync, built on first use).
        Card-contributed toolsets (MCP servers) need :meth:`from_toolset` with
        ``factory.toolset()``."""

        def build() -> CapabilityRegistry:
            return cls.from_function_toolset(factory.function_toolset())  # type: ignore[arg-type]

        return cls.deferred([ToolSummary.of(fn) for fn in factory.get_tools()], build)

    @classmethod
    def from_function_toolset(
        cls, toolset: FunctionToolset[Any], ctx: RunContext[Any] | None = None
    ) -> CapabilityRegistry:
        """Capabilities of a ``FunctionToolset`` without listing it (sync)."""
        run_ctx = ctx or surface_context()
        caps = []
        for name, tool in toolset.tools.items():
            schema = tool.function_schema
            caps.append(
                ToolCapability(
                    id=name,
                    description=tool.description or "",
                    json_schema=dict(schema.json_schema),
                    annotations=ToolAnnotations.from_metadata(tool.metadata),
                    invoke=direct_invoke(schema, run_ctx),
                    validator=schema.validator,
                    timeout=tool.timeout,
                    abandon_threads=False,
                )
            )
        return cls(caps)

    @classmethod
    async def from_toolset(
        cls, toolset: AbstractToolset[Any], ctx: RunContext[Any] | None = None
    ) -> CapabilityRegistry:
        """Capabilities of any pydantic-ai toolset, listed once with ``ctx`` (a surface
        context by default). A toolset that needs a connection (MCP) must be entered first."""
        run_ctx = ctx or surface_context()
        tools = await toolset.get_tools(run_ctx)
        caps = []
        for name, tool in tools.items():

            async def invoke(args: dict[str, Any], _name: str = name, _tool: Any = tool) -> Any:
                return await toolset.call_tool(_name, args, run_ctx, _tool)

            tdef = tool.tool_def
            caps.append(
                ToolCapability(
                    id=name,
                    description=tdef.description or "",
                    json_schema=dict(tdef.parameters_json_schema),
                    annotations=ToolAnnotations.from_metadata(tdef.metadata),
                    invoke=invoke,
                    validator=tool.args_validator,
                    timeout=tdef.timeout,
                )
            )
        return cls(caps)
