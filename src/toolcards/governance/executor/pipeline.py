"""The governed executor: one pipeline for every call from every surface.

A surface resolves the caller itself (never from tool arguments), calls :meth:`Executor.call`
(or :meth:`Executor.run` with its own invoke) and maps the :class:`ExecutionResult`::

    result = await executor.call(tool_id, raw_args, identity, surface="mcp",
                                 approver=ask_human_or_None, call_id=request_id)

One call, top to bottom (:meth:`Executor.run`, then :meth:`Executor._pipeline`):

1. the call enters the :class:`~.calls.CallBook`: from now on it ends in exactly one audit row
   (also when it is cancelled, interrupted or fails outside the tool);
2. the policy file is valid, and the arguments are an object;
3. the declared path arguments are made canonical: the policy decides on the names the tool
   will act on;
4. the arguments are validated against the tool's schema (for a caller who may see it);
5. the policy decides (a tool the caller may not see reads as unknown);
6. a durable run's replay is answered from its record (:mod:`.replay`);
7. for a call that needs approval, the rate limit and the budgets the team shares are read
   (nobody is asked to approve a call they refuse; a human's yes is settled, then counted
   or refused in step 8);
8. the approval of this exact call (:class:`~.gate.ApprovalGate`): a grant an approver
   remembered that covers it, or a human's decision, and an approver's edit; then the call
   takes its rate-limit token and is counted against the budgets (:class:`~.budget.Budgets`):
   only once admitted, so a call that ended ``needs_approval`` and is approved in a later
   run, under a new key, counts once;
9. a durable run's call claims its key (only now: a call waiting for a human holds no claim,
   so a process killed while it waits leaves nothing that reads as a call that ran);
10. the guardrails and the tool, within the call's deadline (:class:`~.runner.Runner`); a
    tool that asks for approval itself (pydantic-ai's ``ApprovalRequired``) on a call its gate
    did not approve is asked through the gate as in step 8, then run again, approved. The
    surface's yes (``approved=True``) alone never tells a tool it is approved: it settles the
    request recorded for these exact arguments, principal and session, or the call is asked
    anew.

What each outcome is on every surface (the pydantic-ai model's view, MCP's error flag, the
CLI's exit code) is one table: :data:`toolcards.governance.outcomes.OUTCOMES`. A
``needs_approval`` result with ``approvals.waiter`` set can wait for an approver and be called
again with the same ``call_id``. A call given no ``call_id`` gets one (``result.call_id``).

A tool the caller may not see (the policy denies it whatever the arguments) is reported
exactly like a tool that does not exist: ``unknown_tool``, with suggestions drawn only from
the tools the caller may see. ``result.message`` is safe to show a model: no stack trace, no
secrets, no other rules.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolcards.core.errors import RetriableError
from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.governance import guardrails, telemetry
from toolcards.governance.approvals import edits
from toolcards.governance.approvals.broker import ApprovalBroker, ApprovalRequest, Approver
from toolcards.governance.audit import shutdown
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.capability import (
    CapabilityRegistry,
    InvalidArguments,
    Invoke,
    ToolCapability,
    parse_arguments,
)
from toolcards.governance.executor.budget import Budgets
from toolcards.governance.executor.calls import (
    POLICY_ERROR_MESSAGE,
    Call,
    CallBook,
    ExecutionResult,
    fresh_call_id,
    unknown_tool_message,
)
from toolcards.governance.executor.gate import ApprovalGate
from toolcards.governance.executor.replay import DurableCall
from toolcards.governance.executor.runner import ApprovalAsked, GoverningCall, Runner
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Decision, Policy
from toolcards.governance.telemetry import Telemetry
from toolcards.stores.base import BudgetStore, RateLimits
from toolcards.stores.memory import MemoryBudgets, RateLimiter

__all__ = ["POLICY_ERROR_MESSAGE", "Call", "ExecutionResult", "Executor", "unknown_tool_message"]

log = logging.getLogger("toolcards.governance.executor")

_UNKNOWN = Decision("deny", "unknown tool")
_SPAN_ARGUMENTS = 8_192
"""The redacted arguments a span carries are cut to this many characters (an exporter
holds every attribute in memory and ships it whole)."""
_CUT = "...[truncated]"


class Executor:
    """Runs capabilities under a policy. Surface-agnostic: the pydantic-ai toolset, the MCP
    server and the CLI all call :meth:`call` (or :meth:`run` with their own invoke).

    Its collaborators: ``book`` ends every call (audit row, telemetry), ``gate`` asks for and
    settles approvals (over ``approvals``, the broker, and its grants), ``budgets`` counts what
    the team spends (in the ``budgets`` store: this process's memory by default, or the team's
    store shared by its processes), ``runner`` runs the guardrails (``hooks``) and the tool.
    ``timeout`` is each tool run's, in seconds (a capability's own timeout wins);
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
        budgets: BudgetStore | None = None,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.timeout = timeout
        self.rate_limiter: RateLimits = rate_limiter or RateLimiter()
        self.budgets = Budgets(budgets if budgets is not None else MemoryBudgets())
        self.approvals = approvals or ApprovalBroker()
        self.book = CallBook(telemetry or _default_telemetry(), None)
        self.gate = ApprovalGate(self.approvals, self.book)
        self.runner = Runner(self.book, guardrails.Hooks(hooks))
        self.audit = audit
        if self.approvals.edit_check is None:  # an edited grant is checked where it is made
            self.approvals.edit_check = self.checked_edit
        shutdown.register_calls(self.book)

    @property
    def audit(self) -> AuditLog | None:
        """The audit log; its broker writes approval decisions there too (unless it has one)."""
        return self.book.audit

    @audit.setter
    def audit(self, audit: AuditLog | None) -> None:
        self.book.audit = audit
        if audit is not None and self.approvals.audit is None:
            self.approvals.audit = audit

    @property
    def telemetry(self) -> Telemetry:
        return self.book.telemetry

    @property
    def hooks(self) -> guardrails.Hooks:
        """The guardrails every call passes after the policy (see :mod:`..guardrails`)."""
        return self.runner.hooks

    def interrupt_all(self, reason: str) -> None:
        """Audit every call still running as ``interrupted`` (its process ends under it)."""
        self.book.interrupt_all(reason)

    def checked_edit(self, request: ApprovalRequest, edited: dict[str, Any]) -> str:
        """An approver's edit of ``request`` checked as a fresh call's arguments would be (lent
        to the broker, which records it): the canonical JSON that will run. A tool this
        executor does not know is checked when it runs."""
        cap = self.registry.get(request.tool_id)
        if cap is None:
            return edits.edited_json(edited)
        who = request.identity or Identity(request.principal)
        return edits.check_edit(self.policy, cap, who, edited).json

    def visible_to(self, identity: Identity) -> list[str]:
        """The ids of the registry's tools ``identity`` may see."""
        policy = self.policy
        return [tool_id for tool_id in self.registry.ids() if policy.visible(identity, tool_id)]

    # -- entry points ------------------------------------------------------------------------

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
        session: str | None = None,
        run_id: str | None = None,
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
            session=session,
            run_id=run_id,
        )

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
        row_key: str | None = None,
    ) -> ExecutionResult:
        """The result for a tool that does not exist, or that ``identity`` may not see (the
        two read the same; suggestions come from ``visible`` only). ``known_as`` is the id of
        a hidden tool: the audit row then records the policy's denial. ``row_key``: the audit
        row's key (:attr:`.calls.Call.row_key`)."""
        decision = _UNKNOWN if known_as is None else self.policy.decide(identity, known_as, args)
        call = Call(
            tool_id,
            dict(args) if isinstance(args, Mapping) else {},
            identity,
            surface,
            call_id if call_id is not None else fresh_call_id(),
            time.perf_counter(),
            redactor=self.policy.redaction,
            decision=decision,
            instruments=self.telemetry.active(),
            row_key=row_key,
        )
        if call.instruments is None:
            return self._unknown(call, visible)
        call.span, token = telemetry.start_span(
            call.instruments, None, call.call_id, identity.id, surface
        )
        try:
            return self._unknown(call, visible)
        finally:
            telemetry.end_span(call.span, token)

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
        durable: DurableCall | None = None,
        session: str | None = None,
        run_id: str | None = None,
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
        fresh call's, they run once (:mod:`toolcards.governance.approvals.edits`).

        ``durable``: the call's key in a durable run's recorded results: a replay is answered
        from the record (:mod:`.replay`). ``session``: where the call comes from (a
        pydantic-ai conversation, an MCP session), which a grant may be limited to; ``run_id``
        the run it belongs to (per-run budgets; default: the session)."""
        call = Call(
            cap.id,
            args if type(args) is dict else {} if args is None else _object(args),
            identity if identity is not None else ANONYMOUS,
            surface,
            call_id if call_id is not None else fresh_call_id(),
            time.perf_counter(),
            cap,
            redactor=self.policy.redaction,
            approver=approver,
            approved=approved,
            invoke=invoke,
            validated=validated,
            hide_denied=hide_denied,
            writes_key=call_key,
            edit=edited if approved else None,
            timeout=cap.timeout if cap.timeout is not None else self.timeout,
            instruments=self.telemetry.active(),
            session=session,
            run_id=run_id or session,
        )
        malformed = args is not None and not isinstance(args, Mapping)
        if call.instruments is None:
            return await self._booked(call, malformed, durable)
        call.span, token = telemetry.start_span(
            call.instruments, cap.id, call.call_id, call.identity.id, surface
        )
        failure: BaseException | None = None
        try:
            return await self._booked(call, malformed, durable)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            shown = ""
            if failure is not None:  # as its row keeps it: never the exception's own text
                text = f"{type(failure).__name__}: {failure}"
                shown = call.redactor.error(text, call.args, call.sensitive)
            telemetry.end_span(call.span, token, failure, shown)

    async def _booked(
        self, call: Call, malformed: bool, durable: DurableCall | None
    ) -> ExecutionResult:
        """The pipeline, with the call in the book until its one row is written: also when it
        is cancelled, interrupted, or fails outside the tool."""
        self.book.enter(call)
        try:
            return await self._pipeline(call, malformed, durable)
        except BaseException as exc:
            self.book.ended_by(call, exc)  # nothing when the call already has its row
            raise

    # -- the pipeline ------------------------------------------------------------------------

    async def _pipeline(
        self, call: Call, malformed: bool, durable: DurableCall | None
    ) -> ExecutionResult:
        policy, book, cap = self.policy, self.book, call.cap
        assert cap is not None
        tool_id, who = call.tool_id, call.identity
        if policy.refusing():
            return book.finish(call, Outcome.POLICY_ERROR, POLICY_ERROR_MESSAGE)
        if malformed:
            msg = f"invalid arguments for {tool_id}: expected an object"
            return book.finish(call, Outcome.INVALID_ARGS, msg)
        each = self._canonical(call)
        if isinstance(each, ExecutionResult):
            return each
        if each:
            call.each = each
        if call.span is not None and policy.redaction.span_arguments:
            text = policy.redaction.redacted_json(call.args, call.sensitive)
            if len(text) > _SPAN_ARGUMENTS:
                text = text[: _SPAN_ARGUMENTS - len(_CUT)] + _CUT
            call.span.set_attribute("gen_ai.tool.call.arguments", text)
        if call.validated:
            call.parsed = call.args
        elif policy.visible(who, tool_id):  # its schema is no secret: a broken call is invalid,
            try:  # not denied (before argument conditions)
                call.parsed = parse_arguments(cap, call.args)
            except InvalidArguments as exc:
                return book.finish(call, Outcome.INVALID_ARGS, str(exc))
        call.decision, limits = policy.evaluate(who, tool_id, call.args, each)
        if call.decision.effect == "deny":
            return self._denied(call)
        if durable is None:
            return await self._admitted(call, limits)
        replayed = await durable.recorded(call, book)
        if replayed is not None:
            return replayed
        try:
            result = await self._admitted(call, limits, durable)
        except BaseException:  # cancelled or interrupted
            durable.stopped(call)
            raise
        durable.settle(call, result)
        return result

    async def _admitted(
        self, call: Call, limits: Any, durable: DurableCall | None = None
    ) -> ExecutionResult:
        """The steps of a call the policy lets through: approval, rate limit, budgets, the
        durable claim, the tool."""
        book, cap, decision = self.book, call.cap, call.decision
        assert cap is not None and decision is not None
        budgeted = bool(self.policy.budgets)
        gated = decision.effect == "approve" or cap.annotations.requires_approval
        if limits and gated and not call.approved:  # nobody is asked for a rate-limited call
            stopped = self._rate_limited(call, limits, self.rate_limiter.peek)
            if stopped is not None:
                return stopped
        if budgeted and gated and not call.approved:  # nobody is asked for a call over budget
            over = self.budgets.check_call(self.policy, call.identity, cap.id, call.run_id)
            if over is not None:
                return book.finish(call, Outcome.OVER_BUDGET, over)
        if gated:
            if call.edit is not None or not self.gate.granted(call):  # a grant, else a human
                stopped = await self.gate.admit(call)
                if stopped is not None:
                    return stopped
            elif call.span is not None:
                self.gate.traced(call)
        elif call.edit is not None:  # an edit nobody was asked for: no request it settles
            msg = f"denied: {cap.id} was never asked for approval, so no edit of it runs"
            return book.finish(call, Outcome.DENIED, msg)
        if limits:  # a token is taken once admitted: a call that only asked a human takes none
            stopped = self._rate_limited(call, limits, self.rate_limiter.acquire)
            if stopped is not None:
                return stopped
        if budgeted:  # counted once admitted (a call that only asked a human spends nothing):
            over = self.budgets.take_call(  # against every calls budget, all or none
                self.policy, call.identity, cap.id, call.run_id, call.key_of_writes()
            )
            if over is not None:  # for an approved call: spent by others while it waited
                return book.finish(call, Outcome.OVER_BUDGET, over)
        if durable is not None:  # claimed past the gate: a call waiting for a human holds none
            replayed = await durable.claim(call, book)
            if replayed is not None:
                return replayed
        if call.edit is not None:  # what the approver granted is what runs, checked afresh
            stopped = self.gate.apply_edit(call, self.policy)
            if stopped is not None:
                return stopped
        if call.parsed is None:  # hidden a moment ago, allowed now (the policy reloaded)
            try:
                call.parsed = parse_arguments(cap, call.args)
            except InvalidArguments as exc:
                return book.finish(call, Outcome.INVALID_ARGS, str(exc))
        invoke = call.invoke or cap.invoke
        if invoke is None:
            raise TypeError(f"capability {cap.id!r} has no invoke and none was given")
        governing = GoverningCall(self, call.identity, call.surface, call.call_id, cap.id, gated)
        try:
            return await self.runner.run(call, invoke, self.policy, governing)
        except ApprovalAsked:
            return await self._asked_by_tool(call, invoke, governing, durable)

    def _rate_limited(
        self, call: Call, limits: Any, check: Callable[[Any, str, str], float]
    ) -> ExecutionResult | None:
        """The call ended ``rate_limited`` when ``check`` (the limiter's peek or acquire) says
        it must wait, else None."""
        assert call.cap is not None
        wait = check(limits, call.identity.id, call.cap.id)
        if wait <= 0.0:
            return None
        msg = f"rate limited: {call.cap.id} may be called again in {wait:.1f} s"
        return self.book.finish(call, Outcome.RATE_LIMITED, msg, retry_after=wait)

    async def _asked_by_tool(
        self, call: Call, invoke: Invoke, governing: GoverningCall, durable: DurableCall | None
    ) -> ExecutionResult:
        """A tool that asked for approval itself is gated as a call the policy says
        ``approve``: its exact arguments asked for (or a recorded request settled) through the
        gate, then run again, approved. It did nothing yet: a call left waiting for a human
        holds no durable claim."""
        stopped = await self.gate.admit(call)
        if stopped is None and call.edit is not None:  # an approver's edit, checked afresh
            stopped = self.gate.apply_edit(call, self.policy)
        if stopped is None:
            approved = dataclasses.replace(governing, approved=True)
            return await self.runner.run(call, invoke, self.policy, approved)
        if durable is not None and durable.held and stopped.outcome is Outcome.NEEDS_APPROVAL:
            durable.release()
            durable.held = False
        return stopped

    def _canonical(self, call: Call) -> dict[str, Any] | ExecutionResult:
        """The call's declared path arguments made canonical (the names the tool acts on, see
        :class:`toolcards.core.pathargs.PathArgs`), and every path it names, for the policy;
        a path the tool would refuse ends the call here, before the policy and the tool."""
        declared = call.cap.annotations.paths if call.cap is not None else None
        if declared is None:
            return {}
        try:
            call.args, each = declared.resolve(call.args)
        except RetriableError as exc:
            why = call.redactor.text(str(exc))
            outcome, msg = Outcome.INVALID_ARGS, f"invalid arguments for {call.tool_id}: {why}"
        except Exception:
            log.exception("the paths of a %s call could not be resolved", call.tool_id)
            outcome, msg = Outcome.ERROR, f"error: {call.tool_id} failed (its paths)"
        else:
            return each
        if call.hide_denied and not self.policy.visible(call.identity, call.tool_id):
            call.decision = self.policy.decide(call.identity, call.tool_id, call.args)
            return self._unknown(call, self.visible_to(call.identity))
        return self.book.finish(call, outcome, msg)

    def _denied(self, call: Call) -> ExecutionResult:
        """A call the policy denies: unknown when the caller may not see the tool."""
        who, tool_id, decision = call.identity, call.tool_id, call.decision
        assert decision is not None
        if call.hide_denied and not self.policy.visible(who, tool_id):
            return self._unknown(call, self.visible_to(who))
        telemetry.event(call.span, "toolcards.denied", reason=decision.reason)
        msg = f"denied: {tool_id} is not permitted for {who.id}"
        return self.book.finish(call, Outcome.DENIED, msg)

    def _unknown(self, call: Call, visible: Iterable[str]) -> ExecutionResult:
        if self.policy.refusing():  # a tool missing and one hidden read the same here too
            return self.book.finish(call, Outcome.POLICY_ERROR, POLICY_ERROR_MESSAGE)
        message = unknown_tool_message(call.tool_id, visible)
        return self.book.finish(call, Outcome.UNKNOWN_TOOL, message)


def _object(args: object) -> dict[str, Any]:
    """The arguments as a dict (a mapping copied; anything else, a malformed call, empty)."""
    return dict(args) if isinstance(args, Mapping) else {}


def _default_telemetry() -> Telemetry:
    return telemetry.DEFAULT_TELEMETRY
