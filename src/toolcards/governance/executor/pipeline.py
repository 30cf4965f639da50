"""The governed executor: one pipeline for every call from every surface.

identity -> ACL decision -> rate limit -> approval (:mod:`.approval_step`) -> argument
validation -> run with a timeout, between the guardrail hooks (:mod:`.run_step`,
:mod:`.guardrails`) -> error mapping -> audit (and a telemetry span; :mod:`.calls` ends each
call). A surface resolves the caller itself (never from tool arguments), calls
:meth:`Executor.call` and maps the :class:`ExecutionResult` outcome::

    result = await executor.call(tool_id, raw_args, identity, surface="mcp",
                                 approver=ask_human_or_None, call_id=request_id)

What each outcome is on every surface (the pydantic-ai model's view, MCP's error flag, the
CLI's exit code) is one table: :data:`toolcards.governance.outcomes.OUTCOMES`. A
``needs_approval`` result with ``approvals.waiter`` set can wait for an approver and be called
again with the same ``call_id``.

Every call that started has exactly one audit row (see :mod:`.endings`): a cancelled one
``cancelled``, one its process ends (KeyboardInterrupt, SystemExit, SIGTERM) ``interrupted``,
one out of time ``timeout``; the exception goes on after the row. A call given no ``call_id``
gets one (``result.call_id``), so every row of it carries the same id.

A tool the caller may not see (the policy denies it whatever the arguments) is reported
exactly like a tool that does not exist: ``unknown_tool``, with suggestions drawn only from
the tools the caller may see. ``result.message`` is safe to show a model: no stack trace, no
secrets, no other rules.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from toolcards.core.errors import RetriableError
from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.governance import guardrails, telemetry
from toolcards.governance.approvals import edits
from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    Approver,
)
from toolcards.governance.arguments import InvalidArguments, parse_arguments
from toolcards.governance.audit import shutdown
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.capability import CapabilityRegistry, Invoke, ToolCapability
from toolcards.governance.executor.calls import (
    POLICY_ERROR_MESSAGE,
    Call,
    ExecutionResult,
    _sensitive,
    unknown_tool_message,
)
from toolcards.governance.executor.endings import (
    InFlight,
    fresh_call_id,
)
from toolcards.governance.executor.run_step import RunStep
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Decision, Each, Policy
from toolcards.governance.redaction.redactor import args_digest
from toolcards.governance.telemetry import Telemetry
from toolcards.stores.base import RateLimits
from toolcards.stores.memory import RateLimiter

__all__ = ["POLICY_ERROR_MESSAGE", "Call", "ExecutionResult", "Executor", "unknown_tool_message"]

log = logging.getLogger(__name__)

_UNKNOWN = Decision("deny", "unknown tool")


class Executor(RunStep):
    """Runs capabilities under a policy. Surface-agnostic: the pydantic-ai toolset, the MCP
    server and the CLI all call :meth:`call` (or :meth:`run` with their own invoke).

    ``telemetry`` says where spans and metrics go (the global OpenTelemetry providers by
    default; nothing is recorded until an SDK is configured).
    """

    def __init__(
        self,
        registry: CapabilityRegistry,
        policy: Policy,
        *,
        audit: AuditLog | None = None,
        approvals: ApprovalBroker | None = None,
        rate_limiter: RateLimits | None = None,
        timeout: float | None = 60.0,
        telemetry: Telemetry | None = None,
        hooks: Iterable[guardrails.ToolHook] = (),
    ) -> None:
        self.registry = registry
        self.hooks = guardrails.Hooks(hooks)
        """The guardrails every call passes after the policy (see :mod:`.guardrails`)."""
        self.policy = policy
        self.approvals = approvals or ApprovalBroker()
        self.rate_limiter: RateLimits = rate_limiter or RateLimiter()
        self.timeout = timeout
        self.telemetry = telemetry or _default_telemetry()
        self._audit: AuditLog | None = None
        self.audit = audit
        if self.approvals.edit_check is None:  # an edited grant is checked where it is made
            self.approvals.edit_check = functools.partial(edits.check_granted, self)
        self._running = InFlight()
        shutdown.register_calls(self)

    @property
    def audit(self) -> AuditLog | None:
        """The audit log; its broker writes approval decisions there too (unless it has one)."""
        return self._audit

    @audit.setter
    def audit(self, audit: AuditLog | None) -> None:
        self._audit = audit
        if audit is not None and self.approvals.audit is None:
            self.approvals.audit = audit

    async def call(
        self,
        tool_id: str,
        args: Mapping[str, Any] | None,
        identity: Identity | None = None,
        *,
        surface: str = "python",
        approver: Approver | None = None,
        call_id: str | None = None,
        approved: bool = False,
    ) -> ExecutionResult:
        """Run ``tool_id`` with raw ``args`` for ``identity`` (None = anonymous).

        Approval-required calls run only when ``approver`` returns True, or when ``call_id``
        names a pending approval that was granted (``approvals.grant``) or that the surface's
        human approved now (``approved=True``) for the same tool, arguments and principal.
        Otherwise the result is NEEDS_APPROVAL and nothing runs.
        """
        who = identity if identity is not None else ANONYMOUS
        cap = self.registry.get(tool_id)
        if cap is None:
            return self.unknown(
                tool_id, args, who, surface=surface, call_id=call_id, visible=self.visible_to(who)
            )
        return await self.run(
            cap,
            args,
            who,
            surface=surface,
            approver=approver,
            call_id=call_id,
            approved=approved,
            hide_denied=True,
        )

    def visible_to(self, identity: Identity) -> list[str]:
        """The ids of the registry's tools ``identity`` may see."""
        policy = self.policy
        return [tool_id for tool_id in self.registry.ids() if policy.visible(identity, tool_id)]

    def unknown(
        self,
        tool_id: str,
        args: Mapping[str, Any] | None,
        identity: Identity,
        *,
        surface: str,
        call_id: str | None,
        visible: Iterable[str],
        known_as: str | None = None,
    ) -> ExecutionResult:
        """The result for a tool that does not exist, or that ``identity`` may not see (the
        two read the same; suggestions come from ``visible`` only). ``known_as`` is the id of
        a hidden tool: the audit row then records the policy's denial."""
        decision = _UNKNOWN if known_as is None else self.policy.decide(identity, known_as, args)
        call = Call(
            tool_id,
            dict(args) if isinstance(args, Mapping) else {},
            identity,
            surface,
            call_id if call_id is not None else fresh_call_id(),
            time.perf_counter(),
            instruments=self.telemetry.active(),
        )
        if call.instruments is None:
            return self._unknown(call, decision, visible)
        span, token = telemetry.start_span(call.instruments, None, call_id, identity.id, surface)
        try:
            return self._unknown(call._replace(span=span), decision, visible)
        finally:
            telemetry.end_span(span, token)

    def _unknown(self, call: Call, decision: Decision, visible: Iterable[str]) -> ExecutionResult:
        if self.policy.refusing():  # a tool missing and one hidden read the same here too
            return self._finish(call, Outcome.POLICY_ERROR, decision, POLICY_ERROR_MESSAGE)
        message = unknown_tool_message(call.tool_id, visible)
        return self._finish(call, Outcome.UNKNOWN_TOOL, decision, message)

    async def run(
        self,
        cap: ToolCapability,
        args: Mapping[str, Any] | None,
        identity: Identity | None = None,
        *,
        surface: str = "python",
        approver: Approver | None = None,
        call_id: str | None = None,
        approved: bool = False,
        invoke: Invoke | None = None,
        validated: bool = False,
        hide_denied: bool = False,
        call_key: str | None = None,
        edited: Mapping[str, Any] | None = None,
    ) -> ExecutionResult:
        """The pipeline for one capability. ``invoke`` replaces ``cap.invoke`` (a surface that
        calls the tool itself); ``validated=True`` skips validation (already done);
        ``hide_denied=True`` reports a tool the caller may not see as unknown.

        ``call_key`` (default: ``call_id``) is the idempotency key of the tool's writes: a
        tool actor's mutation commits it with its rows, and the same call run again under
        the same key (a retry after "outcome unknown") is answered from that record instead
        of writing twice (:mod:`toolcards.stores.applied_calls`).

        ``edited`` (with ``approved=True``) are the arguments the surface's human approved in
        place of ``args`` (pydantic-ai's ``ToolApproved(override_args=...)``): checked as a
        fresh call's, they run once (:mod:`.edits`)."""
        malformed = False
        if args is None:
            args = {}
        elif not isinstance(args, dict):
            malformed = not isinstance(args, Mapping)
            args = {} if malformed else dict(args)
        if call_id is None:  # every row of the call carries one id
            call_id = fresh_call_id()
        call = Call(
            cap.id,
            args,
            identity if identity is not None else ANONYMOUS,
            surface,
            call_id,
            time.perf_counter(),
            cap,
            instruments=self.telemetry.active(),
            key=self._running.new_key(),
            writes_key=call_key,
            edit=edited if approved else None,
        )
        options = (approver, approved, invoke, validated, hide_denied)
        if call.instruments is None:
            return await self._guarded(call, malformed, options)
        span, token = telemetry.start_span(
            call.instruments, cap.id, call_id, call.identity.id, surface
        )
        failure: BaseException | None = None
        try:
            return await self._guarded(call._replace(span=span), malformed, options)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            telemetry.end_span(span, token, failure)

    async def _guarded(
        self, call: Call, malformed: bool, options: tuple[Any, ...]
    ) -> ExecutionResult:
        """The pipeline, with the call in the in-flight book until its one row is written:
        also when it is cancelled, interrupted, or fails outside the tool."""
        self._running.open(call)
        try:
            return await self._pipeline(call, malformed, *options)
        except BaseException as exc:
            self._ended_by(call, None, exc)  # nothing when the call already has its row
            raise

    async def _pipeline(
        self,
        call: Call,
        malformed: bool,
        approver: Approver | None,
        approved: bool,
        invoke: Invoke | None,
        validated: bool,
        hide_denied: bool,
    ) -> ExecutionResult:
        tool_id = call.tool_id
        if self.policy.refusing():
            return self._finish(call, Outcome.POLICY_ERROR, None, POLICY_ERROR_MESSAGE)
        if malformed:
            msg = f"invalid arguments for {tool_id}: expected an object"
            return self._finish(call, Outcome.INVALID_ARGS, None, msg)
        named = self._named(call, hide_denied)
        if isinstance(named, ExecutionResult):
            return named
        call, each = named
        args = call.args
        if call.span is not None and self.policy.redaction.span_arguments:
            text = self.policy.redaction.digest_and_redacted(args, _sensitive(call))[1]
            call.span.set_attribute("gen_ai.tool.call.arguments", text)
        who = call.identity
        cap = call.cap
        assert cap is not None
        parsed = args if validated else None
        if parsed is None and self.policy.visible(who, tool_id):  # its schema is no secret
            try:  # before argument conditions: a broken call is invalid, not denied
                parsed = parse_arguments(cap, args)
            except InvalidArguments as exc:
                return self._finish(call, Outcome.INVALID_ARGS, None, str(exc))
        decision, limits = self.policy.evaluate(who, tool_id, args, each)
        if decision.effect == "deny":
            if hide_denied and not self.policy.visible(who, tool_id):
                return self._unknown(call, decision, self.visible_to(who))
            telemetry.event(call.span, "toolcards.denied", reason=decision.reason)
            msg = f"denied: {tool_id} is not permitted for {who.id}"
            return self._finish(call, Outcome.DENIED, decision, msg)
        wait = self.rate_limiter.acquire(limits, who.id, tool_id) if limits else 0.0
        if wait > 0.0:
            msg = f"rate limited: {tool_id} may be called again in {wait:.1f} s"
            return self._finish(call, Outcome.RATE_LIMITED, decision, msg, retry_after=wait)
        if decision.effect == "approve" or cap.annotations.requires_approval:
            gate = await self._approval(call, decision, approver, approved)
            if isinstance(gate, ExecutionResult):
                return gate
            call = gate
        if call.edit is not None:  # what the approver granted is what runs, checked afresh
            edit = edits.apply(self.policy, call.edit, call.identity, cap)
            call = call._replace(edit=None, called_digest=args_digest(call.args))
            if isinstance(edit, edits.Refusal):
                return self._finish(
                    call._replace(args=edit.args), edit.outcome, decision, edit.message
                )
            call, decision, parsed = call._replace(args=edit.args), edit.decision, edit.parsed
        if parsed is None:  # hidden a moment ago, allowed now (the policy reloaded)
            try:
                parsed = parse_arguments(cap, args)
            except InvalidArguments as exc:
                return self._finish(call, Outcome.INVALID_ARGS, decision, str(exc))
        run = invoke or cap.invoke
        if run is None:
            raise TypeError(f"capability {tool_id!r} has no invoke and none was given")
        # the audit keeps the arguments as received, so every row of one call has one digest
        if self.hooks:
            return await self._hooked(call, decision, parsed, run)
        return await self._execute(call, decision, parsed, run)

    def _named(self, call: Call, hide_denied: bool) -> tuple[Call, Each] | ExecutionResult:
        """The call with its declared path arguments canonical (the names the tool acts on,
        see :class:`toolcards.core.pathargs.PathArgs`) and every path it names, for the
        policy; a path the tool would refuse ends the call here, before the policy and the
        tool."""
        declared = call.cap.annotations.paths if call.cap is not None else None
        if declared is None:
            return call, {}
        try:
            args, each = declared.resolve(call.args)
        except RetriableError as exc:
            why = self.policy.redaction.text(str(exc))
            outcome, msg = Outcome.INVALID_ARGS, f"invalid arguments for {call.tool_id}: {why}"
        except Exception:
            log.exception("the paths of a %s call could not be resolved", call.tool_id)
            outcome, msg = Outcome.ERROR, f"error: {call.tool_id} failed (its paths)"
        else:
            return call._replace(args=args), each
        who = call.identity
        if hide_denied and not self.policy.visible(who, call.tool_id):
            decision = self.policy.decide(who, call.tool_id, call.args)
            return self._unknown(call, decision, self.visible_to(who))
        return self._finish(call, outcome, None, msg)


def _default_telemetry() -> Telemetry:
    return telemetry.DEFAULT_TELEMETRY
