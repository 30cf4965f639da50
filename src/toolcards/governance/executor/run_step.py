"""The executor's last step: the input guardrails, the tool itself (within the call's
deadline, with the caller, the governed call and the call's idempotency key set for it), the
output guardrails, and the mapping of what the tool raised to an outcome (see
:mod:`.guardrails` and :mod:`.calls`)."""

from __future__ import annotations

from typing import Any

from toolcards.core.actors import calling_call_key
from toolcards.core.errors import ToolNotConfigured
from toolcards.core.identity import calling_principal
from toolcards.governance import guardrails, telemetry
from toolcards.governance.capability import Invoke
from toolcards.governance.executor.approval_step import ApprovalStep
from toolcards.governance.executor.calls import (
    Call,
    ExecutionResult,
    _passes_through,
    _retry_message,
    _writes_key,
)
from toolcards.governance.executor.deadline import abandoning_deadline, with_deadline
from toolcards.governance.executor.endings import TIMEOUT
from toolcards.governance.executor.governing import GoverningCall, governing_call
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Decision

__all__ = ["RunStep"]


class RunStep(ApprovalStep):
    """Runs an admitted call's tool between its guardrail hooks (the executor's base)."""

    hooks: guardrails.Hooks
    timeout: float | None

    async def _hooked(
        self, call: Call, decision: Decision, parsed: dict[str, Any], invoke: Invoke
    ) -> ExecutionResult:
        """The input hooks, then the tool and the output hooks, within the call's deadline."""
        cap = call.cap
        assert cap is not None and call.call_id is not None
        before, after = self.hooks.for_tool(cap.id)
        timeout = cap.timeout if cap.timeout is not None else self.timeout
        ctx = guardrails.context(
            cap.id, call.identity, call.args, call.call_id, call.surface, decision, timeout,
            self.policy.redaction,
        )  # fmt: skip
        changed: tuple[str, ...] = ()
        if before:
            asked = decision.effect == "approve" or cap.annotations.requires_approval
            recheck = guardrails.rechecker(self.policy, cap, call.identity, decision, asked)
            self._note(call, decision)
            checked = await guardrails.check_input(before, ctx, recheck)
            if isinstance(checked, guardrails.Refusal):
                return self._hook_refused(call, decision, checked)
            parsed = checked.value[1] if checked.value[1] is not None else parsed
            changed = checked.changed
        return await self._execute(call, decision, parsed, invoke, (ctx, after, changed))

    def _hook_refused(
        self, call: Call, decision: Decision, refusal: guardrails.Refusal
    ) -> ExecutionResult:
        telemetry.event(call.span, "toolcards.refused", hook=refusal.hook)
        call = call._replace(hook=refusal.hook)
        return self._finish(call, Outcome.REFUSED, decision, refusal.message, refusal.error)

    async def _execute(
        self,
        call: Call,
        decision: Decision,
        parsed: dict[str, Any],
        invoke: Invoke,
        hooked: tuple[guardrails.HookContext, Any, tuple[str, ...]] | None = None,
    ) -> ExecutionResult:
        """Run the tool; ``hooked``: the call's hook context, output hooks and the names of
        the hooks that changed it so far."""
        cap = call.cap
        assert cap is not None
        limit = cap.timeout if cap.timeout is not None else self.timeout
        timeout = limit if hooked is None else hooked[0].remaining()  # what the hooks left
        self._note(call, decision)
        principal = calling_principal.set(call.identity)  # who writes, for the tool to record
        governing = governing_call.set(
            GoverningCall(self, call.identity, call.surface, call.call_id, cap.id)
        )
        writes = calling_call_key.set(_writes_key(call))
        try:
            if timeout is None:
                value = await invoke(parsed)
            elif cap.abandon_threads:
                value = await abandoning_deadline(invoke(parsed), timeout)
            else:
                value = await with_deadline(invoke(parsed), timeout)
        except Exception as exc:
            retry = _retry_message(exc)
            if retry is not None:
                redacted = self.policy.redaction.text(retry)
                return self._finish(call, Outcome.RETRY, decision, redacted, retry)
            if _passes_through(exc):
                self._end(call, decision, "deferred", None)
                raise
            if isinstance(exc, TimeoutError):
                why = f"timed out after {limit:g} s"
                msg = f"error: {cap.id} {why}"
                return self._finish(call, Outcome.ERROR, decision, msg, why, audited=TIMEOUT)
            if isinstance(exc, ToolNotConfigured):  # its message names what to set
                msg = f"error: {self.policy.redaction.text(str(exc))}"
                return self._finish(call, Outcome.ERROR, decision, msg)
            msg = f"error: {cap.id} failed ({type(exc).__name__})"
            return self._finish(call, Outcome.ERROR, decision, msg, f"{type(exc).__name__}: {exc}")
        except BaseException as exc:  # cancelled or interrupted: the row, then on its way
            self._ended_by(call, decision, exc)
            raise
        finally:
            calling_call_key.reset(writes)
            calling_principal.reset(principal)
            governing_call.reset(governing)
        if hooked is not None:
            ctx, after, changed = hooked
            if after:
                checked = await guardrails.check_output(after, ctx, value)
                if isinstance(checked, guardrails.Refusal):
                    return self._hook_refused(call, decision, checked)
                value, changed = checked.value, changed + checked.changed
            if changed:
                call = call._replace(hook=",".join(changed))
        return self._finish(call, Outcome.OK, decision, "", value=value)
