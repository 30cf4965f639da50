"""One governed call as it travels down the executor's pipeline, and its one ending.

:class:`Call` is the record every step of :class:`~.pipeline.Executor` reads and updates: who
calls which tool with which arguments, what the surface asked for the call (an approver, an
approval already given, its own invoke), and where the call stands (the policy's decision,
an approver's edit, the guardrails that changed it). :class:`ExecutionResult` is what a
surface gets back.

:class:`CallBook` ends calls. Every call that started gets exactly one audit row: the book
enters a call when it starts and takes it out again with its row, and taking it out is the
right to write that row, given once, to the call's own ending (a result, a cancellation, an
interrupt) or to its process's (SIGTERM or interpreter exit write ``interrupted`` for the
calls still running, see :mod:`toolcards.governance.audit.shutdown`). Single dict
operations only (atomic under the GIL), so a signal handler on the main thread and calls on
other threads may end calls concurrently. A call taken out is a row being written until it is
journaled: the SIGTERM handler waits for it; and once SIGTERM ends the process, no call
starts (it is booked and ended ``interrupted`` at once, and refused).

Call ids: a call that comes without one gets :func:`fresh_call_id` at its start, so every row
of the call (approval request and decision, the final row) carries the same id. The final row
of a durable call that holds its claim (:mod:`.replay`) carries ``<call id>#<claim>``: a
model's tool call id repeats across runs, the claim's token does not, so a recovery finds the
row of its own claim and no other run's.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import os
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolcards.core.errors import RetriableError, TransientError
from toolcards.core.identity import Identity
from toolcards.governance import telemetry
from toolcards.governance.approvals.broker import ApprovalRequest, Approver
from toolcards.governance.audit import shutdown
from toolcards.governance.audit.log import AuditEntry, AuditLog, AuditRecord, shown_name
from toolcards.governance.capability import Invoke, ToolCapability
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Decision
from toolcards.governance.redaction.redactor import (
    DEFAULT_REDACTOR,
    Redactor,
    args_digest,
    canonical_json,
    storable,
)
from toolcards.governance.telemetry import Telemetry

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("toolcards.governance.executor")

CANCELLED = "cancelled"
"""The outcome of a call whose task was cancelled (the caller withdrew it)."""
INTERRUPTED = "interrupted"
"""The outcome of a call ended by its process: KeyboardInterrupt, SystemExit, SIGTERM, exit."""
TIMEOUT = "timeout"
"""The audit outcome of a call that ran out of time (the result's outcome is ``error``)."""
REPLAYED = "replayed"
"""The audit outcome of a durable call answered from its recorded result."""

POLICY_ERROR_MESSAGE = (
    "policy error: the policy file is invalid, so every call is refused until it is fixed"
)
_MAX_NAME = 100  # a model-supplied tool name is cut to this length in messages
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")
_MAX_HINT = 40
_NOT_ENDINGS = frozenset({"needs_approval", REPLAYED})  # waiting for approval; another's answer


@dataclass(frozen=True, slots=True)
class ApprovedEdit:
    """The arguments an approver granted in place of the caller's, as they ran: ``args``
    (canonical), their ``digest`` and ``shown`` (their canonical JSON redacted as the audit
    trail keeps it: what the caller is told)."""

    args: dict[str, Any]
    digest: str
    shown: str

    @property
    def note(self) -> str:
        """What the caller is told: its call ran with other arguments than it sent."""
        return f"approved with edited arguments: {self.shown}"


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
    edit: ApprovedEdit | None = None
    """Set when an approver's edit of the arguments ran in place of the caller's: every
    surface tells the caller so (:attr:`ApprovedEdit.note`)."""
    grant_id: str | None = None
    """The grant (a remembered approval) that let the call run without asking anyone."""

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    def told(self, text: str) -> str:
        """``text`` as the caller reads it: after the note of an approver's edit, if any."""
        return text if self.edit is None else f"{self.edit.note}\n{text}"


@dataclass(slots=True, eq=False)
class Call:
    """One call, from its start to its one row. The steps of the pipeline update it in place;
    the :class:`CallBook` writes its row from what it holds when it ends."""

    tool_id: str
    args: dict[str, Any]
    """The arguments as received, then as the tool will act on them (canonical paths; an
    approver's edit once it applies)."""
    identity: Identity
    surface: str
    call_id: str
    start: float
    """``time.perf_counter()`` at its start (moved past the time a human took to approve)."""
    cap: ToolCapability | None = None
    redactor: Redactor = DEFAULT_REDACTOR
    """The policy's redactor when the call started: its rows and messages use it."""

    # -- what the surface asked -----------------------------------------------------------
    approver: Approver | None = None
    """Asked inline when the call needs approval (None: the call ends ``needs_approval``)."""
    approved: bool = False
    """The surface's human approved this call id now (pydantic-ai's deferred approvals)."""
    invoke: Invoke | None = None
    """Runs the tool in place of ``cap.invoke`` (a surface that calls the tool itself)."""
    validated: bool = False
    """The arguments are already parsed (validation is skipped)."""
    hide_denied: bool = False
    """A tool the caller may not see reads as unknown."""
    writes_key: str | None = None
    """The idempotency key of the tool's writes (None: the call id)."""
    edit: Mapping[str, Any] | None = None
    """An approver's edit of the arguments, to check and run once the approval is granted."""
    timeout: float | None = None
    """Seconds the hooks and the tool may take together (None: no limit)."""
    session: str | None = None
    """The session the call comes from (a pydantic-ai conversation, an MCP session): a grant
    may be limited to it."""
    run_id: str | None = None
    """The run the call belongs to (a pydantic-ai run; else its session): per-run budgets."""

    # -- where it stands ------------------------------------------------------------------
    decision: Decision | None = None
    parsed: dict[str, Any] | None = None
    """The arguments parsed into the tool's types (None until validated)."""
    hook: str | None = None
    """The guardrail that refused it, or those that changed it (comma-separated)."""
    called_digest: str | None = None
    """Set once an edit applies (``args`` are then the edit): the digest of the arguments as
    called, which every row of the call keeps."""
    edit_runs: bool = False
    """The approver's edit passed its checks: ``args`` are what runs, and the caller is told."""
    each: Mapping[str, tuple[Any, ...]] | None = None
    """Every canonical path of a call that names several (see ``PathArgs.resolve``)."""
    grant_id: str | None = None
    """The grant (a remembered approval) that let the call run without asking anyone."""
    started: bool = False
    """The tool was invoked: from here on the call may have had its effect."""
    span: Any = None
    instruments: telemetry.Instruments | None = None
    key: int | None = None
    """Its entry in the book (None: a call that cannot be left running)."""
    claim: str | None = None
    """The token of the durable claim the call holds (:mod:`.replay`), which its row's call
    id carries (:attr:`row_id`)."""
    row_key: str | None = None
    """The key of its row (None: one of the row's own): a row that may be made again (a hidden
    call seen again in a resumed history) is found by it (:attr:`AuditRecord.key`)."""

    @property
    def row_id(self) -> str:
        """The call id its final row carries: ``<call id>#<claim>`` while it holds a claim."""
        return self.call_id if self.claim is None else f"{self.call_id}#{self.claim}"

    @property
    def sensitive(self) -> tuple[str, ...]:
        """The arguments redacted whole (the capability's ``sensitive``)."""
        return tuple(self.cap.sensitive) if self.cap is not None else ()

    def key_of_writes(self) -> str:
        """The idempotency key of the call's writes: its key (default: its call id) within
        its principal, so a key another principal used never answers from that one's record."""
        who = self.identity.id
        return f"{len(who)}:{who}/{self.writes_key or self.call_id}"


class CallBook:
    """Ends governed calls: each call's one audit row and telemetry, and the rows of the
    calls still running when the process ends (:meth:`interrupt_all`)."""

    def __init__(self, telemetry: Telemetry, audit: AuditLog | None = None) -> None:
        self.telemetry = telemetry
        self.audit = audit
        self._open: dict[int, Call] = {}
        self._keys = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None  # the last one handed to LoopWake
        self._running_loop: Callable[[], asyncio.AbstractEventLoop] | None = None

    def __len__(self) -> int:
        """The calls that started and have no row yet."""
        return len(self._open)

    def enter(self, call: Call) -> None:
        """Enter ``call`` (in its task): from now on it ends in exactly one row. Its loop, if
        the main thread's, wakes on SIGTERM, also when the signal lands just before the
        loop's wait (:class:`~toolcards.governance.audit.shutdown.LoopWake`). While SIGTERM
        ends the process, the call gets its ``interrupted`` row and is refused (raises)."""
        call.key = next(self._keys)
        self._open[call.key] = call
        if shutdown.ending:  # checked once booked: else the handler's interrupt_all has it
            self.end(call, INTERRUPTED, shutdown.ENDING_REASON)
            raise RuntimeError("call refused: the process is ending (SIGTERM)")
        running = self._running_loop
        if running is None:
            import asyncio  # lazy: `toolcards list` loads no asyncio

            running = self._running_loop = asyncio.get_running_loop
        loop = running()
        if loop is not self._loop:
            self._loop = loop
            shutdown.loop_wake.watch(loop)

    def finish(
        self,
        call: Call,
        outcome: Outcome,
        message: str,
        error: str | None = None,
        *,
        value: Any = None,
        retry_after: float | None = None,
        approval: ApprovalRequest | None = None,
        audited: str | None = None,
    ) -> ExecutionResult:
        """Audit (as ``audited``, default the outcome) and report the call's end: the result a
        surface maps."""
        if outcome is not Outcome.OK and error is None:
            error = message
        edit = None
        if call.edit_runs:  # an approver's edit ran in place of the call: the caller is told
            shown = canonical_json(call.redactor.value(call.args, call.sensitive))
            edit = ApprovedEdit(dict(call.args), args_digest(call.args), shown)
        self.end(call, audited or outcome.value, error, outcome.value)
        return ExecutionResult(
            outcome,
            call.tool_id,
            value=value,
            message=message,
            decision=call.decision,
            retry_after=retry_after,
            approval=approval,
            call_id=call.call_id,
            edit=edit,
            grant_id=call.grant_id,
        )

    def ended_by(self, call: Call, exc: BaseException) -> None:
        """The row of a call that ends by ``exc`` instead of a result (nothing when it
        already has its row)."""
        outcome, error = abrupt_ending(exc)
        if self.end(call, outcome, error) and isinstance(exc, Exception):
            # its row's text, not a traceback: the exception may repeat an argument in clear
            shown = call.redactor.error(error, call.args, call.sensitive)
            log.error("governed call %s failed outside the tool: %s", call.tool_id, shown)

    def end(self, call: Call, outcome: str, error: str | None, reported: str | None = None) -> bool:
        """The call's one row and telemetry (``reported``: the outcome telemetry counts,
        default ``outcome``); nothing (False) when the row was already written. A SIGTERM
        ends the process once the row is written (:data:`.shutdown.writing`)."""
        me = threading.get_ident()
        shutdown.writing.add(me)  # before the call leaves the book: never out of the handler's view
        try:
            if call.key is not None and self._open.pop(call.key, None) is None:
                return False
            self.record(call, outcome, error)
        finally:
            shutdown.writing.discard(me)
            if shutdown.deferred == me:  # the SIGTERM handler waited for this row
                shutdown.end_process()
        if call.instruments is not None:
            telemetry.finish(
                call.instruments,
                call.span,
                call.cap.id if call.cap is not None else None,
                call.decision.effect if call.decision is not None else "none",
                reported or outcome,
                time.perf_counter() - call.start,
            )
        return True

    def ending_of(
        self, call: Call, row_id: str | None, claimed_at: float, digest: str
    ) -> AuditEntry | None:
        """The row that ended the earlier run of ``call`` claimed at ``claimed_at`` (epoch
        seconds) with arguments of ``digest``, its row's call id ``row_id`` (the claim's:
        :attr:`Call.row_id`, as stored): the first ending of that id, tool, principal and
        arguments written since that claim; None without one (or without an audit log or id).

        A model's tool call id repeats (another run, a later turn): the claim's token in the
        row id ties the row to that claim, and rows before the claim and ``replayed`` rows
        (answers, not runs) never count. No clock skew to allow for: the claim's time and its
        call's row are both the claiming process's clock. Rows a killed process left in its
        journal are written first."""
        if self.audit is None or not row_id:
            return None
        tool, principal = _row_keys(call)
        rows = self.audit.query(call_id=row_id, tool=tool, principal=principal, since=claimed_at)
        ended = (r for r in rows if r.args_digest == digest and r.outcome not in _NOT_ENDINGS)
        return next(ended, None)

    def interrupt_all(self, reason: str) -> None:
        """Audit every call still running as ``interrupted`` (its process ends under it)."""
        for key in list(self._open.copy()):
            call = self._open.pop(key, None)
            if call is not None:
                self.record(call, INTERRUPTED, reason)

    def record(self, call: Call, outcome: str, error: str | None) -> None:
        """Append one audit row for ``call`` (nothing without an audit log)."""
        audit = self.audit
        if audit is None:
            return
        who, decision = call.identity, call.decision
        digest = call.called_digest  # an edit ran: the digest as called stays
        audit.record(
            AuditRecord(  # by position: the same record by 19 keywords took 0.6 us more a row
                time.time(),  # ts
                who.id,  # principal
                who.type,  # principal_type
                who.roles,  # roles
                call.surface,  # surface
                call.tool_id,  # tool
                call.row_id,  # call_id
                dict(call.args),  # args
                decision.effect if decision is not None else "none",  # decision
                outcome,  # outcome
                decision.reason if decision is not None else None,  # reason
                time.perf_counter() - call.start,  # duration
                error,  # error
                call.sensitive,  # sensitive
                digest,  # args_digest
                call.redactor,  # redactor
                None if digest is None else args_digest(call.args),  # approved_args_digest
                call.hook,  # hook
                call.grant_id,  # grant_id
                call.row_key,  # key
            )
        )


def _row_keys(call: Call) -> tuple[str, str]:
    """The tool and principal of ``call`` as its audit rows keep them (the tool name as its
    redactor shows it, a NUL or a lone surrogate as its ``\\u`` escape): what a lookup of its
    rows filters by."""
    return shown_name(call.redactor, call.tool_id), storable(call.identity.id)


def unknown_tool_message(tool_id: str, visible: Iterable[str]) -> str:
    """``unknown tool: <name>`` with the closest names among ``visible`` (the tools the
    caller may see, and nothing else)."""
    name = tool_id if len(tool_id) <= _MAX_NAME else tool_id[:_MAX_NAME] + "..."
    close = difflib.get_close_matches(tool_id[:_MAX_NAME], list(visible), n=3, cutoff=0.6)
    if not close:
        return f"unknown tool: {name}"
    return f"unknown tool: {name}; did you mean {' or '.join(close)}?"


def _new_prefix() -> str:
    return secrets.token_hex(6)


_prefix = _new_prefix()
_numbers = itertools.count(1)


def _reseed() -> None:  # a forked child must not repeat its parent's ids
    global _prefix, _numbers
    _prefix, _numbers = _new_prefix(), itertools.count(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed)


def fresh_call_id(hint: object = None) -> str:
    """A call id no other call of any process has: ``tc-<process>-<n>``, or
    ``<hint>-<process>-<n>`` (``hint`` cut to 40 safe characters, e.g. ``mcp-7``)."""
    head = "tc" if hint is None else _UNSAFE.sub("_", str(hint)[:_MAX_HINT])
    return f"{head}-{_prefix}-{next(_numbers)}"


def abrupt_ending(exc: BaseException) -> tuple[str, str]:
    """The audit outcome and error text of a call that ended by ``exc`` without a result."""
    asyncio = sys.modules.get("asyncio")  # a task's cancellation: asyncio is loaded then
    if isinstance(exc, GeneratorExit) or (
        asyncio is not None and isinstance(exc, asyncio.CancelledError)
    ):
        return CANCELLED, "cancelled before it finished"
    if isinstance(exc, Exception):
        return "error", f"{type(exc).__name__}: {exc}"
    return INTERRUPTED, f"interrupted by {type(exc).__name__}"


# pydantic-ai's exceptions are looked up, never imported, here: a ModelRetry (or a deferral)
# can only have been raised once pydantic-ai is loaded, and importing it costs about a second
# that a surface listing tools should not pay.
_PAI_EXCEPTIONS = "pydantic_ai.exceptions"


def retry_message(exc: Exception) -> str | None:
    """The model-readable message of a retryable tool error (RetriableError, TransientError,
    ModelRetry)."""
    if isinstance(exc, RetriableError | TransientError):
        return str(exc)
    pai = sys.modules.get(_PAI_EXCEPTIONS)
    if pai is not None and isinstance(exc, pai.ModelRetry):
        return str(exc.message)
    return None


def passes_through(exc: Exception) -> bool:
    """A deferral (CallDeferred, ApprovalRequired) that the surface handles itself."""
    pai = sys.modules.get(_PAI_EXCEPTIONS)
    return pai is not None and isinstance(exc, pai.CallDeferred | pai.ApprovalRequired)
