"""Capabilities: what the executor can run, built once from tools or any pydantic-ai toolset.

A registry of plain tools or a ToolFactory's tools is *deferred*: its ids, descriptions and
annotations (:meth:`CapabilityRegistry.summaries`) are read from the callables, and the JSON
schemas, validators and invokers are built on first use. Listing tools therefore never
imports pydantic-ai; nor does calling a plain tool: :meth:`CapabilityRegistry.get` builds
only the capability asked for, with pydantic's validator (:mod:`.plain_tools`) and its JSON
schema from pydantic-ai made when something reads it.

Arguments are checked against the tool's schema before the policy looks at them
(:func:`parse_arguments`): a caller who may see a tool may see its schema, so a call missing a
required argument, or giving one of the wrong type, is ``invalid_args`` with the schema's
error: a deny rule with a condition on that argument does not turn it into "denied" (a
condition that cannot be evaluated counts against the caller, which is right for a valid call
and misleading for a broken one). A tool the caller may not see is not checked: its schema
stays hidden, and the call reads as unknown.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from toolcards._lazy import renamed_names
from toolcards.core.errors import ToolcardsError
from toolcards.core.spec import ToolAnnotations, annotations_of, describe
from toolcards.governance.invoke import Invoke as Invoke
from toolcards.governance.invoke import direct_invoke as direct_invoke
from toolcards.governance.invoke import function_invoke
from toolcards.governance.invoke import tool_threads as tool_threads
from toolcards.governance.plain_tools import plain_adapter

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

    from toolcards.core.factory import ToolFactory

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

    def argument_schema(self) -> dict[str, Any]:
        """A JSON schema of the arguments for reading their types (the command line types
        ``key=value`` pairs by it): :attr:`json_schema`, unless that is not made yet."""
        return self.json_schema

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Raw arguments -> typed arguments; raises pydantic ``ValidationError``."""
        if self.validator is None:
            return args
        result = self.validator.validate_python(args)
        return result if isinstance(result, dict) else dict(result)


class InvalidArguments(ToolcardsError, ValueError):
    """The arguments do not fit the schema; the message is safe to show the caller (field
    names and what is wrong, never the values)."""


def validation_errors(exc: ValidationError, limit: int = 8) -> str:
    """Compact validation errors without echoing input values (they may hold secrets)."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")  # pydantic's
        parts.append(f"{loc}: {message}")
    return "; ".join(parts)


def parse_arguments(cap: ToolCapability, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` parsed into the tool's types (unchanged for a tool without a validator);
    :class:`InvalidArguments` naming the tool and every problem otherwise."""
    if cap.validator is None:
        return args
    try:
        return cap.validate(args)
    except ValidationError as exc:
        raise InvalidArguments(
            f"invalid arguments for {cap.id}: {validation_errors(exc)}"
        ) from None


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


def surface_context() -> RunContext[None]:
    """A RunContext for calls that do not come from an agent run (MCP server, CLI).

    Tools that read ``ctx.deps`` or call ``ctx.model`` are not meaningful outside a run.
    """
    # lazy: pydantic-ai, ~1 s; only a call from outside an agent run needs a context
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    return RunContext(deps=None, model=TestModel(), usage=RunUsage())


_SCHEMA_SLOT = ToolCapability.__dict__["json_schema"]  # the dataclass's slot for the field


class _LazySchemaCapability(ToolCapability):
    """A capability whose JSON schema is made on first read."""

    __slots__ = ("adapter", "schema_source")
    schema_source: Callable[[], dict[str, Any]] | None
    adapter: TypeAdapter[Any]

    def argument_schema(self) -> dict[str, Any]:
        """Before :attr:`json_schema` is made: pydantic's schema of the arguments' typed dict
        (the same types, without the docstring's descriptions; no pydantic-ai import)."""
        if self.schema_source is None:
            return self.json_schema
        return self.adapter.json_schema()

    @property
    def json_schema(self) -> dict[str, Any]:
        source = self.schema_source
        if source is not None:
            _SCHEMA_SLOT.__set__(self, dict(source()))
            self.schema_source = None
        value: dict[str, Any] = _SCHEMA_SLOT.__get__(self)
        return value

    @json_schema.setter
    def json_schema(self, value: dict[str, Any]) -> None:
        _SCHEMA_SLOT.__set__(self, value)
        self.schema_source = None


def plain_builder(
    tools: Sequence[Callable[..., Any]], toolset: Callable[[], Any]
) -> Callable[[str], ToolCapability | None]:
    """``tool_id -> capability`` for the registry (:meth:`CapabilityRegistry.deferred`);
    ``toolset()`` is the pydantic-ai ``FunctionToolset`` of ``tools``, asked only for a
    JSON schema."""
    by_name = {fn.__name__: fn for fn in tools}

    def one(tool_id: str) -> ToolCapability | None:
        fn = by_name.get(tool_id)
        if fn is None:
            return None

        def schema() -> dict[str, Any]:
            return dict(toolset().tools[tool_id].function_schema.json_schema)

        return plain_capability(fn, schema)

    return one


def plain_capability(
    fn: Callable[..., Any], json_schema: Callable[[], dict[str, Any]]
) -> ToolCapability | None:
    """The capability of ``fn`` as the pydantic-ai path builds it (same id, description,
    annotations, validation and invocation) without importing pydantic-ai, its JSON schema
    made by ``json_schema()`` on first read; None when ``fn``'s signature needs that path
    (see :mod:`toolcards.governance.plain_tools`)."""
    adapter = plain_adapter(fn)
    if adapter is None:
        return None
    summary = ToolSummary.of(fn)
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (a callable object's own __call__)
    )
    cap = _LazySchemaCapability(
        id=summary.id,
        description=summary.description,
        json_schema={},
        annotations=summary.annotations,
        invoke=function_invoke(fn, is_async),
        validator=adapter.validator,
        abandon_threads=False,
    )
    cap.adapter = adapter
    cap.schema_source = json_schema
    return cap


class CapabilityRegistry:
    """Capabilities by id (the tool name). Build with :meth:`from_tools`,
    :meth:`from_factory` (sync) or :meth:`from_toolset` (async, any pydantic-ai toolset)."""

    def __init__(self, capabilities: Iterable[ToolCapability] = ()) -> None:
        self._caps: dict[str, ToolCapability] = {}
        self._pending: dict[str, ToolSummary] = {}
        self._build: Callable[[], Iterable[ToolCapability]] | None = None
        self._one: Callable[[str], ToolCapability | None] | None = None
        self._some: dict[str, ToolCapability] = {}
        self._lock = threading.Lock()
        for cap in capabilities:
            self.add(cap)

    @classmethod
    def deferred(
        cls,
        summaries: Iterable[ToolSummary],
        build: Callable[[], Iterable[ToolCapability]],
        one: Callable[[str], ToolCapability | None] | None = None,
    ) -> CapabilityRegistry:
        """A registry whose capabilities ``build()`` makes on first use (exactly the ids of
        ``summaries``, which answer listings until then). ``one(tool_id)``, when given, builds
        a single capability for :meth:`get` (None: that one needs the whole build), so a
        call builds only the tool it calls."""
        registry = cls()
        for summary in summaries:
            if summary.id in registry._pending:
                raise ValueError(f"duplicate capability id {summary.id!r}")
            registry._pending[summary.id] = summary
        registry._build = build
        registry._one = one
        return registry

    @classmethod
    def combine(cls, registries: Sequence[CapabilityRegistry]) -> CapabilityRegistry:
        """One registry of several (still deferred); ValueError when two share an id."""
        parts = list(registries)
        summaries = [summary for part in parts for summary in part.summaries()]

        def one(tool_id: str) -> ToolCapability | None:
            part = next((part for part in parts if tool_id in part), None)
            return part.get(tool_id) if part is not None else None

        return cls.deferred(summaries, lambda: [cap for part in parts for cap in part], one)

    def _resolved(self) -> dict[str, ToolCapability]:
        if self._build is not None:
            with self._lock:
                build = self._build
                if build is not None:
                    built = {cap.id: cap for cap in build()}
                    if set(built) != set(self._pending):
                        raise RuntimeError("the built capabilities differ from the listed ones")
                    some = self._some  # one capability object per id, whichever built it
                    self._caps = {i: some.get(i) or built[i] for i in self._pending}
                    self._pending, self._some = {}, {}
                    self._build = self._one = None
        return self._caps

    def _built_one(self, tool_id: str) -> ToolCapability | None:
        """The capability ``tool_id`` alone (None: unknown, or only the whole build has it)."""
        with self._lock:
            if self._one is None or tool_id not in self._pending:
                return None
            cap = self._some.get(tool_id)
            if cap is None:
                cap = self._one(tool_id)
                if cap is not None:
                    self._some[tool_id] = cap
            return cap

    def add(self, cap: ToolCapability) -> None:
        caps = self._resolved()
        if cap.id in caps:
            raise ValueError(f"duplicate capability id {cap.id!r}")
        caps[cap.id] = cap

    def get(self, tool_id: str) -> ToolCapability | None:
        if self._one is not None and (cap := self._built_one(tool_id)) is not None:
            return cap
        return self._resolved().get(tool_id)

    def __getitem__(self, tool_id: str) -> ToolCapability:
        cap = self.get(tool_id)
        if cap is None:
            raise KeyError(tool_id)
        return cap

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
        toolset: list[FunctionToolset[Any]] = []

        def function_toolset() -> FunctionToolset[Any]:
            if not toolset:
                from toolcards.core.toolset import build_function_toolset  # lazy: pydantic-ai, ~1 s

                toolset.append(build_function_toolset(tools))
            return toolset[0]

        def build() -> CapabilityRegistry:
            return cls.from_function_toolset(function_toolset())

        one = plain_builder(tools, function_toolset)
        return cls.deferred([ToolSummary.of(fn) for fn in tools], build, one)

    @classmethod
    def from_factory(cls, factory: ToolFactory) -> CapabilityRegistry:
        """Capabilities of a ToolFactory's TOOL_CALL tools (sync, built on first use).
        Card-contributed toolsets (MCP servers) need :meth:`from_toolset` with
        ``factory.toolset()``."""

        def function_toolset() -> FunctionToolset[Any]:
            return factory.function_toolset()  # type: ignore[return-value]

        def build() -> CapabilityRegistry:
            return cls.from_function_toolset(function_toolset())

        tools = factory.get_tools()
        one = plain_builder(tools, function_toolset)
        return cls.deferred([ToolSummary.of(fn) for fn in tools], build, one)

    @classmethod
    def from_function_toolset(
        cls, toolset: FunctionToolset[Any], ctx: RunContext[Any] | None = None
    ) -> CapabilityRegistry:
        """Capabilities of a ``FunctionToolset`` without listing it (sync). A surface context
        is made only for a tool that takes one: making it loads pydantic-ai's model price
        table (about 0.1 s of CPU), which a server whose tools take no context never needs."""
        contexts = [ctx] if ctx is not None else []

        def context() -> RunContext[Any]:
            if not contexts:
                contexts.append(surface_context())
            return contexts[0]

        caps = []
        for name, tool in toolset.tools.items():
            schema = tool.function_schema
            run_ctx = context() if schema.takes_ctx else None
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
