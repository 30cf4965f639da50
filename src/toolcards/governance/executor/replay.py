"""Durable replay, a step of the executor's pipeline: a call of a durable run (DBOS,
Temporal) runs once per durable call key.

A durable engine that recovers a run replays it from the start: recorded model responses come
back from its journal with the same tool call ids, and the run's id is replay-stable (DBOS:
``<workflow id>:<step>``). So ``core.identity.durable_call_key`` of the run id, the run step
and the tool call id names one call of one durable run, in every process that replays it.
Once the policy has decided that this principal may make this call now, the pipeline asks
:meth:`DurableCall.recorded`: a replay finds the record and is answered from it (the tool does
not run again) with its own audit row, ``replayed``, naming the recorded call. Otherwise the
call goes through the rate limit, the budgets and the approval gate, and only then
:meth:`DurableCall.claim` claims its key: the first claim runs the call and
:meth:`DurableCall.settle` records its outcome. So a call waiting for a human holds no claim: a
process killed while it waits leaves nothing that reads as a call that ran, and the recovered
run goes through the gate again (a grant made meanwhile lets it run). A call that ended before
its claim (rate limited, refused approval) is recorded too; a call waiting for approval is not.
A record answers only the principal that made it (the store is one team's): another principal
reusing the key is refused. A key another team claimed in the same table (a durable engine
recovered that team's run in this team's process) is refused, and nothing of it is read.

A key claimed but never settled means the process died while the call ran, or after its row and
before its settle: the tool may have had its effect. An ``idempotent`` tool then runs again;
any other is not repeated (at most once). The audit trail is read first: when the call has its
row already (it ended before its process did: a row of its call id, tool, principal and
arguments written since its claim, never a ``replayed`` one, as a model may reuse a tool call
id in a later turn), the replay is answered from that row (its result was not recorded) with a
``replayed`` row naming it, never a second, contradictory ending; otherwise the call ends
``error`` with an ``interrupted`` row. Either way the model is told, and the record is settled
with that answer, so a later replay gives the same one. A key whose call is still running in
this process is not judged dead: its replay is told to retry once the call has ended. The first
answer recorded for a key is the one every later replay gets (a settle never replaces it). A
recorded row is read as outside input: one that cannot be read (too deeply nested, an unknown
outcome) is answered as an error, not run again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic_core import to_json

from toolcards.core import outside_json
from toolcards.governance.executor.calls import (
    INTERRUPTED,
    REPLAYED,
    Call,
    CallBook,
    ExecutionResult,
)
from toolcards.governance.outcomes import Outcome
from toolcards.governance.redaction.redactor import args_digest, storable
from toolcards.stores.call_results import CallRecord, CallResults

log = logging.getLogger(__name__)

_running: set[tuple[int, str]] = set()
"""The keys (of a store, by its id) whose first claim runs its call in this process now."""


@dataclass(slots=True)
class DurableCall:
    """One call of one durable run: its key in a :class:`CallResults` store; ``held`` once
    this call holds the key's claim, ``answered`` once an earlier claim answered it."""

    results: CallResults
    key: str
    held: bool = False
    answered: bool = False

    def recorded(self, call: Call, book: CallBook) -> ExecutionResult | None:
        """Before the gate: the answer an earlier claim of the key gives ``call``, ended
        through ``book`` (the call does not run); None when the call goes on to the gate."""
        earlier = self.results.find(self.key)
        return None if earlier is None else self._answer(call, book, earlier)

    def claim(self, call: Call, book: CallBook) -> ExecutionResult | None:
        """After the gate: claim the key for ``call``: None when it runs (then :meth:`settle`),
        else the answer of an earlier claim (made since :meth:`recorded`), ended through
        ``book``."""
        earlier = self._claim(call)
        answer = None if earlier is None else self._answer(call, book, earlier)
        if answer is None:
            self.held = True
            _running.add((id(self.results), self.key))
        else:
            self.answered = True
        return answer

    def _claim(self, call: Call) -> CallRecord | None:
        assert call.cap is not None
        digest = call.called_digest or args_digest(call.args)  # an edit: the call as made
        who, call_id = call.identity.id, storable(call.call_id or "")  # as the audit keeps it
        return self.results.claim(self.key, call.cap.id, digest, who, call_id)

    def _answer(self, call: Call, book: CallBook, earlier: CallRecord) -> ExecutionResult | None:
        """What an earlier claim of the key answers ``call``; None when it runs anyway (its
        tool is idempotent, and the earlier call never ended)."""
        assert call.cap is not None
        if earlier.elsewhere:  # another team's run, recovered here: its row is not ours to read
            msg = (
                f"error: call {call.call_id} of {call.cap.id} belongs to a run another team "
                "started; it is not run here"
            )
            self.results.settle(self.key, Outcome.ERROR.value, msg, None)
            return book.finish(call, Outcome.ERROR, msg)
        asked = (call.cap.id, call.called_digest or args_digest(call.args), call.identity.id)
        if (earlier.tool_id, earlier.args_digest, earlier.principal) != asked:
            msg = f"error: call {call.call_id} was already made with another tool or arguments"
            return book.finish(call, Outcome.ERROR, msg)
        if earlier.settled:
            return self._replayed(call, book, earlier)
        if call.cap.annotations.idempotent:
            return None  # it may run again: the same effect however often it runs
        if (id(self.results), self.key) in _running:  # alive here: neither dead nor done
            msg = (
                f"error: call {earlier.call_id or call.call_id} of {call.cap.id} is still "
                "running; retry once it has ended (it is not run twice)"
            )
            return book.finish(call, Outcome.ERROR, msg)
        ended = book.ending_of(call, earlier.claimed_at, earlier.args_digest)
        if ended is None:
            msg = (
                f"error: {call.cap.id} was interrupted (its process ended while it ran) and may "
                "have had its effect; it is not run again"
            )
            self.results.settle(self.key, Outcome.ERROR.value, msg, None)
            return book.finish(call, Outcome.ERROR, msg, audited=INTERRUPTED)
        if ended.outcome == INTERRUPTED:
            how = "was interrupted (its process ended while it ran) and may have had its effect"
        else:
            how = f"ran to its end ({ended.outcome}) before its process ended"
        msg = f"error: {call.cap.id} {how}; its result was not recorded, and it is not run again"
        self.results.settle(self.key, Outcome.ERROR.value, msg, None)
        note = f"answered from the audit row of call {ended.call_id} ({ended.outcome})"
        return book.finish(call, Outcome.ERROR, msg, note, audited=REPLAYED)

    def _replayed(self, call: Call, book: CallBook, earlier: CallRecord) -> ExecutionResult:
        """``call`` answered from its settled record (read as outside input: a row that cannot
        be read is answered as an error, and the call is not run again)."""
        assert call.cap is not None
        note = f"answered from the recorded result of call {earlier.call_id or call.call_id}"
        try:
            value = None if earlier.value is None else outside_json.loads(earlier.value)
            outcome = Outcome(earlier.outcome or "")
            if outcome is Outcome.NEEDS_APPROVAL:  # never recorded: not a result
                raise ValueError(outcome)
        except ValueError:  # too deep, not JSON, an outcome that is none
            log.warning("the recorded result of %s %s cannot be read", call.cap.id, call.call_id)
            msg = f"error: the recorded result of {call.cap.id} cannot be read; it is not run again"
            return book.finish(call, Outcome.ERROR, msg, note, audited=REPLAYED)
        log.info("replayed %s %s from its recorded result", call.cap.id, self.key)
        return book.finish(
            call, outcome, earlier.message or "", note, value=value, audited=REPLAYED
        )

    def settle(self, call: Call, result: ExecutionResult) -> None:
        """Record how the call ended. One that ended before its claim (rate limited, refused
        approval) is recorded when the key is still free; a call waiting for approval is not
        (the approved call runs under the same key), nor one an earlier claim answered."""
        if not self.held:
            if self.answered or result.outcome is Outcome.NEEDS_APPROVAL:
                return
            earlier = self._claim(call)
            if earlier is not None and not earlier.elsewhere:  # that claim's answer stays
                return
        try:
            value = to_json(result.value, fallback=str).decode() if result.ok else None
            self.results.settle(self.key, result.outcome.value, result.message, value)
        finally:
            _running.discard((id(self.results), self.key))

    def stopped(self, call: Call) -> None:
        """The call was cancelled or interrupted. Before its claim nothing is recorded; before
        its tool started the claim is dropped (a replay runs it); after, the tool may have had
        its effect, so a replay answers that instead of running it again, unless the tool is
        idempotent."""
        assert call.cap is not None
        if not self.held:
            return
        if not call.started or call.cap.annotations.idempotent:
            self.release()
            return
        msg = (
            f"error: {call.cap.id} was stopped (cancelled or interrupted) while it ran and may "
            "have had its effect; it is not run again"
        )
        try:
            self.results.settle(self.key, Outcome.ERROR.value, msg, None)
        except Exception:  # the store is down: the claim stays, as a dead process's does
            log.warning("could not record how call %s ended", self.key, exc_info=True)
        finally:
            _running.discard((id(self.results), self.key))

    def release(self) -> None:
        """Drop the claim (the call was withdrawn before its tool ran: not a result to
        replay)."""
        try:
            self.results.release(self.key)
        finally:
            _running.discard((id(self.results), self.key))
