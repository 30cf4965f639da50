"""One governed call as it travels down the executor's pipeline, and its one ending.

:class:`Call` is the record each step of :class:`~toolcards.governance.executor.pipeline.Executor`
passes on; :class:`ExecutionResult` is what a surface gets back; :class:`CallBook`, the
executor's base, ends a call: its one audit row and its telemetry (see :mod:`.endings`).
"""

from __future__ import annotations

import difflib
import logging
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from toolcards.core.errors import RetriableError, TransientError
from toolcards.core.identity import Identity
from toolcards.governance import telemetry
from toolcards.governance.approvals.broker import ApprovalRequest
from toolcards.governance.audit.log import AuditLog, AuditRecord
from toolcards.governance.capability import ToolCapability
from toolcards.governance.executor.endings import INTERRUPTED, InFlight, abrupt_ending
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Decision, Policy
from toolcards.governance.redaction.redactor import args_digest
from toolcards.governance.telemetry import Telemetry

log = logging.getLogger("toolcards.governance.executor.pipeline")  # where the executor's lines went

_MAX_NAME = 100  # a model-supplied tool name is cut to this length in messages
POLICY_ERROR_MESSAGE = (
    "policy error: the policy file is invalid, so every call is refused until it is fixed"
)


@dataclass(slots=True)
class ExecutionResult:
    """What happened to one call.

    ``value`` is the tool's return value for OK. ``message`` is model-readable text for every
    other outcome (no stack traces, no secrets, no hints about other rules). ``retry_after``
    is set for RATE_LIMITED, ``approval`` for NEEDS_APPROVAL.
    """

    outcome: Outcome
    tool_id: str
    value: Any = None
    message: str = ""
    decision: Decision | None = None
    retry_after: float | None = None
    approval: ApprovalRequest | None = None
    call_id: str | None = None
    """The id every audit row of the call carries (the surface's, or one made at its start)."""

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


class Call(NamedTuple):
    """One call as it travels down the pipeline (immutable: a step that changes something
    passes on a new record)."""

    tool_id: str
    args: dict[str, Any]
    identity: Identity
    surface: str
    call_id: str | None
    start: float
    cap: ToolCapability | None = None
    span: Any = None
    instruments: telemetry.Instruments | None = None
    key: int | None = None
    """Its entry in the executor's in-flight book (None: a call that cannot be left running)."""
    writes_key: str | None = None
    """The idempotency key of the tool's writes (None: the call id)."""
    hook: str | None = None
    """The guardrail that refused it, or those that changed it (comma-separated)."""
    edit: Mapping[str, Any] | None = None
    """An approver's edit of its arguments, to check and run once its approval is granted."""
    called_digest: str | None = None
    """Set once an edit applies (``args`` are then the edit): the digest of the arguments as
    called, which every row of the call keeps."""


def unknown_tool_message(tool_id: str, visible: Iterable[str]) -> str:
    """``unknown tool: <name>`` with the closest names among ``visible`` (the tools the
    caller may see, and nothing else)."""
    name = tool_id if len(tool_id) <= _MAX_NAME else tool_id[:_MAX_NAME] + "..."
    close = difflib.get_close_matches(tool_id[:_MAX_NAME], list(visible), n=3, cutoff=0.6)
    if not close:
        return f"unknown tool: {name}"
    return f"unknown tool: {name}; did you mean {' or '.join(close)}?"


class CallBook:
    """Ends governed calls: each call's one audit row and telemetry, and the rows of the calls
    still running when the process ends (:meth:`interrupt_all`)."""

    policy: Policy
    telemetry: Telemetry
    _audit: AuditLog | None
    _running: InFlight

    def _finish(
        self,
        call: Call,
        outcome: Outcome,
        decision: Decision | None,
        message: str,
        error: str | None = None,
        *,
        value: Any = None,
        retry_after: float | None = None,
        approval: ApprovalRequest | None = None,
        audited: str | None = None,
    ) -> ExecutionResult:
        """Audit (as ``audited``, default the outcome) and report the call's end; the result
        a surface maps."""
        if outcome is not Outcome.OK and error is None:
            error = message
        self._end(call, decision, audited or outcome.value, error, outcome.value)
        return ExecutionResult(
            outcome,
            call.tool_id,
            value=value,
            message=message,
            decision=decision,
            retry_after=retry_after,
            approval=approval,
            call_id=call.call_id,
        )

    def _note(self, call: Call, decision: Decision) -> None:
        """Where the call stands, for a row its process may have to write for it."""
        if call.key is not None:
            self._running.note(call.key, call, decision)

    def _ended_by(self, call: Call, decision: Decision | None, exc: BaseException) -> None:
        """The row of a call that ends by ``exc`` instead of a result."""
        outcome, error = abrupt_ending(exc)
        if self._end(call, decision, outcome, error) and isinstance(exc, Exception):
            log.exception("governed call %s failed outside the tool", call.tool_id)

    def _end(
        self,
        call: Call,
        decision: Decision | None,
        outcome: str,
        error: str | None,
        reported: str | None = None,
    ) -> bool:
        """The call's one row and telemetry (``reported``: the outcome telemetry counts,
        default ``outcome``); nothing (False) when the row was already written."""
        if call.key is not None and not self._running.take(call.key):
            return False
        if self._audit is not None:
            self._record(call, decision, outcome, error)
        if call.instruments is not None:
            telemetry.finish(
                call.instruments,
                call.span,
                call.cap.id if call.cap is not None else None,
                decision.effect if decision is not None else "none",
                reported or outcome,
                time.perf_counter() - call.start,
            )
        return True

    def interrupt_all(self, reason: str) -> None:
        """Audit every call still running as ``interrupted`` (its process ends under it)."""
        for call, decision in self._running.take_all():
            if self._audit is not None:
                self._record(call, decision, INTERRUPTED, reason)

    def _record(
        self, call: Call, decision: Decision | None, outcome: str, error: str | None
    ) -> None:
        """Append one audit row (nothing without an audit log)."""
        audit = self._audit
        if audit is None:
            return
        who = call.identity
        audit.record(
            AuditRecord(
                ts=time.time(),
                principal=who.id,
                principal_type=who.type,
                roles=who.roles,
                surface=call.surface,
                tool=call.tool_id,
                call_id=call.call_id,
                args=dict(call.args),
                decision=decision.effect if decision is not None else "none",
                outcome=outcome,
                reason=decision.reason if decision is not None else None,
                duration=time.perf_counter() - call.start,
                error=error,
                sensitive=_sensitive(call),
                redactor=self.policy.redaction,
                hook=call.hook,
                args_digest=call.called_digest,  # an edit ran: the digest as called stays
                approved_args_digest=None if call.called_digest is None else args_digest(call.args),
            )
        )


# pydantic-ai's exceptions are looked up, never imported, here: a ModelRetry (or a deferral)
# can only have been raised once pydantic-ai is loaded, and importing it costs about a second
# that a surface listing tools should not pay.
_PAI_EXCEPTIONS = "pydantic_ai.exceptions"


def _retry_message(exc: Exception) -> str | None:
    """The model-readable message of a retryable tool error (RetriableError, TransientError,
    ModelRetry)."""
    if isinstance(exc, RetriableError | TransientError):
        return str(exc)
    pai = sys.modules.get(_PAI_EXCEPTIONS)
    if pai is not None and isinstance(exc, pai.ModelRetry):
        return str(exc.message)
    return None


def _passes_through(exc: Exception) -> bool:
    """A deferral (CallDeferred, ApprovalRequired) that the surface handles itself."""
    pai = sys.modules.get(_PAI_EXCEPTIONS)
    return pai is not None and isinstance(exc, pai.CallDeferred | pai.ApprovalRequired)


def _writes_key(call: Call) -> str:
    """The idempotency key of the call's writes: its key (default: its call id) within its
    principal, so a call id another principal used never answers from that one's record."""
    who = call.identity.id
    return f"{len(who)}:{who}/{call.writes_key or call.call_id}"


def _sensitive(call: Call) -> tuple[str, ...]:
    return tuple(call.cap.sensitive) if call.cap is not None else ()


def _id(request: ApprovalRequest | None) -> str:
    return request.approval_id if request is not None else ""
