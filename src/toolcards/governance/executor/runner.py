"""The executor's last step: an admitted call's tool, run between its guardrails.

:class:`Runner` runs the input guardrails, then the tool itself (within the call's deadline,
with the caller, the governed call and the idempotency key of its writes set for it), then the
output guardrails, and maps what the tool raised to an outcome (see :mod:`..guardrails`).

The tool's deadline is also the bound of the actor asks it makes (:data:`calling_deadline`): an
ask waits as long as the call may, and a second more, so the call's own deadline is the one
that answers, and its "timed out after N s" is true.

A tool that asks for approval itself (pydantic-ai's ``ApprovalRequired``) on a call the gate
did not approve raises :class:`ApprovalAsked`: the executor asks through its gate, as for a
call the policy says ``approve``, and runs it again, approved (:attr:`GoverningCall.approved`).

Deadlines, on public asyncio only: :func:`with_deadline` starts the tool's coroutine inline
(one that finishes without suspending needs no timer) and cancels it at the deadline, waiting
for it to unwind; :func:`abandoning_deadline` runs it as a task and stops waiting at the
deadline: a sync tool that pydantic-ai runs in a worker thread cannot be interrupted, so its
thread runs to completion in the background, its result discarded, and the call answers "timed
out" at the deadline instead of when the thread returns.
"""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Coroutine, Generator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolcards.core.actors import calling_call_key, calling_deadline
from toolcards.core.errors import ToolcardsError, ToolNotConfigured
from toolcards.core.identity import Identity, calling_principal
from toolcards.governance import guardrails, telemetry
from toolcards.governance.capability import Invoke
from toolcards.governance.executor.calls import (
    TIMEOUT,
    Call,
    CallBook,
    ExecutionResult,
    passes_through,
    retry_message,
)
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Policy

if TYPE_CHECKING:
    import asyncio

__all__ = ["ApprovalAsked", "GoverningCall", "Runner", "abandoned_count", "governing_call"]


class ApprovalAsked(ToolcardsError):
    """The tool asked for approval itself on a call nobody approved (no row yet: the
    executor asks through its gate, whose answer ends the call or runs it again)."""


@dataclass(frozen=True, slots=True)
class GoverningCall:
    """One governed call while its tool runs: what a tool needs to govern work done on the
    call's behalf (an MCP server's requests to the client while its tool runs)."""

    executor: Any
    """The :class:`~toolcards.governance.executor.pipeline.Executor` running the call (its
    policy, audit log and approvals; not imported here: the executor imports this module)."""
    identity: Identity
    surface: str
    call_id: str | None
    tool_id: str
    approved: bool = False
    """Its gate approved this exact call (a human's yes, or a grant): the tool sees it
    approved (pydantic-ai's ``tool_call_approved``) and no guardrail rewrites it. Never the
    surface's word alone: a yes to other arguments than these must not run them."""


governing_call: ContextVar[GoverningCall | None] = ContextVar(
    "toolcards_governing_call", default=None
)
"""The governed call whose tool runs in this context (None outside one)."""


class Runner:
    """Runs admitted calls: ``hooks`` (the guardrails every call passes after the policy),
    the tool within the call's deadline, and the ending of each (through ``book``)."""

    def __init__(self, book: CallBook, hooks: guardrails.Hooks) -> None:
        self.book = book
        self.hooks = hooks
        self._hooked = bool(hooks)

    async def run(
        self, call: Call, invoke: Invoke, policy: Policy, governing: GoverningCall
    ) -> ExecutionResult:
        """The input hooks, the tool, the output hooks: the call's result. ``governing`` is
        set for the tool (and the hooks) while they run."""
        token = governing_call.set(governing)
        try:
            if not self._hooked:
                return await self._tool(call, invoke, call.timeout, governing.approved)
            return await self._hooked_run(call, invoke, policy, governing.approved)
        finally:
            governing_call.reset(token)

    async def _hooked_run(
        self, call: Call, invoke: Invoke, policy: Policy, approved: bool
    ) -> ExecutionResult:
        cap, decision = call.cap, call.decision
        assert cap is not None and decision is not None
        before, after = self.hooks.for_tool(cap.id)
        ctx = guardrails.context(
            cap.id, call.identity, call.args, call.call_id, call.surface, decision,
            call.timeout, call.redactor, call.sensitive,
        )  # fmt: skip
        changed: tuple[str, ...] = ()
        if before:
            # a human approved it (or an approver's edit runs): its arguments stay as approved
            asked = approved or call.edit_runs
            recheck = guardrails.rechecker(policy, cap, call.identity, decision, asked)
            checked = await guardrails.check_input(before, ctx, recheck)
            if isinstance(checked, guardrails.Refusal):
                return self._refused(call, checked)
            if checked.value[1] is not None:
                call.parsed = checked.value[1]
            changed = checked.changed
        result = await self._tool(call, invoke, ctx.remaining(), approved, ending=False)
        if not result.ok:
            return result
        value = result.value
        if after:
            checked = await guardrails.check_output(after, ctx, value)
            if isinstance(checked, guardrails.Refusal):
                return self._refused(call, checked)
            value, changed = checked.value, changed + checked.changed
        if changed:
            call.hook = ",".join(changed)
        return self.book.finish(call, Outcome.OK, "", value=value)

    def _refused(self, call: Call, refusal: guardrails.Refusal) -> ExecutionResult:
        telemetry.event(call.span, "toolcards.refused", hook=refusal.hook)
        call.hook = refusal.hook
        return self.book.finish(call, Outcome.REFUSED, refusal.message, refusal.error)

    async def _tool(
        self,
        call: Call,
        invoke: Invoke,
        timeout: float | None,
        approved: bool,
        *,
        ending: bool = True,
    ) -> ExecutionResult:
        """Run the tool within ``timeout``. ``ending=False``: an OK result does not end the
        call yet (its output hooks still run). ``approved``: the gate approved the call, so
        the tool asking for approval again is its failure, not a question for a human."""
        cap = call.cap
        assert cap is not None and call.parsed is not None
        book = self.book
        principal = calling_principal.set(call.identity)  # who writes, for the tool to record
        writes = calling_call_key.set(call.key_of_writes())
        bound = calling_deadline.set(None if timeout is None else time.monotonic() + timeout)
        call.started = True
        try:
            if timeout is None:
                value = await invoke(call.parsed)
            elif cap.abandon_threads:
                value = await abandoning_deadline(invoke(call.parsed), timeout)
            else:
                value = await with_deadline(invoke(call.parsed), timeout)
        except Exception as exc:
            retry = retry_message(exc)
            if retry is not None:
                return book.finish(call, Outcome.RETRY, call.redactor.text(retry), retry)
            if _asks_approval(exc):
                if not approved:
                    raise ApprovalAsked from None
                msg = f"error: {cap.id} asked for approval again after it was approved"
                return book.finish(call, Outcome.ERROR, msg)
            if passes_through(exc):
                book.end(call, "deferred", None)
                raise
            if isinstance(exc, TimeoutError) and call.timeout is not None:
                why = f"timed out after {call.timeout:g} s"
                msg = (
                    f"error: {cap.id} {why}; what it started may still complete: read before "
                    "you call it again"
                )
                return book.finish(call, Outcome.ERROR, msg, why, audited=TIMEOUT)
            if isinstance(exc, ToolNotConfigured):  # its message names what to set
                return book.finish(call, Outcome.ERROR, f"error: {call.redactor.text(str(exc))}")
            msg = f"error: {cap.id} failed ({type(exc).__name__})"
            return book.finish(call, Outcome.ERROR, msg, f"{type(exc).__name__}: {_text(exc)}")
        except BaseException as exc:  # cancelled or interrupted: the row, then on its way
            book.ended_by(call, exc)
            raise
        finally:
            calling_deadline.reset(bound)
            calling_call_key.reset(writes)
            calling_principal.reset(principal)
        if not ending:
            return ExecutionResult(Outcome.OK, cap.id, value=value, call_id=call.call_id)
        return book.finish(call, Outcome.OK, "", value=value)


# -- deadlines ------------------------------------------------------------------------------

_ABANDONED: set[asyncio.Task[Any]] = set()
"""Tasks given up at their deadline, held until they end so they are not collected early."""


async def with_deadline(coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
    """Await ``coro`` under a deadline, cancelling it (and waiting for it) when it passes."""
    try:
        pending = coro.send(None)
    except StopIteration as done:
        return done.value
    except BaseException:
        coro.close()
        raise
    import asyncio  # lazy: ~4x python -c pass; listing tools never loads it

    async with asyncio.timeout(timeout):
        return await _resume(coro, pending)


async def abandoning_deadline(coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
    """Await ``coro`` under a deadline; when it passes (or the caller is cancelled), cancel
    the coroutine's task without waiting for it and raise at once."""
    import asyncio  # lazy: ~4x python -c pass; listing tools never loads it

    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:
        _abandon(task)
        raise
    if not done:
        _abandon(task)
        raise TimeoutError(f"the tool did not finish within {timeout:g} s")
    return task.result()


def abandoned_count() -> int:
    """How many abandoned tasks have not ended yet (their threads still run)."""
    return len(_ABANDONED)


def _abandon(task: asyncio.Task[Any]) -> None:
    task.cancel()
    if task.done():
        _consume(task)
        return
    _ABANDONED.add(task)
    task.add_done_callback(_consume)


def _consume(task: asyncio.Task[Any]) -> None:
    """Retrieve an abandoned task's ending so asyncio does not report it as never retrieved."""
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()


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


def _asks_approval(exc: Exception) -> bool:
    """pydantic-ai's ``ApprovalRequired`` (looked up, never imported: see
    :func:`~.calls.passes_through`)."""
    pai = sys.modules.get("pydantic_ai.exceptions")
    return pai is not None and isinstance(exc, pai.ApprovalRequired)


def _text(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when the exception cannot say itself (its ``__str__``
    raises): a tool's failure ends as its call's error, never as another exception."""
    try:
        return str(exc)
    except Exception:
        return "(its message could not be read)"
