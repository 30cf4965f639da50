"""Annotations that travel with a tool callable (readonly, destructive, approval, ...)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolcards.core.pathargs import PathArgs

F = TypeVar("F", bound=Callable[..., Any])

_ATTR = "__toolcards_annotations__"
_INSTRUCTIONS_ATTR = "__toolcards_instructions__"

METADATA_KEYS = (
    "readonly",
    "destructive",
    "idempotent",
    "open_world",
    "requires_approval",
    "sensitive",
    "paths",
    "long_running",
)


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """What a tool declares about itself; governance and surfaces read it.

    Travels in ``ToolDefinition.metadata`` under the keys of :data:`METADATA_KEYS`;
    ``paths`` (which arguments name files or URLs, see :class:`PathArgs`) and ``delegates``
    only when declared.
    """

    readonly: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False
    requires_approval: bool = False
    sensitive: tuple[str, ...] = field(default_factory=tuple)
    paths: PathArgs | None = None
    long_running: bool = False
    """May run for seconds or minutes (a command, a search of many files, a crawl, an
    embedding batch): MCP serves it as a task when the client asks for one."""
    delegates: bool = False
    """The tool runs other agents (a sub-agent, a team member): approvals their governed calls
    need are asked of the run that called it (``toolcards.governance.approvals.nested``)."""

    def as_metadata(self) -> dict[str, Any]:
        """The annotations as ``ToolDefinition.metadata`` entries."""
        meta: dict[str, Any] = {
            "readonly": self.readonly,
            "destructive": self.destructive,
            "idempotent": self.idempotent,
            "open_world": self.open_world,
            "requires_approval": self.requires_approval,
            "sensitive": list(self.sensitive),
            "long_running": self.long_running,
        }
        if self.paths is not None:
            meta["paths"] = self.paths
        if self.delegates:
            meta["delegates"] = True
        return meta

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any] | None) -> ToolAnnotations:
        """Read annotations back from ``ToolDefinition.metadata`` (unknown keys ignored)."""
        if not metadata:
            return _DEFAULT
        sensitive = metadata.get("sensitive") or ()
        if isinstance(sensitive, str):
            sensitive = (sensitive,)
        return cls(
            readonly=bool(metadata.get("readonly", False)),
            destructive=bool(metadata.get("destructive", False)),
            idempotent=bool(metadata.get("idempotent", False)),
            open_world=bool(metadata.get("open_world", False)),
            requires_approval=bool(metadata.get("requires_approval", False)),
            sensitive=tuple(str(s) for s in sensitive),
            paths=paths if isinstance(paths := metadata.get("paths"), PathArgs) else None,
            long_running=bool(metadata.get("long_running", False)),
            delegates=metadata.get("delegates") is True,
        )


_DEFAULT = ToolAnnotations()


def annotate(
    fn: F,
    *,
    readonly: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    requires_approval: bool = False,
    sensitive: tuple[str, ...] | list[str] = (),
    instructions: str | None = None,
    paths: PathArgs | None = None,
    long_running: bool = False,
    delegates: bool = False,
) -> F:
    """Attach annotations (and optional extra instructions) to a tool callable; returns it.
    ``paths`` declares the arguments that name files or URLs (see :class:`PathArgs` and
    ``url_args``); ``delegates`` a tool that runs other agents, whose approvals then reach the
    calling run."""
    setattr(
        fn,
        _ATTR,
        ToolAnnotations(
            readonly=readonly,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
            requires_approval=requires_approval,
            sensitive=tuple(sensitive),
            paths=paths,
            long_running=long_running,
            delegates=delegates,
        ),
    )
    if instructions:
        setattr(fn, _INSTRUCTIONS_ATTR, instructions)
    return fn


def annotations_of(fn: Callable[..., Any]) -> ToolAnnotations:
    """The annotations declared on ``fn`` (defaults when none)."""
    found = getattr(fn, _ATTR, None)
    return found if isinstance(found, ToolAnnotations) else _DEFAULT


def instructions_of(fn: Callable[..., Any]) -> str | None:
    """Extra instructions configured for ``fn`` through its card's param."""
    value = getattr(fn, _INSTRUCTIONS_ATTR, None)
    return value if isinstance(value, str) else None


def set_instructions(fn: F, instructions: str | None) -> F:
    """Attach configured instructions to a tool callable; returns it."""
    if instructions:
        setattr(fn, _INSTRUCTIONS_ATTR, instructions)
    return fn


def describe(fn: Callable[..., Any]) -> str:
    """The description a model reads: the docstring, then the configured instructions."""
    doc = inspect.getdoc(fn) or ""
    extra = instructions_of(fn)
    if extra:
        return f"{doc}\n\n{extra}" if doc else extra
    return doc
