"""Existing pydantic-ai tools as apcore modules, registered all together or not at all."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from apcore import MAX_MODULE_ID_LENGTH, MODULE_ID_PATTERN, RESERVED_WORDS, ModuleAnnotations
from apcore.decorator import FunctionModule
from apcore_toolkit import ScannedModule
from pydantic import BaseModel, ConfigDict, create_model
from pydantic_ai.tools import Tool

from toolcards.core.errors import ToolcardsError

_ANNOTATION_KEYS = ("readonly", "destructive", "idempotent", "open_world", "requires_approval")
_ID_UNSAFE = re.compile(r"[^a-z0-9_.]")


class Enhancer(Protocol):
    """Fills metadata gaps in scanned modules (e.g. ``apcore_toolkit.AIEnhancer``)."""

    def enhance(self, modules: list[ScannedModule]) -> list[ScannedModule]: ...


@dataclass(frozen=True)
class SkippedTool:
    """A tool that was not registered, and why."""

    name: str
    reason: str


@dataclass
class RegistrationResult:
    """Outcome of :func:`register_toolset`."""

    registered: list[str] = field(default_factory=list)
    skipped: list[SkippedTool] = field(default_factory=list)
    modules: list[ScannedModule] = field(default_factory=list)


class RegistrationError(ToolcardsError, ValueError):
    """Nothing was registered; ``problems`` lists every reason at once."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        listing = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s), nothing registered:\n{listing}")


def _tools_of(toolset: Any) -> list[Tool[Any]]:
    tools = getattr(toolset, "tools", None)
    if isinstance(tools, Mapping):
        return list(tools.values())
    if isinstance(toolset, Iterable) and not isinstance(toolset, (str, bytes)):
        items = list(toolset)
        if all(isinstance(item, Tool) for item in items):
            return items
    raise TypeError(
        "register_toolset needs a FunctionToolset (or tools) whose callables it can hold; "
        f"got {type(toolset).__name__}"
    )


def _module_id(prefix: str, name: str) -> str:
    return prefix + _ID_UNSAFE.sub("_", name.lower())


def _id_problem(module_id: str) -> str | None:
    if not MODULE_ID_PATTERN.match(module_id):
        return f"module id {module_id!r} does not match {MODULE_ID_PATTERN.pattern}"
    if len(module_id) > MAX_MODULE_ID_LENGTH:
        return f"module id {module_id!r} is longer than {MAX_MODULE_ID_LENGTH} characters"
    if module_id.split(".", 1)[0] in RESERVED_WORDS:
        return f"module id {module_id!r} starts with a reserved word"
    return None


def _target(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}:{getattr(func, '__qualname__', repr(func))}"


def _scan(tool: Tool[Any], module_id: str) -> ScannedModule:
    schema = dict(tool.function_schema.json_schema)
    props: dict[str, Any] = schema.get("properties") or {}
    warnings: list[str] = []
    missing = [name for name, spec in props.items() if not spec.get("description")]
    if missing:
        warnings.append(
            f"{module_id}: no description for parameter(s) {', '.join(missing)}; "
            "a model only sees their names."
        )
    target = _target(tool.function)
    if "<locals>" in target:
        warnings.append(f"{module_id}: target {target} is not importable; the callable is held.")
    meta = tool.metadata or {}
    flags = {key: bool(meta[key]) for key in _ANNOTATION_KEYS if key in meta}
    flags["requires_approval"] = bool(tool.requires_approval or flags.get("requires_approval"))
    return ScannedModule(
        module_id=module_id,
        description=tool.description or f"Tool {tool.name}",
        input_schema=schema,
        output_schema={},
        tags=[],
        target=target,
        annotations=ModuleAnnotations(**flags),
        metadata={"pydantic_ai_tool": tool.name},
        warnings=warnings,
    )


def _output_model(func: Callable[..., Any]) -> type[BaseModel] | None:
    try:
        has_return = "return" in inspect.get_annotations(func, eval_str=False)
    except TypeError:
        has_return = False
    if has_return:
        return None  # apcore derives it from the annotation
    return create_model("ToolOutput", __config__=ConfigDict(extra="allow"))


def _build(tool: Tool[Any], scanned: ScannedModule) -> FunctionModule:
    annotations = scanned.annotations or ModuleAnnotations()
    return FunctionModule(
        func=tool.function,
        module_id=scanned.module_id,
        description=scanned.description,
        documentation=scanned.documentation,
        tags=list(scanned.tags),
        version=scanned.version,
        annotations=dataclasses.asdict(annotations),
        metadata=dict(scanned.metadata),
        examples=list(scanned.examples) or None,
        output_schema=_output_model(tool.function),
    )


def register_toolset(
    toolset: Any,
    registry: Any,
    *,
    prefix: str = "",
    enhancers: Sequence[Enhancer] | None = None,
) -> RegistrationResult:
    """Register the tools of a pydantic-ai toolset as apcore modules.

    Tools taking a ``RunContext`` are skipped (apcore has no run context to give them). Every
    other tool is validated first; if anything is wrong, :class:`RegistrationError` lists every
    problem and the registry is left untouched.
    """
    result = RegistrationResult()
    candidates: list[tuple[Tool[Any], ScannedModule]] = []
    problems: list[str] = []
    seen: set[str] = set()
    for tool in _tools_of(toolset):
        if tool.takes_ctx:
            result.skipped.append(
                SkippedTool(tool.name, "takes a RunContext, which apcore cannot provide")
            )
            continue
        module_id = _module_id(prefix, tool.name)
        problem = _id_problem(module_id)
        if problem is None and (module_id in seen or registry.has(module_id)):
            problem = f"module id {module_id!r} is already registered"
        seen.add(module_id)
        if problem is not None:
            problems.append(f"{tool.name}: {problem}")
            continue
        candidates.append((tool, _scan(tool, module_id)))

    scanned = [module for _, module in candidates]
    for enhancer in enhancers or ():
        scanned = enhancer.enhance(scanned)
    by_id = {module.module_id: module for module in scanned}

    built: list[tuple[str, FunctionModule]] = []
    for tool, original in candidates:
        module = by_id.get(original.module_id, original)
        try:
            built.append((module.module_id, _build(tool, module)))
        except Exception as exc:  # apcore explains what is wrong with the signature
            problems.append(f"{tool.name}: {exc}")
    if problems:
        raise RegistrationError(problems)

    done: list[str] = []
    try:
        for module_id, module_obj in built:
            registry.register(module_id, module_obj)
            done.append(module_id)
    except Exception:
        for module_id in done:
            registry.unregister(module_id)
        raise
    result.registered = done
    originals = {module.module_id: module for _, module in candidates}
    result.modules = [by_id.get(mid, originals[mid]) for mid in done]
    return result
