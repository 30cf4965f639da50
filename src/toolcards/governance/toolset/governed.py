"""GovernedToolset: any pydantic-ai toolset, with every call through the governed executor.

It is the execution layer on top of a stack of listing layers (:mod:`.layers`)::

    GovernedToolset(                       identity, per-caller listing, executor, outcomes
      ApprovalMarkedToolset(               declared approval -> governed approval
        DescribedToolset(                  annotations, destructive warning, sequential
          SafeNamedToolset(                provider-safe names
            SelectedToolset(inner, include, exclude)))))

What it lists, and each caller's view of that, is kept by its base (:mod:`.toolset_listing`).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.core.names import provider_safe_name
from toolcards.governance.approvals.broker import Approver
from toolcards.governance.approvals.edits import split_override
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.calls import durable_call_key
from toolcards.governance.executor.pipeline import ExecutionResult, Executor
from toolcards.governance.executor.replay import CallResults, DurableCall
from toolcards.governance.guardrails import ToolHook
from toolcards.governance.outcomes import OUTCOMES, Outcome
from toolcards.governance.policy.policy import Policy
from toolcards.governance.redaction.redactor import redact_text
from toolcards.governance.telemetry import Telemetry
from toolcards.governance.toolset.layers import (
    APPROVAL_NOTE,
    DESTRUCTIVE_WARNING,
    ApprovalMarkedToolset,
    DescribedToolset,
    SafeNamedToolset,
    SelectedToolset,
)
from toolcards.governance.toolset.listing import GovernedTool, ListedToolset, ListingCache

__all__ = [
    "APPROVAL_NOTE",
    "DESTRUCTIVE_WARNING",
    "GovernedToolset",
    "provider_safe_name",
    "to_model_result",
]

IdentityResolver = Callable[[RunContext[Any]], Identity | None]
SURFACE = "pydantic-ai"


class _Unset(Enum):
    UNSET = "unset"


_UNSET = _Unset.UNSET  # an executor option left out (so beside ``executor=`` it is no conflict)


class GovernedToolset(ListedToolset):
    """Wraps any pydantic-ai toolset so that every call goes through the governed executor.

    The model sees only the tools the principal may call (unless ``hide_denied=False``, which
    still never lists a denied ``defer_loading`` tool: a tool search would offer it),
    under provider-safe names (the original id is in ``metadata["tool_id"]``); destructive tools
    are sequential and carry a warning line. Denials, rate limits and tool failures come back as
    readable tool results, fixable errors (and unknown tool names) as retries, and approvals
    through pydantic-ai's deferred flow (``DeferredToolRequests`` -> ``DeferredToolResults``),
    bound to the call id, tool, arguments and principal. A tool hidden from the principal
    reads exactly like one that does not exist.

    Approval: with ``approver`` (an async ``(ApprovalRequest) -> bool``) a human is asked
    inline; otherwise the call is deferred (``defer_approvals=True``, the agent needs
    ``DeferredToolRequests`` among its output types), or, with ``defer_approvals=False``,
    refused with a readable result: no approver, no run.

    The executor: without ``executor``, the toolset builds its own from ``policy``, ``audit``,
    ``timeout`` (seconds per tool run, 60 by default), ``telemetry`` (where spans and
    metrics go, see :mod:`.telemetry`) and ``hooks`` (guardrails, see :mod:`.guardrails`). With
    ``executor`` it shares that one (its policy, rate limits, pending approvals, audit,
    timeout, telemetry and hooks) with other surfaces and never changes it: ``audit``,
    ``timeout``, ``telemetry`` and ``hooks`` belong to it and are then a
    ``TypeError``, as is a ``policy`` other than ``executor.policy`` (``policy`` may be left
    out).

    Listing: the tools are listed once and kept across runs while the wrapped toolset would
    list the same ones (a ``FunctionToolset``, possibly combined, prefixed or renamed, whose
    tools were not added, removed or replaced); each caller's view is kept until the policy
    reloads. A toolset whose listing can change on its own (an MCP server, a tool with a
    ``prepare`` function) is listed again per ``relist``: every ``"step"``, once per ``"run"``
    (default), or ``"never"`` after the first listing (call :meth:`invalidate`).

    Durable runs: with ``call_results`` (a store of :mod:`toolcards.stores.call_results`) a
    call runs once per ``<run id>/<tool call id>``; a replayed call gets its recorded result
    (:mod:`.replay`).
    """

    def __init__(
        self,
        inner: AbstractToolset[Any],
        *,
        policy: Policy | None = None,
        identity: Identity | None = None,
        identity_resolver: IdentityResolver | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        audit: AuditLog | None = None,
        hide_denied: bool = True,
        executor: Executor | None = None,
        timeout: float | _Unset | None = _UNSET,
        relist: Literal["step", "run", "never"] = "run",
        approver: Approver | None = None,
        defer_approvals: bool = True,
        toolset_id: str | None = None,
        telemetry: Telemetry | None = None,
        call_results: CallResults | None = None,
        hooks: Sequence[ToolHook] = (),
    ) -> None:
        selected = SelectedToolset(inner, include=include, exclude=tuple(exclude or ()))
        self.wrapped = ApprovalMarkedToolset(DescribedToolset(SafeNamedToolset(selected)))
        self.inner = inner  # the toolset governed; calls go to it, under no listing layer
        self.executor = _executor(executor, policy, audit, timeout, telemetry, hooks)
        self.policy = self.executor.policy
        self.identity = identity
        self.identity_resolver = identity_resolver
        self.hide_denied = hide_denied
        self.relist = relist
        self.approver = approver
        self.defer_approvals = defer_approvals
        self._id = toolset_id
        self._cache = ListingCache()
        self.call_results = call_results

    @property
    def id(self) -> str | None:
        return self._id

    # -- composition (the wrapped stack may be replaced per run or step) -------------------

    def _with_wrapped(self, new: AbstractToolset[Any]) -> GovernedToolset:
        clone = copy.copy(self)
        clone.wrapped = new
        clone.inner = _governed_inner(new)
        return clone  # the listing cache is shared: it checks what it was listed from

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
        self._cache.listing = None

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

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return await self._view(ctx, self.resolve_identity(ctx))

    # -- calls -----------------------------------------------------------------------------

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        identity = self.resolve_identity(ctx)
        listing = self._cache.listing
        view = None
        if listing is not None and listing.step == self._step(ctx):  # listed this step
            view = listing.by_caller.get((identity, self.policy.version))
        if view is None:
            view = await self._view(ctx, identity)
            listing = self._cache.listing
        entry = view.get(name)
        if not isinstance(entry, GovernedTool):
            hidden = listing.tools.get(name) if listing is not None else None
            result = self.executor.unknown(
                name,
                tool_args,
                identity,
                surface=SURFACE,
                call_id=ctx.tool_call_id,
                visible=view,
                known_as=hidden.tool_id if hidden is not None else None,
            )
            return to_model_result(result)
        inner, source = self.inner, entry.source
        check = source.args_validator_func

        async def invoke(args: dict[str, Any]) -> Any:
            if check is not None:  # the wrapped tool's own post-validation hook
                checked = check(ctx, **args)
                if inspect.isawaitable(checked):
                    await checked
            return await inner.call_tool(source.tool_def.name, args, ctx, source)

        key = durable_call_key(ctx.run_id, ctx.tool_call_id)  # one call of one run
        results = self.call_results
        edited = None  # ToolApproved(override_args=...): the call as made, and the edit to run
        if ctx.tool_call_approved:
            tool_args, edited = split_override(ctx.messages, ctx.tool_call_id, tool_args)
        result = await self.executor.run(
            entry.governed_capability(),
            tool_args,
            identity,
            surface=SURFACE,
            call_id=ctx.tool_call_id,
            approved=ctx.tool_call_approved,
            approver=self.approver,
            invoke=invoke,
            edited=edited,
            call_key=key,
            durable=DurableCall(results, key) if results is not None and key else None,
        )
        if result.outcome is Outcome.NEEDS_APPROVAL and not self.defer_approvals:
            return f"{result.message}; no approver is configured, so it was not run"
        return to_model_result(result)


def _executor(
    executor: Executor | None,
    policy: Policy | None,
    audit: AuditLog | None,
    timeout: float | _Unset | None,
    telemetry: Telemetry | None,
    hooks: Sequence[ToolHook] = (),
) -> Executor:
    """The executor a toolset calls: ``executor`` as given (never changed), else a new one."""
    if executor is None:
        if policy is None:
            raise TypeError("GovernedToolset needs policy= or executor=")
        return Executor(
            CapabilityRegistry(),
            policy,
            audit=audit,
            timeout=60.0 if timeout is _UNSET else timeout,
            telemetry=telemetry,
            hooks=hooks,
        )
    given = {"audit": audit, "telemetry": telemetry, "hooks": hooks or None}
    conflicts = [name for name, value in given.items() if value is not None]
    if timeout is not _UNSET:
        conflicts.append("timeout")
    if policy is not None and policy is not executor.policy:
        conflicts.append("policy")
    if conflicts:
        raise TypeError(
            f"GovernedToolset(executor=...) takes {', '.join(sorted(conflicts))} from the "
            "executor; set them on the Executor (or leave executor out)"
        )
    return executor


def _governed_inner(stack: AbstractToolset[Any]) -> AbstractToolset[Any]:
    """The toolset under the listing layers of ``stack`` (calls go to it directly)."""
    toolset = stack
    while isinstance(toolset, ApprovalMarkedToolset | DescribedToolset | SafeNamedToolset):
        toolset = toolset.wrapped
    return toolset.wrapped if isinstance(toolset, SelectedToolset) else toolset


def to_model_result(result: ExecutionResult) -> Any:
    """Map an executor outcome to what a pydantic-ai model sees."""
    view = OUTCOMES[result.outcome].model
    if view == "value":
        return result.value
    if view == "retry":
        raise ModelRetry(result.message)
    if view == "approval":
        meta = result.approval.as_metadata() if result.approval is not None else None
        raise ApprovalRequired(metadata=meta)
    return redact_text(result.message)
