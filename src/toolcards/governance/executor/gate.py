"""The executor's approval step: a call the policy says ``approve`` (or a tool that requires
approval) runs only once a human granted this exact request: its call id, tool, argument
digest and principal (see :mod:`toolcards.governance.approvals`), asked in the call's own
session (a pydantic-ai conversation, an MCP session, or none), or when a grant an approver
remembered covers it (its principal, tool, canonical arguments, session and time: see
:mod:`toolcards.governance.approvals.grants`; the call's row names the grant). What an
approver granted in place of the arguments (an edit) is checked as a fresh call's arguments
would be, and is what runs."""

from __future__ import annotations

import logging
import time
from typing import Any

from toolcards.governance import telemetry
from toolcards.governance.approvals import edits
from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    ApprovalRecord,
    ApprovalRequest,
    ApprovalState,
    ApprovalTimedOut,
    GrantedEdit,
)
from toolcards.governance.approvals.grants import GrantBook
from toolcards.governance.executor.calls import Call, CallBook, ExecutionResult
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Policy
from toolcards.governance.redaction.redactor import args_digest, canonical_json
from toolcards.stores.governance import TooManyApprovals

log = logging.getLogger("toolcards.governance.executor")


class ApprovalGate:
    """Asks for, waits on and settles the approval of calls (pending requests live in
    ``broker``; a call the gate stops ends through ``book``); ``grants`` are the remembered
    approvals of the broker's store, asked first."""

    def __init__(self, broker: ApprovalBroker, book: CallBook) -> None:
        self.broker = broker
        self.book = book
        self.grants = GrantBook(broker)
        self.granted = self.grants.admitting
        """True when a remembered grant covers the call (it runs without asking anyone, its
        ``grant_id`` set for its row); asked before :meth:`admit`, without a coroutine nor a
        method of its own: a granted call costs little more than one that needs no approval.
        Not asked for a call carrying an approver's edit (its human decides it, not a
        grant)."""

    def traced(self, call: Call) -> None:
        """The span of a call a grant let run names the grant."""
        telemetry.event(call.span, "toolcards.approved", grant_id=call.grant_id or "")

    async def admit(self, call: Call) -> ExecutionResult | None:
        """None when ``call`` may run (approved; its clock moved past the human's time, an
        approver's edit in ``call.edit``); else the result that stops it."""
        broker, book = self.broker, self.book
        who, tool_id = call.identity, call.tool_id
        digest = args_digest(call.args)
        binding = {
            "tool_id": tool_id, "args_digest": digest, "principal": who.id,
            "session": call.session or "",  # another session's record is never spent here
        }  # fmt: skip
        record = broker.settle_record(call.call_id, approved=False, **binding)
        if record is not None and not _asked_here(call, record.request):
            return self._elsewhere(call, record.state)  # its caller waits, or comes to spend it
        elif call.approved and record is not None and record.state is ApprovalState.PENDING:
            # the surface's yes (a run's deferred results) grants its own conversation's
            # request only: another one's made-up history took it before
            record = broker.settle_record(call.call_id, approved=True, **binding)
        pending = record.request if record is not None else None
        if record is not None and record.state is ApprovalState.GRANTED:
            return self._granted(call, record)
        if record is not None and record.state is ApprovalState.DENIED:
            return self._refused(call, pending)
        if pending is None:
            asked = self._ask(call, digest)
            if isinstance(asked, ExecutionResult):
                return asked
            if not _asked_here(call, asked):  # another conversation asked it meanwhile
                return self._elsewhere(call)
            pending = asked
        if call.approver is None:
            telemetry.event(
                call.span, "toolcards.approval_required", approval_id=pending.approval_id
            )
            msg = f"approval required: {tool_id} needs a human's approval before it runs"
            return book.finish(call, Outcome.NEEDS_APPROVAL, msg, approval=pending)
        asked_at = time.perf_counter()
        try:
            ok = await call.approver(pending)
        except ApprovalTimedOut as exc:
            late = self._decided_late(pending)
            if late is None:
                telemetry.event(
                    call.span, "toolcards.approval_timeout", approval_id=pending.approval_id
                )
                msg = f"approval timeout: nobody decided on {tool_id} within {exc.seconds:g} s"
                return book.finish(call, Outcome.APPROVAL_TIMEOUT, msg)
            ok = late
        except Exception as exc:  # no traceback: it may repeat an argument in clear
            error = f"{type(exc).__name__}: {exc}"
            shown = call.redactor.error(error, call.args, call.sensitive)
            log.error("approver failed for %s; the call is refused: %s", tool_id, shown)
            ok = False
        except BaseException:  # the call is gone: so is its request (its row is the caller's)
            broker.withdraw(pending)
            raise
        if ok is True or type(ok) is GrantedEdit:
            record = broker.settle_record(pending.call_id, approved=True, **binding)
            if record is not None and record.state is ApprovalState.GRANTED:
                if not _asked_here(call, record.request):  # the yes was to another's request
                    return self._refused(call, record.request)
                call.start += time.perf_counter() - asked_at  # a human's time is not the tool's
                if type(ok) is GrantedEdit and not self._edited(call, ok.args):
                    return self._refused(call, record.request)
                return self._granted(call, record)
        broker.withdraw(pending)
        return self._refused(call, pending)

    def _ask(self, call: Call, digest: str) -> ApprovalRequest | ExecutionResult:
        """The request recorded for ``call``; its refusal when its principal already holds
        as many pending requests as the store keeps (a caller that is never asked again
        cannot fill the store and the inbox: see
        :data:`~toolcards.stores.governance.PENDING_PER_PRINCIPAL`)."""
        decision = call.decision
        asked = decision is not None and decision.effect == "approve"
        try:
            return self.broker.request(
                tool_id=call.tool_id,
                args=call.args,
                args_digest=digest,
                identity=call.identity,
                reason=decision.reason if asked and decision else "the tool requires approval",
                sensitive=call.sensitive,
                call_id=call.call_id,
                surface=call.surface,
                redactor=call.redactor,
                session=call.session or "",
            )
        except TooManyApprovals as exc:
            telemetry.event(call.span, "toolcards.approval_refused", approval_id="")
            msg = f"denied: {call.tool_id} cannot be asked for approval: {exc}"
            return self.book.finish(call, Outcome.DENIED, msg)

    def _decided_late(self, pending: ApprovalRequest) -> bool | None:
        """None once ``pending``, which nobody decided in time, is withdrawn; else the decision
        that landed after the approver's last look (True: granted), which counts: its
        approver was told it was recorded."""
        if self.broker.withdraw(pending, only_pending=True):
            return None
        state = self.broker.state(pending)
        if state is ApprovalState.GRANTED or state is ApprovalState.DENIED:
            return state is ApprovalState.GRANTED
        return None

    def _elsewhere(
        self, call: Call, state: ApprovalState = ApprovalState.PENDING
    ) -> ExecutionResult:
        """The refusal of a call whose request (same principal, call id, tool and arguments)
        another conversation asked, pending or decided and not yet spent by its caller: never
        waited on, withdrawn or settled by this call."""
        telemetry.event(call.span, "toolcards.approval_refused", approval_id="")
        where = "is waiting for approval" if state is ApprovalState.PENDING else "was decided"
        msg = f"denied: call id {call.call_id} {where} in another conversation"
        return self.book.finish(call, Outcome.DENIED, msg)

    def apply_edit(self, call: Call, policy: Policy) -> ExecutionResult | None:
        """The approver's edit (``call.edit``) checked where the call runs, as a fresh call's
        arguments would be (the policy may have changed since the grant): None when it runs
        (in ``call.args``), else the call's refusal."""
        assert call.cap is not None and call.edit is not None
        edit = edits.apply(policy, call.edit, call.identity, call.cap)
        call.edit, call.called_digest = None, args_digest(call.args)
        if isinstance(edit, edits.Refusal):
            call.args = edit.args
            return self.book.finish(call, edit.outcome, edit.message)
        call.args, call.decision, call.parsed = edit.args, edit.decision, edit.parsed
        call.edit_runs = True
        return None

    def _granted(self, call: Call, record: ApprovalRecord) -> ExecutionResult | None:
        """None: the call runs, carrying the approver's edit of its arguments when there is
        one (an edit recorded by the grant, or the surface's own: two different ones are
        refused)."""
        telemetry.event(call.span, "toolcards.approved", approval_id=record.request.approval_id)
        if not record.edited_json:
            return None
        if call.edit is not None and canonical_json(call.edit) != record.edited_json:
            return self._refused(call, record.request)
        call.edit = record.edited_args
        return None

    @staticmethod
    def _edited(call: Call, args: dict[str, Any]) -> bool:
        """The edit an approver returned (its request was granted in another broker than
        this one) becomes the call's: False when the call carries another one already."""
        if call.edit is not None and canonical_json(call.edit) != canonical_json(args):
            return False
        call.edit = args
        return True

    def _refused(self, call: Call, request: ApprovalRequest | None) -> ExecutionResult:
        approval_id = request.approval_id if request is not None else ""
        telemetry.event(call.span, "toolcards.approval_refused", approval_id=approval_id)
        return self.book.finish(
            call, Outcome.DENIED, f"denied: approval for {call.tool_id} was refused"
        )


def _asked_here(call: Call, request: ApprovalRequest) -> bool:
    """Whether ``request`` was asked where ``call`` comes from: the same session (a
    pydantic-ai conversation, an MCP session), or both from none. A decision settles only
    the call of its own session: one agent principal serves many users' conversations,
    and call ids (a model's, a made-up history's) may repeat across them."""
    return request.session == (call.session or "")
