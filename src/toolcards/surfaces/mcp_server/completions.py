"""MCP ``completion/complete`` for prompt arguments and resource-template variables.

Governed like the listings: a prompt or template the caller may not see answers exactly like
one that does not exist (``-32602``), and no value names what the caller could not list (tool
names from the policy's visibility filter, resource URIs the caller may see, template values
only where the resource they complete to is visible). Where values come from:
:mod:`toolcards.surfaces.mcp_server.complete` (prompt arguments: ``Literal``/``Enum`` types and
``Complete`` markers) and ``TemplateResource.complete`` (template variables; the workspace
template completes the files it lists). At most 100 values, in the source's order, each
starting with what the caller typed; ``total`` counts them all.
"""

from __future__ import annotations

import enum
import inspect
import logging
import typing
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError

import toolcards.surfaces.mcp_server.resource_sources as res
from toolcards.core.identity import Identity
from toolcards.surfaces.mcp_server.complete import Complete
from toolcards.surfaces.mcp_server.prompts import INVALID_PARAMS, PromptCatalog
from toolcards.surfaces.mcp_server.resources import ResourceCatalog
from toolcards.surfaces.runtime import SurfaceRuntime

log = logging.getLogger(__name__)

MAX_VALUES = 100


def _matching(candidates: Iterable[Any], value: str) -> list[str]:
    """The distinct string candidates starting with ``value``, in order."""
    seen: dict[str, None] = {}
    for item in candidates:
        if isinstance(item, str) and item.startswith(value):
            seen.setdefault(item)
    return list(seen)


def _hint(fn: Callable[..., Any], argument: str) -> Any:
    try:
        return typing.get_type_hints(fn, include_extras=True).get(argument)
    except Exception:  # an unresolvable hint: nothing to complete from
        return None


class Completer:
    def __init__(
        self,
        runtime: SurfaceRuntime,
        identity_of: Callable[[Any], Identity],
        prompts: PromptCatalog,
        resources: ResourceCatalog,
    ) -> None:
        self.runtime = runtime
        self.identity_of = identity_of
        self.prompts = prompts
        self.resources = resources

    def handlers(self) -> dict[str, Any]:
        return {"on_completion": self._complete}

    async def _complete(
        self, ctx: Any, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        who = self.identity_of(ctx)
        argument, value = params.argument.name, params.argument.value
        context = dict(params.context.arguments or {}) if params.context is not None else {}
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            job: Callable[[], list[str]] = lambda: self.prompt_values(  # noqa: E731
                who, ref.name, argument, value, context
            )
        else:
            job = lambda: self.template_values(who, ref.uri, argument, value, context)  # noqa: E731
        found = await anyio.to_thread.run_sync(job)
        completion = types.Completion(
            values=found[:MAX_VALUES], total=len(found), has_more=len(found) > MAX_VALUES
        )
        return types.CompleteResult(completion=completion)

    # -- prompts ------------------------------------------------------------------------------

    def prompt_values(
        self, who: Identity, prompt: str, argument: str, value: str, context: dict[str, str]
    ) -> list[str]:
        source = self.prompts.sources.get(prompt)
        if source is None or not self.prompts.visible(who, prompt):
            raise MCPError(INVALID_PARAMS, f"unknown prompt {prompt!r}")
        param = inspect.signature(source.fn).parameters.get(argument)
        if param is None or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise MCPError(INVALID_PARAMS, f"prompt {prompt} has no argument {argument!r}")
        return _matching(self._candidates(who, _hint(source.fn, argument), value, context), value)

    def _candidates(
        self, who: Identity, hint: Any, value: str, context: dict[str, str]
    ) -> Iterable[Any]:
        if typing.get_origin(hint) is typing.Annotated:
            marks = [m for m in hint.__metadata__ if isinstance(m, Complete)]
            if marks:
                return self._from(marks[0], who, value, context)
            hint = typing.get_args(hint)[0]
        if typing.get_origin(hint) is typing.Literal:
            return [str(v) for v in typing.get_args(hint)]
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return [str(member.value) for member in hint]
        return []

    def _from(
        self, mark: Complete, who: Identity, value: str, context: dict[str, str]
    ) -> Iterable[Any]:
        if mark.source == "tools":
            return self.runtime.visible_to(who)
        if mark.source == "prompts":
            return [name for name in self.prompts.sources if self.prompts.visible(who, name)]
        if mark.source == "resources":
            return [
                s.uri
                for s in self.resources.sources()
                if isinstance(s, res.StaticResource) and self.resources.visible(who, s)
            ]
        try:
            return list(mark.source(value, context))
        except Exception as exc:  # its type only: the message may repeat the value typed
            log.error("completing a prompt argument failed (%s)", type(exc).__name__)
            return []

    # -- resource templates -------------------------------------------------------------------

    def template_values(
        self, who: Identity, uri_template: str, variable: str, value: str, context: dict[str, str]
    ) -> list[str]:
        template = next(
            (
                s
                for s in self.resources.sources()
                if isinstance(s, res.TemplateResource) and s.uri_template == uri_template
            ),
            None,
        )
        if template is None or not self.resources.visible(who, template):
            raise MCPError(INVALID_PARAMS, f"unknown resource template {uri_template!r}")
        names = template.variables()
        if variable not in names:
            raise MCPError(INVALID_PARAMS, f"{uri_template} has no variable {variable!r}")
        if template.complete is None:
            return []
        try:
            candidates = _matching(template.complete(variable, value, context), value)
        except Exception as exc:  # its type only: the message may repeat the value typed
            log.error("completing %s failed (%s)", uri_template, type(exc).__name__)
            return []
        others = {k: context[k] for k in names if k in context and k != variable}
        if len(others) + 1 != len(names):  # which resource a value names is unknown: offer none
            return []
        return [
            c for c in candidates if self._visible_value(who, template, {**others, variable: c})
        ]

    def _visible_value(
        self, who: Identity, template: res.TemplateResource, variables: dict[str, str]
    ) -> bool:
        try:
            canonical, _ = template.canonical(variables)
        except res.ResourceNotFound:
            return False
        return self.resources.visible(who, template, canonical)
