"""Durable replay, a step of the executor's pipeline: a call of a durable run (DBOS,
Temporal) runs once per durable call key.

A durable engine that recovers a run replays it from the start: recorded model responses come
back from its journal with the same tool call ids, and the run's id is replay-stable (DBOS:
``<workflow id>:<step>``). So ``core.identity.durable_call_key`` of the run id and the tool call
id names one call of one durable run, in every process that replays it. The pipeline asks
:meth:`DurableCall.claim` once the policy has decided that this principal may make this call
now: the first claim runs the call and :meth:`DurableCall.settle` records its outcome; a
replay finds the record and is answered from it (the tool does not run again) with its own
audit row, ``replayed``, naming the recorded call. A record answers only the principal that
made it (the store is one team's): another principal reusing the key is refused.

A key claimed but never settled means the process died while the call ran, or after its
row and before its settle: the tool may have had its effect. An ``idempotent`` tool then runs
again; any other is not repeated (at most once). The audit trail is read first: when the call
has its row already (it ended before its process did), the replay is answered from that row
(its result was not recorded) with a ``replayed`` row naming it, never a second, contradictory
ending; otherwise the call ends ``error`` with an ``interrupted`` row. Either way the model is
told, and the record is settled with that answer, so a later replay gives the same one.
A key whose call is still running in this process is not judged dead: its replay is told
to retry once the call has ended. The first answer recorded for a key is the one every later
replay gets (a settle never replaces it).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pydantic_core import to_json

from toolcards.governance.executor.calls import (
    INTERRUPTED,
    REPLAYED,
    Call,
    CallBook,
    ExecutionResult,
)
from toolcards.governance.outcomes import Outcome
from toolcards.governance.redaction.redactor import args_digest
from toolcards.stores.call_results import CallResults

log = logging.getLogger(__name__)

_running: set[tuple[int, str]] = set()
"""The keys (of a store, by its id) whose first claim runs its call in this process now."""


@dataclass(frozen=True, slots=True)
class DurableCall:
    """One call of one durable run: its key in a :class:`CallResults` store."""

    results: CallResults
    key: str

    def claim(self, call: Call, book: CallBook) -> ExecutionResult | None:
        """Claim the key for ``call``: None when this claim is the first (the call runs, then
        :meth:`settle`), else the answer of the earlier claim, ended through ``book``."""
        assert call.cap is not None
        digest = args_digest(call.args)
        who = call.identity.id
        earlier = self.results.claim(self.key, call.cap.id, digest, who, call.call_id)
        if earlier is None:
            _running.add((id(self.results), self.key))
            return None
        if (earlier.tool_id, earlier.args_digest, earlier.principal) != (call.cap.id, digest, who):
            msg = f"error: call {call.call_id} was already made with another tool or arguments"
            return book.finish(call, Outcome.ERROR, msg)
        if earlier.settled:
            log.info("replayed %s %s from its recorded result", call.cap.id, self.key)
            value = json.loads(earlier.value) if earlier.value is not None else None
            note = f"answered from the recorded result of call {earlier.call_id or call.call_id}"
            outcome = Outcome(earlier.outcome or Outcome.ERROR.value)
            message = earlier.message or ""
            return book.finish(call, outcome, message, note, value=value, audited=REPLAYED)
        if call.cap.annotations.idempotent:
            return None  # it may run again: the same effect however often it runs
        if (id(self.results), self.key) in _running:  # alive here: neither dead nor done
            msg = (
                f"error: call {earlier.call_id or call.call_id} of {call.cap.id} is still "
                "running; retry once it has ended (it is not run twice)"
            )
            return book.finish(call, Outcome.ERROR, msg)
        ended = book.ending_of(call, earlier.claimed_at)
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

    def settle(self, result: ExecutionResult) -> None:
        """Record how the claimed call ended; a call waiting for approval is not an ending
        (the approved call runs under the same key)."""
        if result.outcome is Outcome.NEEDS_APPROVAL:
            self.release()
            return
        try:
            value = to_json(result.value, fallback=str).decode() if result.ok else None
            self.results.settle(self.key, result.outcome.value, result.message, value)
        finally:
            _running.discard((id(self.results), self.key))

    def stopped(self, call: Call) -> None:
        """The call was cancelled or interrupted. Before its tool started the claim is dropped
        (a replay runs it); after, the tool may have had its effect, so a replay answers that
        instead of running it again, unless the tool is idempotent."""
        assert call.cap is not None
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
        """Drop the claim (the call was withdrawn or deferred: not a result to replay)."""
        try:
            self.results.release(self.key)
        finally:
            _running.discard((id(self.results), self.key))
