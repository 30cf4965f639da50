"""The governed executor: one pipeline for every call from every surface.

identity -> ACL decision -> rate limit -> approval -> argument validation -> run with a
timeout -> error mapping -> audit. A surface resolves the caller itself (never from tool
arguments), calls :meth:`Executor.call` and maps the :class:`ExecutionResult` outcome::

    result = await executor.call(tool_id, raw_args, identity, surface="mcp",
                                 approver=ask_human_or_None, call_id=request_id)

    outcome         pydantic-ai (GovernedToolset)      MCP / CLI (suggested)
    ok              the value                          the value
    denied          tool result "denied: ..."          error result with result.message
    invalid_args    ModelRetry(message)                error result (client fixes the call)
    retry           ModelRetry(message)                error result
    rate_limited    tool result "rate limited: ..."    error result; result.retry_after
    needs_approval  ApprovalRequired(metadata)         error result (fail closed), or ask the
                                                       human, ``approvals.grant(call_id)`` and
                                                       call again with the same call_id
    error           tool result "error: ..."           error result with result.message

``result.message`` is safe to show a model: no stack trace, no secrets, no other rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import types
from collections.abc import Coroutine, Generator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry

from toolcards.core.errors import RetriableError
from toolcards.governance.approvals import ApprovalBroker, ApprovalRequest, Approver
from toolcards.governance.audit import AuditLog
from toolcards.governance.capability import Capability, CapabilityRegistry, Invoke
from toolcards.governance.identity import ANONYMOUS, Identity
from toolcards.governance.policy import Decision, Policy
from toolcards.governance.ratelimit import RateLimiter
from toolcards.governance.redact import args_digest, redact_text

try:  # lets a timeout abandon a sync tool's worker thread instead of waiting for it
    from pydantic_ai._utils import abandon_threads_on_cancel as _abandon_threads
except ImportError:  # pragma: no cover - older pydantic-ai
    _abandon_threads = contextlib.nullcontext  # type: ignore[assignment]

log = logging.getLogger(__name__)

_PASSTHROUGH = (CallDeferred, ApprovalRequired)
_UNKNOWN = Decision("deny", "unknown tool")


class Outcome(StrEnum):
    OK = "ok"
    DENIED = "denied"
    INVALID_ARGS = "invalid_args"
    RETRY = "retry"
    RATE_LIMITED = "rate_limited"
    NEEDS_APPROVAL = "needs_approval"
    ERROR = "error"


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

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


class Executor:
    """Runs capabilities under a policy. Surface-agnostic: the pydantic-ai toolset, the MCP
    server and the CLI all call :meth:`call` (or :meth:`run` with their own invoke)."""

    def __init__(
        self,
        registry: CapabilityRegistry,
        policy: Policy,
        *,
        audit: AuditLog | None = None,
        approvals: ApprovalBroker | None = None,
        rate_limiter: RateLimiter | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.audit = audit
        self.approvals = approvals or ApprovalBroker()
        self.rate_limiter = rate_limiter or RateLimiter()
        self.timeout = timeout

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
        cap = self.registry.get(tool_id)
        if cap is None:
            return self._refuse(tool_id, args, identity or ANONYMOUS, surface, call_id)
        return await self.run(
            cap,
            args,
            identity,
            surface=surface,
            approver=approver,
            call_id=call_id,
            approved=approved,
        )

    async def run(
        self,
        cap: Capability,
        args: Mapping[str, Any] | None,
        identity: Identity | None = None,
        *,
        surface: str = "python",
        approver: Approver | None = None,
        call_id: str | None = None,
        approved: bool = False,
        invoke: Invoke | None = None,
        validated: bool = False,
    ) -> ExecutionResult:
        """The pipeline for one capability. ``invoke`` replaces ``cap.invoke`` (a surface that
        calls the tool itself); ``validated=True`` skips validation (already done)."""
        start = time.perf_counter()
        who = identity if identity is not None else ANONYMOUS
        tool_id = cap.id
        if args is None:
            args = {}
        elif not isinstance(args, dict):
            if not isinstance(args, Mapping):
                msg = f"invalid arguments for {tool_id}: expected an object"
                return self._done(
                    Outcome.INVALID_ARGS, cap, {}, who, surface, call_id, None, start, msg
                )
            args = dict(args)
        decision, limits = self.policy.evaluate(who, tool_id, args)
        if decision.effect == "deny":
            msg = f"denied: {tool_id} is not permitted for {who.id}"
            return self._done(
                Outcome.DENIED, cap, args, who, surface, call_id, decision, start, msg
            )
        wait = self.rate_limiter.acquire(limits, who.id, tool_id) if limits else 0.0
        if wait > 0.0:
            msg = f"rate limited: {tool_id} may be called again in {wait:.1f} s"
            result = self._done(
                Outcome.RATE_LIMITED, cap, args, who, surface, call_id, decision, start, msg
            )
            result.retry_after = wait
            return result
        if decision.effect == "approve" or cap.annotations.requires_approval:
            waited_from = time.perf_counter()
            gate = await self._approval(
                cap, args, who, surface, approver, call_id, approved, decision
            )
            if gate is not None:
                gate_result = self._done(
                    gate[0], cap, args, who, surface, call_id, decision, start, gate[1]
                )
                gate_result.approval = gate[2]
                return gate_result
            start += time.perf_counter() - waited_from  # a human's time is not the tool's
        parsed = args
        if not validated and cap.validator is not None:
            try:
                parsed = cap.validate(args)
            except ValidationError as exc:
                msg = f"invalid arguments for {tool_id}: {_errors(exc)}"
                return self._done(
                    Outcome.INVALID_ARGS, cap, args, who, surface, call_id, decision, start, msg
                )
        # the audit keeps the arguments as received, so every row of one call has one digest
        return await self._execute(
            cap, parsed, args, who, surface, call_id, decision, start, invoke or cap.invoke
        )

    async def _approval(
        self,
        cap: Capability,
        args: dict[str, Any],
        who: Identity,
        surface: str,
        approver: Approver | None,
        call_id: str | None,
        approved: bool,
        decision: Decision,
    ) -> tuple[Outcome, str, ApprovalRequest | None] | None:
        """None when the call may proceed; else (outcome, message, pending request)."""
        digest = args_digest(args)
        if call_id is not None and self.approvals.consume(
            call_id, tool_id=cap.id, args_digest=digest, principal=who.id, approved=approved
        ):
            return None
        reason = decision.reason if decision.effect == "approve" else "the tool requires approval"
        request = self.approvals.request(
            tool_id=cap.id,
            args=args,
            args_digest=digest,
            identity=who,
            reason=reason,
            sensitive=tuple(cap.sensitive),
            call_id=call_id,
            surface=surface,
        )
        if approver is None:
            msg = f"approval required: {cap.id} needs a human's approval before it runs"
            return Outcome.NEEDS_APPROVAL, msg, request
        try:
            ok = await approver(request)
        except Exception:
            log.exception("approver failed for %s", cap.id)
            ok = False
        self.approvals.deny(request.call_id)
        if ok is True:
            return None
        return Outcome.DENIED, f"denied: approval for {cap.id} was refused", None

    async def _execute(
        self,
        cap: Capability,
        parsed: dict[str, Any],
        args: dict[str, Any],
        who: Identity,
        surface: str,
        call_id: str | None,
        decision: Decision,
        start: float,
        invoke: Invoke,
    ) -> ExecutionResult:
        timeout = cap.timeout if cap.timeout is not None else self.timeout
        try:
            if timeout is None:
                value = await invoke(parsed)
            elif cap.abandon_threads:
                with _abandon_threads():
                    value = await _with_deadline(invoke(parsed), timeout)
            else:
                value = await _with_deadline(invoke(parsed), timeout)
        except (RetriableError, ModelRetry) as exc:
            error = str(exc.message if isinstance(exc, ModelRetry) else exc)
            outcome, msg = Outcome.RETRY, redact_text(error)
        except _PASSTHROUGH:
            self._record(cap, args, who, surface, call_id, decision, "deferred", start, None)
            raise
        except TimeoutError:
            outcome, msg = Outcome.ERROR, f"error: {cap.id} timed out after {timeout:g} s"
            error = "timeout"
        except Exception as exc:
            outcome, msg = Outcome.ERROR, f"error: {cap.id} failed ({type(exc).__name__})"
            error = f"{type(exc).__name__}: {exc}"
        else:
            self._record(cap, args, who, surface, call_id, decision, "ok", start, None)
            return ExecutionResult(Outcome.OK, cap.id, value=value, decision=decision)
        return self._done(outcome, cap, args, who, surface, call_id, decision, start, msg, error)

    # -- results and audit ------------------------------------------------------------------

    def _refuse(
        self,
        tool_id: str,
        args: Mapping[str, Any] | None,
        who: Identity,
        surface: str,
        call_id: str | None,
    ) -> ExecutionResult:
        msg = f"denied: {tool_id} is not permitted for {who.id}"
        self._write(
            who,
            surface,
            tool_id,
            call_id,
            args or {},
            (),
            "deny",
            "unknown tool",
            "denied",
            0.0,
            None,
        )
        return ExecutionResult(Outcome.DENIED, tool_id, message=msg, decision=_UNKNOWN)

    def _done(
        self,
        outcome: Outcome,
        cap: Capability,
        args: Mapping[str, Any],
        who: Identity,
        surface: str,
        call_id: str | None,
        decision: Decision | None,
        start: float,
        message: str,
        error: str | None = None,
    ) -> ExecutionResult:
        self._record(
            cap, args, who, surface, call_id, decision, outcome.value, start, error or message
        )
        return ExecutionResult(outcome, cap.id, message=message, decision=decision)

    def _record(
        self,
        cap: Capability,
        args: Mapping[str, Any],
        who: Identity,
        surface: str,
        call_id: str | None,
        decision: Decision | None,
        outcome: str,
        start: float,
        error: str | None,
    ) -> None:
        if self.audit is None:
            return
        effect = decision.effect if decision is not None else "none"
        reason = decision.reason if decision is not None else None
        duration = time.perf_counter() - start
        self._write(
            who,
            surface,
            cap.id,
            call_id,
            args,
            tuple(cap.sensitive),
            effect,
            reason,
            outcome,
            duration,
            error,
        )

    def _write(
        self,
        who: Identity,
        surface: str,
        tool_id: str,
        call_id: str | None,
        args: Mapping[str, Any],
        sensitive: tuple[str, ...],
        effect: str,
        reason: str | None,
        outcome: str,
        duration: float,
        error: str | None,
    ) -> None:
        """Append one audit row (nothing without an audit log)."""
        if self.audit is None:
            return
        self.audit.record(
            (
                time.time(),
                who.id,
                who.type,
                who.roles,
                surface,
                tool_id,
                call_id,
                dict(args),
                sensitive,
                effect,
                reason,
                outcome,
                duration,
                error,
            )
        )


async def _with_deadline(coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
    """Await ``coro`` under a deadline. The coroutine is started inline first: one that
    finishes without suspending (no I/O, nothing to wait for) needs no timer at all."""
    try:
        pending = coro.send(None)
    except StopIteration as done:
        return done.value
    except BaseException:
        coro.close()
        raise
    async with asyncio.timeout(timeout):
        return await _resume(coro, pending)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], pending: Any) -> Generator[Any, Any, Any]:
    """Go on driving a coroutine that was started by hand and suspended on ``pending``."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                pending = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as done:
                return done.value


def _errors(exc: ValidationError) -> str:
    """Compact validation errors without echoing input values (they may hold secrets)."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:8]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)
