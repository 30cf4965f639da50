"""What :class:`~.governed.GovernedToolset` lists: the tools of its stack of listing layers
(:mod:`.layers`) as :class:`GovernedTool`\\s, listed once and kept across runs while the
wrapped toolset would list the same ones, and each caller's view of them (the tools the
policy lets it see), kept until the policy reloads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
from pydantic_core import SchemaValidator, core_schema

from toolcards.core.identity import Identity
from toolcards.core.spec import ToolAnnotations
from toolcards.governance.capability import ToolCapability
from toolcards.governance.policy.policy import Policy
from toolcards.governance.toolset.layers import (
    Fingerprint,
    built,
    list_tools,
    listing_fingerprint,
    source_of,
)

__all__ = ["GovernedTool", "ListedToolset", "Listing", "ListingCache"]

# The model's arguments reach call_tool unparsed, so that the ACL, rate limit and approval
# see the same raw arguments as on every other surface; the executor validates afterwards.
_RAW_ARGS = SchemaValidator(core_schema.dict_schema(keys_schema=core_schema.str_schema()))
_MAX_CALLERS = 1024  # per-caller listings kept before the cache starts over


@dataclass(kw_only=True)
class GovernedTool(ToolsetTool[Any]):
    """A tool as the model sees it through governance: ``source`` is the tool the governed
    toolset itself listed (under the listing layers, which take no part in calls), ``tool_id``
    its id; the capability is built on the first call."""

    source: ToolsetTool[Any]
    tool_id: str
    capability: ToolCapability | None = field(default=None, repr=False)

    def governed_capability(self) -> ToolCapability:
        cap = self.capability
        if cap is None:
            tdef = self.tool_def
            cap = self.capability = ToolCapability(
                id=self.tool_id,
                description=tdef.description or "",
                json_schema=dict(tdef.parameters_json_schema),
                annotations=ToolAnnotations.from_metadata(tdef.metadata),
                validator=self.source.args_validator,
                timeout=tdef.timeout,
                # an async function tool never waits on a worker thread a timeout must abandon
                abandon_threads=getattr(self.source, "is_async", None) is not True,
            )
        return cap


@dataclass(slots=True)
class Listing:
    """One listing of the stack and the per-caller views of it."""

    fingerprint: Fingerprint | None
    key: object
    wrapped: AbstractToolset[Any] | None
    tools: dict[str, GovernedTool]
    by_caller: dict[tuple[Identity, int], dict[str, ToolsetTool[Any]]] = field(default_factory=dict)
    step: tuple[object, ...] = ()
    """The run step it was last found valid for (calls in that step skip the check)."""


@dataclass(slots=True)
class ListingCache:
    """Shared by a GovernedToolset and its per-run copies; a listing is reused while the
    wrapped toolset would list the same tools (see :func:`listing_fingerprint`)."""

    listing: Listing | None = None


class ListedToolset(WrapperToolset[Any]):
    """The listing side of a governed toolset (its base): the stack's listing, cached in
    ``_cache`` (shared with its per-run copies), and each caller's view of it."""

    relist: Literal["step", "run", "never"]
    policy: Policy
    hide_denied: bool
    _cache: ListingCache

    def _key(self, ctx: RunContext[Any]) -> object:
        if self.relist == "run":
            return ctx.run_id
        return True if self.relist == "never" else (ctx.run_id, ctx.run_step)

    def _current(self, ctx: RunContext[Any]) -> tuple[Listing | None, Fingerprint | None]:
        """The cached listing when it still holds for ``ctx``, and the stack's fingerprint."""
        listing = self._cache.listing
        if self.relist == "never":
            return listing, None
        fingerprint = listing_fingerprint(self.wrapped, ctx)
        if listing is None:
            return None, fingerprint
        if fingerprint is not None:
            same = listing.fingerprint is not None and listing.fingerprint == fingerprint
        else:
            same = listing.wrapped is self.wrapped and listing.key == self._key(ctx)
        return (listing if same else None), fingerprint

    async def _listing(self, ctx: RunContext[Any]) -> Listing:
        listing, fingerprint = self._current(ctx)
        if listing is not None:
            return listing
        stack = await list_tools(self.wrapped, ctx)
        tools = {
            name: built(
                GovernedTool,
                toolset=self,
                tool_def=tool.tool_def,
                max_retries=tool.max_retries,
                args_validator=_RAW_ARGS,
                args_validator_func=None,
                source=source_of(tool),
                tool_id=(tool.tool_def.metadata or {}).get("tool_id", name),
                capability=None,
            )
            for name, tool in stack.items()
        }
        listing = Listing(
            fingerprint,
            None if fingerprint is not None else self._key(ctx),
            None if fingerprint is not None else self.wrapped,
            tools,
        )
        self._cache.listing = listing
        return listing

    def _step(self, ctx: RunContext[Any]) -> tuple[object, ...]:
        return (ctx.run_id, ctx.run_step, self.wrapped)

    async def _view(self, ctx: RunContext[Any], identity: Identity) -> dict[str, ToolsetTool[Any]]:
        """What ``identity`` sees: the listing filtered by the policy (cached per caller)."""
        listing = await self._listing(ctx)
        listing.step = self._step(ctx)
        policy = self.policy
        policy.check_reload()
        key = (identity, policy.version)
        view = listing.by_caller.get(key)
        if view is None:
            visible = policy.visible
            if self.hide_denied:
                view = {n: t for n, t in listing.tools.items() if visible(identity, t.tool_id)}
            else:  # a deferred tool is offered by a search: never one the caller may not call
                view = {
                    n: t
                    for n, t in listing.tools.items()
                    if not t.tool_def.defer_loading or visible(identity, t.tool_id)
                }
            if len(listing.by_caller) >= _MAX_CALLERS:
                listing.by_caller.clear()
            listing.by_caller[key] = view
        return view
