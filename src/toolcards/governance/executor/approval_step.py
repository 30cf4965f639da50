"""The executor's approval step: a call the policy says ``approve`` (or a tool that requires
approval) runs only once a human granted this exact request (see :mod:`.approvals`)."""

from __future__ import annotations

import functools
import logging
import time

from toolcards.governance import telemetry
from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    ApprovalRecord,
    ApprovalRequest,
    ApprovalState,
    ApprovalTimedOut,
    Approver,
)
from toolcards.governance.executor.calls import Call, CallBook, ExecutionResult, _id, _sensitive
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Decision
from toolcards.governance.redaction.redactor import args_digest, canonical_json

log = logging.getLogger("toolcards.governance.executor.pipeline")


class ApprovalStep(CallBook):
    """Asks for, waits on and settles the approval of a call (the executor's base)."""

    approvals: ApprovalBroker

    async def _approval(
        self,
        call: Call,
        decision: Decision,
        approver: Approver | None,
        approved: bool,
    ) -> Call | ExecutionResult:
        """The call (its clock moved past a human's time) when it may proceed, else the
        result that stops it."""
        broker = self.approvals
        who, tool_id = call.identity, call.tool_id
        digest = args_digest(call.args)
        settle = functools.partial(
            broker.settle_record, tool_id=tool_id, args_digest=digest, principal=who.id
        )
        pending: ApprovalRequest | None = None
        if call.call_id is not None:
            record = settle(call.call_id, approved=approved)
            pending = record.request if record is not None else None
            if record is not None and record.state is ApprovalState.GRANTED:
                return self._granted(call, decision, record)
            if record is not None and record.state is ApprovalState.DENIED:
                return self._refused(call, decision, pending)
        if pending is None:
            reason = (
                decision.reason if decision.effect == "approve" else "the tool requires approval"
            )
            pending = broker.request(
                tool_id=tool_id,
                args=call.args,
                args_digest=digest,
                identity=who,
                reason=reason,
                sensitive=_sensitive(call),
                call_id=call.call_id,
                surface=call.surface,
                redactor=self.policy.redaction,
            )
        if approver is None:
            telemetry.event(
                call.span, "toolcards.approval_required", approval_id=pending.approval_id
            )
            msg = f"approval required: {tool_id} needs a human's approval before it runs"
            return self._finish(call, Outcome.NEEDS_APPROVAL, decision, msg, approval=pending)
        asked = time.perf_counter()
        self._note(call, decision)
        try:
            ok = await approver(pending)
        except ApprovalTimedOut as exc:
            broker.withdraw(pending)
            telemetry.event(call.span, "toolcards.approval_timeout", approval_id=_id(pending))
            msg = f"approval timeout: nobody decided on {tool_id} within {exc.seconds:g} s"
            return self._finish(call, Outcome.APPROVAL_TIMEOUT, decision, msg)
        except Exception:
            log.exception("approver failed for %s", tool_id)
            ok = False
        except BaseException as exc:  # the call is gone: so is its request, and it is audited
            broker.withdraw(pending)
            self._ended_by(call, decision, exc)
            raise
        if ok is True:
            record = settle(pending.call_id, approved=True)
            if record is not None and record.state is ApprovalState.GRANTED:
                # a human's time is not the tool's
                moved = call._replace(start=call.start + time.perf_counter() - asked)
                return self._granted(moved, decision, record)
        broker.withdraw(pending)
        return self._refused(call, decision, pending)

    def _granted(
        self, call: Call, decision: Decision, record: ApprovalRecord
    ) -> Call | ExecutionResult:
        """The granted call, carrying the approver's edit of its arguments when there is one
        (an edit recorded by the grant, or the surface's own: two different ones are refused)."""
        telemetry.event(call.span, "toolcards.approved", approval_id=record.request.approval_id)
        if not record.edited_json:
            return call
        if call.edit is not None and canonical_json(call.edit) != record.edited_json:
            return self._refused(call, decision, record.request)
        return call._replace(edit=record.edited_args)

    def _refused(
        self, call: Call, decision: Decision, request: ApprovalRequest | None
    ) -> ExecutionResult:
        telemetry.event(call.span, "toolcards.approval_refused", approval_id=_id(request))
        msg = f"denied: approval for {call.tool_id} was refused"
        return self._finish(call, Outcome.DENIED, decision, msg)
