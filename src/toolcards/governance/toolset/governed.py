"""GovernedToolset: any pydantic-ai toolset, with every call through the governed executor.

It is the execution layer on top of a stack of listing layers (:mod:`.layers`)::

    GovernedToolset(                       identity, per-caller listing, executor, outcomes
      ApprovalMarkedToolset(               declared deferral -> governed call
        DescribedToolset(                  annotations, destructive warning, sequential
          SafeNamedToolset(                provider-safe names
            SelectedToolset(inner, include, exclude)))))

What it lists, and each caller's view of that, is kept by its :class:`ToolListing` (shared
with the toolset's per-run copies).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
from pydantic_core import SchemaValidator, core_schema, to_json

from toolcards.core import nesting
from toolcards.core.errors import ToolNotConfigured
from toolcards.core.identity import ANONYMOUS, Identity, durable_call_key
from toolcards.core.names import provider_safe_name
from toolcards.core.spec import ToolAnnotations
from toolcards.governance.approvals.broker import Approver
from toolcards.governance.approvals.edits import split_override
from toolcards.governance.approvals.nested import CallerRun, nested_approver
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.capability import CapabilityRegistry, ToolCapability
from toolcards.governance.executor.pipeline import ExecutionResult, Executor
from toolcards.governance.executor.replay import DurableCall
from toolcards.governance.executor.runner import governing_call
from toolcards.governance.guardrails import ToolHook
from toolcards.governance.outcomes import OUTCOMES, Outcome
from toolcards.governance.policy.policy import Policy
from toolcards.governance.redaction.redactor import redact_text
from toolcards.governance.telemetry import Telemetry
from toolcards.governance.toolset.delegated import DelegatedCalls
from toolcards.governance.toolset.hidden import HiddenCalls
from toolcards.governance.toolset.layers import (
    APPROVAL_NOTE,
    DESTRUCTIVE_WARNING,
    ApprovalMarkedToolset,
    DescribedToolset,
    Fingerprint,
    SafeNamedToolset,
    SelectedToolset,
    built,
    listed_tools,
    listing_fingerprint,
)
from toolcards.stores.call_results import CallResults

__all__ = [
    "APPROVAL_NOTE",
    "DESTRUCTIVE_WARNING",
    "GovernedTool",
    "GovernedToolset",
    "ToolListing",
    "provider_safe_name",
    "to_model_result",
]

IdentityResolver = Callable[[RunContext[Any]], Identity | None]
Relist = Literal["step", "run", "never"]
SURFACE = "pydantic-ai"

# The model's arguments reach call_tool unparsed, so that the ACL, rate limit and approval
# see the same raw arguments as on every other surface; the executor validates afterwards.
_RAW_ARGS = SchemaValidator(core_schema.dict_schema(keys_schema=core_schema.str_schema()))
_MAX_CALLERS = 1024  # per-caller listings kept before the cache starts over


class GovernedToolset(WrapperToolset[Any]):
    """Wraps any pydantic-ai toolset so that every call goes through the governed executor.

    The model sees only the tools the principal may call (unless ``hide_denied=False``, which
    still never lists a denied ``defer_loading`` tool: a tool search would offer it),
    under provider-safe names (the original id is in ``metadata["tool_id"]``); destructive tools
    are sequential and carry a warning line. Denials, rate limits and tool failures come back as
    readable tool results, fixable errors (and unknown tool names) as retries, and approvals
    through pydantic-ai's deferred flow (``DeferredToolRequests`` -> ``DeferredToolResults``),
    bound to the call id, tool, arguments and principal. A tool hidden from the principal
    reads exactly like one that does not exist. A tool the host runs (pydantic-ai's
    ``kind="external"``) is governed like any other; once admitted, its call is handed to the
    host (``DeferredToolRequests.calls``) as the model made it, so an approver's edit of it
    is refused.

    The executor: ``policy`` (with ``audit``) builds the toolset's own (:meth:`with_policy`
    also sets its timeout, telemetry and guardrails); ``executor`` shares one with other
    surfaces (its policy, rate limits, pending approvals, audit, timeout, telemetry and
    guardrails). One of the two.

    The caller: ``identity`` is an :class:`Identity`, or a function of the run context that
    returns one (None: anonymous), asked for every listing and call.

    Approval: ``approver`` is an async ``(ApprovalRequest) -> bool`` asked inline; or
    ``"defer"`` (default): the call is deferred through pydantic-ai (the agent needs
    ``DeferredToolRequests`` among its output types); or ``"refuse"``: refused with a readable
    result (no approver, no run).

    Listing: the tools are listed once and kept across runs while the wrapped toolset would
    list the same ones (see :class:`ToolListing`; its ``relist`` is the policy for toolsets
    whose listing changes on their own).

    Durable runs: with ``call_results`` (a store of :mod:`toolcards.stores.call_results`) a
    call runs once per run id, run step and tool call id; a replayed call gets its recorded result
    (:mod:`toolcards.governance.executor.replay`).
    """

    def __init__(
        self,
        inner: AbstractToolset[Any],
        *,
        policy: Policy | None = None,
        audit: AuditLog | None = None,
        executor: Executor | None = None,
        identity: Identity | IdentityResolver | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        hide_denied: bool = True,
        approver: Approver | Literal["defer", "refuse"] = "defer",
        call_results: CallResults | None = None,
    ) -> None:
        if (policy is None) == (executor is None) or (executor is not None and audit is not None):
            raise TypeError(
                "GovernedToolset takes policy= (and audit=) for its own executor, or a shared "
                "executor= (whose audit applies), not both"
            )
        selected = SelectedToolset(inner, include=include, exclude=tuple(exclude or ()))
        self.wrapped = ApprovalMarkedToolset(DescribedToolset(SafeNamedToolset(selected)))
        self.inner = inner  # the toolset governed; calls go to it, under no listing layer
        if executor is None:
            assert policy is not None
            executor = Executor(CapabilityRegistry(), policy, audit=audit)
        self.executor = executor
        self.policy = executor.policy
        self.identity = identity
        self.approver = approver
        self.call_results = call_results
        self.listing = ToolListing(self.policy, hide_denied)
        self.delegated = DelegatedCalls()
        """Delegating calls parked while their run answers approvals asked on their behalf."""
        self.hidden_calls = HiddenCalls()
        """Which calls to hidden tools have their rows (:meth:`_record_hidden_calls`)."""

    @classmethod
    def with_policy(
        cls,
        inner: AbstractToolset[Any],
        policy: Policy,
        *,
        audit: AuditLog | None = None,
        timeout: float | None = 60.0,
        telemetry: Telemetry | None = None,
        hooks: Sequence[ToolHook] = (),
        **options: Any,
    ) -> GovernedToolset:
        """A governed toolset with its own :class:`Executor`: ``policy``, ``audit``,
        ``timeout`` (seconds per tool run; a tool's own wins), ``telemetry`` (where spans and
        metrics go) and ``hooks`` (guardrails); ``options`` are the toolset's own."""
        executor = Executor(
            CapabilityRegistry(), policy, audit=audit, timeout=timeout, telemetry=telemetry,
            hooks=hooks,
        )  # fmt: skip
        return cls(inner, executor=executor, **options)

    @property
    def id(self) -> str | None:
        return self.inner.id

    # -- composition (the wrapped stack may be replaced per run or step) -------------------

    def _with_wrapped(self, new: AbstractToolset[Any]) -> GovernedToolset:
        clone = copy.copy(self)
        clone.wrapped = new
        clone.inner = _governed_inner(new)
        return clone  # the listing is shared: it checks what it was listed from

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        new = await self.wrapped.for_run(ctx)
        return self if new is self.wrapped else self._with_wrapped(new)

    async def for_run_step(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        conversation = ctx.conversation_id or ctx.run_id or ""
        self.delegated.settle(ctx.messages, conversation)  # a run that denied a parked call
        self._settle_denied(ctx, conversation)
        new = await self.wrapped.for_run_step(ctx)
        toolset = self if new is self.wrapped else self._with_wrapped(new)
        await self._record_hidden_calls(ctx, toolset)
        return toolset

    async def record_run_end(self, ctx: RunContext[Any]) -> None:
        """Write the rows of the hidden calls in ``ctx``'s newest response, which no next step
        will write: its run ended there (a final output beside them, or a response pydantic-ai
        failed the run on). pydantic-ai hands a toolset no context at a run's end, so this is
        called by ``GovernedCards`` with the context of the run's last model request; a bare
        toolset writes them at the next step only (a run resumed from the history)."""
        await self._record_hidden_calls(ctx, self)

    async def _record_hidden_calls(self, ctx: RunContext[Any], step: GovernedToolset) -> None:
        """Write the row of each call, in the newest model response, to a governed tool hidden
        from the caller: pydantic-ai answers a name it was not offered itself ("Unknown tool
        name") and never calls the toolset, so without this only the MCP and CLI surfaces would
        record the call. A step's toolset sees the response of the step before (the last
        response of a run: :meth:`record_run_end`); a call is written once (a step may be
        prepared again, a paused response resumed again, by another toolset or process: see
        :class:`HiddenCalls`).

        Only names this toolset lists and the policy hides are written, as ``call_tool`` writes
        them: a name another toolset of the agent answers, or one no toolset offered the step
        that made the call (``ctx.tool_manager``), is not this toolset's to record, and a name
        no toolset knows would be written once by each governed toolset of the agent; the calls
        of a response past a cap share one row (:class:`~.hidden.Unwritten`). ``step`` is this
        toolset as prepared for the step (its listing is the one the step is offered)."""
        response, calls = self.hidden_calls.unanswered(ctx)
        if response is None or not calls:
            return
        identity = self.resolve_identity(ctx)
        view = await self.listing.view(step, ctx, identity)
        listed = self.listing.cached
        tools = listed.tools if listed is not None else {}
        hidden = [(i, p) for i, p in calls if p.tool_name in tools and p.tool_name not in view]
        audit = self.executor.audit
        unwritten = await self.hidden_calls.unwritten(response, hidden, identity, audit)
        for part, key in unwritten.calls:
            args = part.args_as_dict()
            self._unknown(part.tool_name, args, identity, part.tool_call_id, view, listed, key)
        if unwritten.more and audit is not None:
            audit.record(unwritten.more_record(identity, SURFACE, self.policy.redaction))

    def _unknown(
        self,
        name: str,
        args: dict[str, Any],
        identity: Identity,
        call_id: str | None,
        view: dict[str, ToolsetTool[Any]],
        listed: Listing | None,
        row_key: str | None = None,
    ) -> ExecutionResult:
        """The unknown-tool answer to a call of ``name`` that ``view`` does not offer, its row
        written (under ``row_key``, if given); a tool ``listed`` has (the policy hides it)
        records the policy's denial."""
        hidden = listed.tools.get(name) if listed is not None else None
        return self.executor.unknown(
            name,
            args,
            identity,
            surface=SURFACE,
            call_id=call_id,
            visible=view,
            known_as=hidden.tool_id if hidden is not None else None,
            row_key=row_key,
        )

    def _settle_denied(self, ctx: RunContext[Any], conversation: str) -> None:
        """Deny the pending requests of the calls the run's host denied (``ToolDenied``: a
        ``denied`` tool return in the newest request). pydantic-ai writes that answer itself and
        never calls the toolset, so the request would wait in the inbox, where an approver
        could still grant it for a later call under the same id and arguments."""
        denied = {
            part.tool_call_id: str(part.content)
            for message in ctx.messages[-1:]
            for part in getattr(message, "parts", ())
            if getattr(part, "outcome", None) == "denied"
        }
        if not denied:
            return
        run = self.resolve_identity(ctx)
        broker = self.executor.approvals
        for request in broker.pending():
            if (
                request.call_id in denied
                and request.principal == run.id
                and request.session in ("", conversation)
            ):
                broker.deny_for_own_run(request, run=run, why=denied[request.call_id])

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[Any]], AbstractToolset[Any]]
    ) -> AbstractToolset[Any]:
        return self._with_wrapped(self.wrapped.visit_and_replace(visitor))

    def invalidate(self) -> None:
        """Forget cached listings; the next step lists the wrapped toolset again."""
        self.listing.cached = None

    # -- identity and listing --------------------------------------------------------------

    def resolve_identity(self, ctx: RunContext[Any]) -> Identity:
        """The caller: ``identity``, or what it returns for ``ctx``; else anonymous."""
        found = self.identity
        if found is not None and not isinstance(found, Identity):
            found = found(ctx)
            if found is not None and not isinstance(found, Identity):
                raise TypeError("an identity function must return an Identity or None")
        return found if found is not None else ANONYMOUS

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return await self.listing.view(self, ctx, self.resolve_identity(ctx))

    # -- calls -----------------------------------------------------------------------------

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        identity = self.resolve_identity(ctx)
        listing = self.listing
        listed = listing.cached
        view = None
        if listed is not None and listed.step == (ctx.run_id, ctx.run_step, self.wrapped):
            view = listed.by_caller.get((identity, self.policy.version))  # listed this step
        if view is None:
            view = await listing.view(self, ctx, identity)
            listed = listing.cached
        entry = view.get(name)
        if not isinstance(entry, GovernedTool):
            result = self._unknown(name, tool_args, identity, ctx.tool_call_id, view, listed)
            return to_model_result(result)
        inner, source = self.inner, entry.source
        check = source.args_validator_func
        edited = None  # ToolApproved(override_args=...): the call as made, and the edit to run
        if ctx.tool_call_approved:
            tool_args, edited = split_override(ctx.messages, ctx.tool_call_id, tool_args)

        async def invoke(args: dict[str, Any]) -> Any:
            run = _as_gated(ctx)
            if check is not None:  # the wrapped tool's own post-validation hook
                checked = check(run, **args)
                if inspect.isawaitable(checked):
                    await checked
            if source.tool_def.kind == "external":  # pydantic-ai hands the model's call on
                if args != tool_args:
                    raise ToolNotConfigured(
                        f"{entry.tool_id} runs on the host as the model called it, and an "
                        "approver's edit or a guardrail changed its arguments: not handed on"
                    )
                raise CallDeferred()  # admitted: the host runs it
            return await inner.call_tool(source.tool_def.name, args, run, source)

        cap = entry.capability
        if cap is None:  # built on the first call
            cap = entry.capability = entry.governed_capability()
        key = _call_key(ctx)  # one call of one run
        results = self.call_results
        approver = self.approver
        inline = None if isinstance(approver, str) else approver
        caller = nesting.calling_run.get()  # made on behalf of another run: it may answer
        if isinstance(caller, CallerRun) and caller.takes(identity.id):
            inline = nested_approver(caller, self.executor.approvals, inline)

        def execute() -> Awaitable[ExecutionResult]:
            return self.executor.run(
                cap,
                tool_args,
                identity,
                surface=SURFACE,
                call_id=ctx.tool_call_id,
                approved=ctx.tool_call_approved,
                approver=inline,
                invoke=invoke,
                edited=edited,
                call_key=key,
                durable=DurableCall(results, key) if results is not None and key else None,
                session=ctx.conversation_id or ctx.run_id,
                run_id=ctx.run_id,
            )

        conversation = ctx.conversation_id or ctx.run_id or ""
        if edited is not None and cap.annotations.delegates:
            why = "an edit cannot apply to work already running; it was stopped"
            if self.delegated.stop(ctx.tool_call_id, identity, conversation, why):
                return f"denied: {cap.id}: {why}"
        if cap.annotations.delegates and approver == "defer":  # their approvals reach this run
            result = await self.delegated.run(
                ctx.tool_call_id, ctx.tool_call_approved, identity, cap.id, execute, conversation
            )
        else:
            result = await execute()
        if result.outcome is Outcome.NEEDS_APPROVAL and approver == "refuse":
            return f"{result.message}; no approver is configured, so it was not run"
        return to_model_result(result)


@dataclass(kw_only=True)
class GovernedTool(ToolsetTool[Any]):
    """A tool as the model sees it through governance: ``source`` is the tool the governed
    toolset itself listed (under the listing layers, which take no part in calls), ``tool_id``
    its id; the capability is built on the first call."""

    source: ToolsetTool[Any]
    tool_id: str
    capability: ToolCapability | None = field(default=None, repr=False)

    def governed_capability(self) -> ToolCapability:
        tdef = self.tool_def
        return ToolCapability(
            id=self.tool_id,
            description=tdef.description or "",
            json_schema=dict(tdef.parameters_json_schema),
            annotations=ToolAnnotations.from_metadata(tdef.metadata),
            validator=self.source.args_validator,
            timeout=tdef.timeout,
            # an async function tool never waits on a worker thread a timeout must abandon
            abandon_threads=getattr(self.source, "is_async", None) is not True,
        )


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


class ToolListing:
    """What a governed toolset lists, shared with its per-run copies: the stack's listing
    (``cached``), kept while the wrapped toolset would list the same tools (see
    :func:`~.layers.listing_fingerprint`), and each caller's view of it (the tools the policy
    lets it see; all of them with ``hide_denied=False``), kept until the policy reloads.

    A toolset whose listing can change on its own (an MCP server, a tool with a ``prepare``
    function) is listed again per ``relist``: every ``"step"``, once per ``"run"``
    (default), or ``"never"`` after the first listing (call ``invalidate()``)."""

    def __init__(self, policy: Policy, hide_denied: bool, relist: Relist = "run") -> None:
        self.policy = policy
        self.hide_denied = hide_denied
        self.relist = relist
        self.cached: Listing | None = None

    async def view(
        self, toolset: GovernedToolset, ctx: RunContext[Any], identity: Identity
    ) -> dict[str, ToolsetTool[Any]]:
        """What ``identity`` sees of ``toolset``: the listing filtered by the policy."""
        listing = await self._listing(toolset, ctx)
        listing.step = (ctx.run_id, ctx.run_step, toolset.wrapped)
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

    def _key(self, ctx: RunContext[Any]) -> object:
        if self.relist == "run":
            return ctx.run_id
        return True if self.relist == "never" else (ctx.run_id, ctx.run_step)

    def _current(
        self, wrapped: AbstractToolset[Any], ctx: RunContext[Any]
    ) -> tuple[Listing | None, Fingerprint | None]:
        """The cached listing when it still holds for ``ctx``, and the stack's fingerprint."""
        listing = self.cached
        if self.relist == "never":
            return listing, None
        fingerprint = listing_fingerprint(wrapped, ctx)
        if listing is None:
            return None, fingerprint
        if fingerprint is not None:
            same = listing.fingerprint is not None and listing.fingerprint == fingerprint
        else:
            same = listing.wrapped is wrapped and listing.key == self._key(ctx)
        return (listing if same else None), fingerprint

    async def _listing(self, toolset: GovernedToolset, ctx: RunContext[Any]) -> Listing:
        wrapped = toolset.wrapped
        listing, fingerprint = self._current(wrapped, ctx)
        if listing is not None:
            return listing
        stack = await listed_tools(wrapped, ctx)
        tools = {
            name: built(
                GovernedTool,
                toolset=toolset,
                tool_def=tdef,
                max_retries=retries,
                args_validator=_RAW_ARGS,
                args_validator_func=None,
                source=source,
                tool_id=(tdef.metadata or {}).get("tool_id", name),
                capability=None,
            )
            for name, (tdef, retries, source) in stack.items()
        }
        listing = Listing(
            fingerprint,
            None if fingerprint is not None else self._key(ctx),
            None if fingerprint is not None else wrapped,
            tools,
        )
        self.cached = listing
        return listing


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
        if result.edit is None:
            return result.value
        value = result.value  # the model is told that other arguments than its own ran
        text = value if isinstance(value, str) else to_json(value, fallback=str).decode()
        return result.told(text)
    if view == "retry":
        raise ModelRetry(result.message)
    if view == "approval":
        meta = result.approval.as_metadata() if result.approval is not None else None
        raise ApprovalRequired(metadata=meta)
    return result.told(redact_text(result.message))


def _as_gated(ctx: RunContext[Any]) -> RunContext[Any]:
    """``ctx`` as the tool sees it: approved exactly when the executor's gate approved this
    call (the host's yes settled the request recorded for these arguments, or an inline
    approver said yes), never on the host's word alone."""
    governing = governing_call.get()
    approved = governing is not None and governing.approved
    if ctx.tool_call_approved is approved:
        return ctx
    return dataclasses.replace(ctx, tool_call_approved=approved)


def _call_key(ctx: RunContext[Any]) -> str | None:
    """The key of this call of the run: its run, run step and tool call id. The same call made
    again (a durable replay repeats its step) has the same key, so it is counted, budgeted and
    written once; a model that reuses an id in a later step makes a new call with a new key.
    Nothing in the history goes into it, so trimming the history cannot change it (a key taken
    from the answers it held repeated once they left a window: uncounted past a budget)."""
    return durable_call_key(ctx.run_id, ctx.run_step, ctx.tool_call_id)
