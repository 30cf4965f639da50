"""GovernedToolset: any pydantic-ai toolset, with every call through the governed executor."""

from __future__ import annotations

import copy
import hashlib
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
from pydantic_core import SchemaValidator, core_schema

from toolcards.core.spec import ToolAnnotations
from toolcards.governance._policy_parse import compile_globs
from toolcards.governance.approvals import Approver
from toolcards.governance.audit import AuditLog
from toolcards.governance.capability import Capability, CapabilityRegistry, surface_context
from toolcards.governance.executor import ExecutionResult, Executor, Outcome
from toolcards.governance.identity import ANONYMOUS, Identity
from toolcards.governance.policy import Policy
from toolcards.governance.redact import redact_text

IdentityResolver = Callable[[RunContext[Any]], Identity | None]

_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
DESTRUCTIVE_WARNING = "Warning: destructive. Its changes may not be undoable; call it deliberately."
APPROVAL_NOTE = "A human must approve each call before it runs."
SURFACE = "pydantic-ai"
# The model's arguments reach call_tool unparsed, so that the ACL, rate limit and approval
# see the same raw arguments as on every other surface; the executor validates afterwards.
_RAW_ARGS = SchemaValidator(core_schema.dict_schema(keys_schema=core_schema.str_schema()))


def provider_safe_name(tool_id: str) -> str:
    """A name every model provider accepts (``[A-Za-z0-9_-]``, <= 64 chars). Valid ids are kept;
    others get a suffix hashed from the id alone, so names never shift when tools are added."""
    if _SAFE.match(tool_id):
        return tool_id
    digest = hashlib.sha256(tool_id.encode()).hexdigest()[:8]
    base = _UNSAFE.sub("_", tool_id)[:55] or "tool"
    return f"{base}_{digest}"


@dataclass(slots=True)
class _Entry:
    original: str
    inner_tool: ToolsetTool[Any]
    capability: Capability
    governed: ToolsetTool[Any]


class GovernedToolset(WrapperToolset[Any]):
    """Wraps any pydantic-ai toolset so that every call goes through the governed executor.

    The model sees only the tools the principal may call (unless ``hide_denied=False``),
    under provider-safe names (the original id is in ``metadata["tool_id"]``); destructive tools
    are sequential and carry a warning line. Denials, rate limits and tool failures come back as
    readable tool results, fixable errors as retries, and approvals through pydantic-ai's
    deferred flow (``DeferredToolRequests`` -> ``DeferredToolResults``), bound to the call id,
    tool, arguments and principal.

    Approval: with ``approver`` (an async ``(ApprovalRequest) -> bool``) a human is asked
    inline; otherwise the call is deferred (``defer_approvals=True``, the agent needs
    ``DeferredToolRequests`` among its output types), or, with ``defer_approvals=False``,
    refused with a readable result: no approver, no run.

    ``executor`` shares one Executor (its rate limits, pending approvals and audit) with other
    surfaces; it must hold the same ``policy``. ``timeout`` bounds each tool run in seconds.

    ``relist`` says when the wrapped toolset is listed again: every ``"step"``, once per
    ``"run"`` (default), or ``"never"`` after the first listing (call :meth:`invalidate`).
    """

    def __init__(
        self,
        inner: AbstractToolset[Any],
        *,
        policy: Policy,
        identity: Identity | None = None,
        identity_resolver: IdentityResolver | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        audit: AuditLog | None = None,
        hide_denied: bool = True,
        executor: Executor | None = None,
        timeout: float | None = 60.0,
        relist: Literal["step", "run", "never"] = "run",
        approver: Approver | None = None,
        defer_approvals: bool = True,
        toolset_id: str | None = None,
    ) -> None:
        self.wrapped = inner
        self.policy = policy
        self.identity = identity
        self.identity_resolver = identity_resolver
        self.hide_denied = hide_denied
        self.relist = relist
        self.approver = approver
        self.defer_approvals = defer_approvals
        self._id = toolset_id
        if executor is not None and executor.policy is not policy:
            raise ValueError("a shared executor must use the same Policy object as the toolset")
        self.executor = executor or Executor(
            CapabilityRegistry(), policy, audit=audit, timeout=timeout
        )
        if audit is not None and self.executor.audit is None:
            self.executor.audit = audit
        self._include = compile_globs(tuple(include)) if include is not None else None
        self._exclude = compile_globs(tuple(exclude)) if exclude else None
        self._state: _Shared = _Shared()

    @property
    def id(self) -> str | None:
        return self._id

    # -- composition (the wrapped toolset may be replaced per run or step) -----------------

    def _with_wrapped(self, new: AbstractToolset[Any]) -> GovernedToolset:
        clone = copy.copy(self)
        clone.wrapped = new
        clone._state = _Shared()
        return clone

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        new = await self.wrapped.for_run(ctx)
        return self if new is self.wrapped else self._with_wrapped(new)

    async def for_run_step(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        new = await self.wrapped.for_run_step(ctx)
        return self if new is self.wrapped else self._with_wrapped(new)

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[Any]], AbstractToolset[Any]]
    ) -> AbstractToolset[Any]:
        return self._with_wrapped(self.wrapped.visit_and_replace(visitor))

    def invalidate(self) -> None:
        """Forget cached listings; the next step lists the wrapped toolset again."""
        self._state.generation_key = None
        self._state.by_principal.clear()

    # -- identity and listing --------------------------------------------------------------

    def resolve_identity(self, ctx: RunContext[Any]) -> Identity:
        """The caller: ``identity_resolver(ctx)``, else ``identity``, else anonymous."""
        if self.identity_resolver is not None:
            found = self.identity_resolver(ctx)
            if found is not None:
                if not isinstance(found, Identity):
                    raise TypeError("identity_resolver must return an Identity or None")
                return found
        return self.identity if self.identity is not None else ANONYMOUS

    def _selected(self, tool_id: str) -> bool:
        if self._include is not None and self._include.fullmatch(tool_id) is None:
            return False
        return self._exclude is None or self._exclude.fullmatch(tool_id) is None

    def _listing_key(self, ctx: RunContext[Any]) -> object:
        relist = self.relist
        if relist == "run":
            return ctx.run_id
        return True if relist == "never" else (ctx.run_id, ctx.run_step)

    async def _entries(self, ctx: RunContext[Any]) -> dict[str, _Entry]:
        """Every selected tool of the wrapped toolset by safe name (listed per ``relist``)."""
        state = self._state
        key = self._listing_key(ctx)
        generation = state.generation_key
        if generation is not None and generation[0] == key:
            return state.entries
        inner_tools = await self.wrapped.get_tools(ctx)
        entries: dict[str, _Entry] = {}
        for name, tool in inner_tools.items():
            if not self._selected(name):
                continue
            safe = provider_safe_name(name)
            if safe in entries:
                raise ValueError(
                    f"tool ids {entries[safe].original!r} and {name!r} clash as {safe!r}"
                )
            entries[safe] = self._entry(name, safe, tool)
        state.entries = entries
        state.generation_key = (key,)
        state.by_principal.clear()
        return entries

    def _entry(self, name: str, safe: str, tool: ToolsetTool[Any]) -> _Entry:
        tdef = tool.tool_def
        notes = ToolAnnotations.from_metadata(tdef.metadata)
        requires_approval = notes.requires_approval or tdef.kind == "unapproved"
        if requires_approval and not notes.requires_approval:
            notes = replace(notes, requires_approval=True)
        lines = [tdef.description or ""]
        if notes.destructive:
            lines.append(DESTRUCTIVE_WARNING)
        if requires_approval:
            lines.append(APPROVAL_NOTE)
        metadata = {**(tdef.metadata or {}), **notes.as_metadata(), "tool_id": name}
        governed_def = replace(
            tdef,
            name=safe,
            description="\n\n".join(line for line in lines if line) or None,
            metadata=metadata,
            sequential=tdef.sequential or notes.destructive,
            # approval is asked by raising ApprovalRequired from call_tool, so that it is
            # bound to the arguments and the principal; a declarative deferral could not be
            kind="function" if tdef.kind == "unapproved" else tdef.kind,
        )
        wrapped = self.wrapped

        async def invoke(args: dict[str, Any]) -> Any:
            return await wrapped.call_tool(name, args, surface_context(), tool)

        cap = Capability(
            id=name,
            description=tdef.description or "",
            json_schema=dict(tdef.parameters_json_schema),
            annotations=notes,
            invoke=invoke,
            validator=tool.args_validator,
            timeout=tdef.timeout,
            # an async function tool never waits on a worker thread a timeout must abandon
            abandon_threads=getattr(tool, "is_async", None) is not True,
        )
        governed = ToolsetTool(
            toolset=self,
            tool_def=governed_def,
            max_retries=tool.max_retries,
            args_validator=_RAW_ARGS,
        )
        return _Entry(name, tool, cap, governed)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        entries = await self._entries(ctx)
        identity = self.resolve_identity(ctx)
        policy = self.policy
        policy.check_reload()
        pkey = (identity, policy.version)
        state = self._state
        listed = state.by_principal.get(pkey)
        if listed is None:
            listed = {
                safe: e.governed
                for safe, e in entries.items()
                if not self.hide_denied or policy.visible(identity, e.original)
            }
            if len(state.by_principal) > 1024:
                state.by_principal.clear()
            state.by_principal[pkey] = listed
        return listed

    # -- calls -----------------------------------------------------------------------------

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        identity = self.resolve_identity(ctx)
        state = self._state
        generation = state.generation_key
        if generation is not None and generation[0] == self._listing_key(ctx):
            entry = state.entries.get(name)
        else:
            entry = (await self._entries(ctx)).get(name)
        if entry is None:
            return f"denied: {name} is not permitted for {identity.id}"
        inner, original, inner_tool = self.wrapped, entry.original, entry.inner_tool
        check = inner_tool.args_validator_func

        async def invoke(args: dict[str, Any]) -> Any:
            if check is not None:  # the wrapped tool's own post-validation hook
                checked = check(ctx, **args)
                if inspect.isawaitable(checked):
                    await checked
            return await inner.call_tool(original, args, ctx, inner_tool)

        result = await self.executor.run(
            entry.capability,
            tool_args,
            identity,
            surface=SURFACE,
            call_id=ctx.tool_call_id,
            approved=ctx.tool_call_approved,
            approver=self.approver,
            invoke=invoke,
        )
        if result.outcome is Outcome.NEEDS_APPROVAL and not self.defer_approvals:
            return f"{result.message}; no approver is configured, so it was not run"
        return to_model_result(result)


def to_model_result(result: ExecutionResult) -> Any:
    """Map an executor outcome to what a pydantic-ai model sees."""
    outcome = result.outcome
    if outcome is Outcome.OK:
        return result.value
    if outcome is Outcome.RETRY or outcome is Outcome.INVALID_ARGS:
        raise ModelRetry(result.message)
    if outcome is Outcome.NEEDS_APPROVAL:
        meta = result.approval.as_metadata() if result.approval is not None else None
        raise ApprovalRequired(metadata=meta)
    return redact_text(result.message)


@dataclass(slots=True)
class _Shared:
    entries: dict[str, _Entry]
    generation_key: tuple[object] | None
    by_principal: dict[tuple[Identity, int], dict[str, ToolsetTool[Any]]]

    def __init__(self) -> None:
        self.entries = {}
        self.generation_key = None
        self.by_principal = {}
