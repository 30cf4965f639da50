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

A claim has an owner (a token of its own, which the call's final row carries in its call id:
``<call id>#<token>``) and a lease, renewed by a thread of the claiming process while the call
runs (:data:`LEASE_SECONDS`). A key claimed and not settled is waited for, one lease at most,
in any process: settled meanwhile, its record answers; its lease still renewed after that wait,
the call is alive (in this process or another) and its replay is told to retry once it has
ended. A lease that ran out means the process died while the call ran, or after its row and
before its settle: the tool may have had its effect. An ``idempotent`` tool then runs again
(at once: it may); any other is not repeated (at most once). The audit trail is read first:
when the call has its row already (it ended before its process did: a row of its claim's call
id, tool, principal and arguments written since its claim, never a ``replayed`` one; a model's
tool call id repeats across runs and turns, the claim's token does not), the replay is
answered from that row (its result was not recorded) with a ``replayed`` row naming it, never
a second, contradictory ending; otherwise the call ends ``error`` with an ``interrupted`` row.
Either way the model is told, and the record is settled with that answer, so a later replay
gives the same one. The first answer recorded for a key is the one every later replay gets (a
settle never replaces it). A result is recorded as JSON text, a lone surrogate (a name read
from bytes that are not UTF-8) as its escape; one with no JSON form (a cycle) is recorded as an
error saying so, and the run that made it gets it all the same. A recorded row is read as
outside input: one that cannot be read (too deeply nested, an unknown outcome) is answered as
an error, not run again.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic_core import to_jsonable_python

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

LEASE_SECONDS = 10.0
"""How long a claim reads as alive after its owner last renewed it (every quarter of it, from
a thread: a tool that blocks its event loop does not let it lapse). A replay waits this long
at most for an unsettled claim: a call whose process died is judged dead that long after."""
_POLL = 0.2
"""Seconds between two looks at an unsettled claim a replay waits for."""


class _Leases:
    """The claims this process holds, their leases renewed by one daemon thread while any is
    held (it dies with the process: a killed process's leases run out)."""

    def __init__(self) -> None:
        self._held: dict[int, DurableCall] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._period = 0.0  # what the thread sleeps between renewals; 0.0: not sleeping yet

    def hold(self, durable: DurableCall) -> None:
        with self._lock:
            self._held[id(durable)] = durable
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._renew, name="toolcards-call-leases", daemon=True
                )
                self._thread.start()
        period = self._period
        if not period or period > LEASE_SECONDS / 4:  # a lease made shorter (a test's)
            self._wake.set()  # is renewed in time; otherwise the next renewal covers it

    def drop(self, durable: DurableCall) -> None:
        with self._lock:
            self._held.pop(id(durable), None)

    def _renew(self) -> None:
        while True:
            period = self._period = LEASE_SECONDS / 4
            self._wake.wait(period)
            self._wake.clear()
            with self._lock:
                held = list(self._held.values())
                if not held:
                    self._thread = None
                    self._period = 0.0
                    return
            until = time.time() + LEASE_SECONDS
            for durable in held:
                try:
                    durable.results.renew(durable.key, durable.owner, until)
                except Exception:  # the store is down: the lease may run out, as a dead one's
                    log.warning("could not renew the lease of call %s", durable.key, exc_info=True)


_leases = _Leases()


def _forked() -> None:  # a forked child holds none of its parent's claims, nor its thread
    global _leases
    _leases = _Leases()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


UNRECORDED = (
    "error: the result of this call could not be written as JSON (a cycle, bytes that are not "
    "UTF-8, nesting too deep); it is not run again"
)
"""What a replay of a call whose result could not be written as JSON is told."""
_jsonable = partial(to_jsonable_python, fallback=str)
_dumps = partial(json.dumps, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def _json(value: Any) -> str:
    """``value`` as compact JSON text, in its own order: models, dates, sets and keys that are
    not strings as pydantic-core writes them, other objects as their ``str``. A lone surrogate
    (a name read from bytes that are not UTF-8, which pydantic-core does not write) is written
    as its ``\\u`` escape: the text is UTF-8, as every store needs, and reads back as the
    same string."""
    try:
        text = _dumps(value)
    except TypeError:  # a key that is not a string
        text = _dumps(_jsonable(value))
    return storable(text)


def _recorded(result: ExecutionResult) -> tuple[Outcome, str, str | None]:
    """How ``result`` is recorded: its outcome, message and value as JSON text; a value with
    no JSON form as :data:`UNRECORDED` (the key is settled all the same)."""
    if not result.ok:
        return result.outcome, result.message, None
    try:
        return result.outcome, result.message, _json(result.value)
    except (TypeError, ValueError, RecursionError):
        log.warning("the result of %s has no JSON form; it is recorded as an error", result.tool_id)
        return Outcome.ERROR, UNRECORDED, None


@dataclass(slots=True)
class DurableCall:
    """One call of one durable run: its key in a :class:`CallResults` store and the token its
    claim is owned by; ``held`` once this call holds the key's claim, ``answered`` once an
    earlier claim answered it."""

    results: CallResults
    key: str
    held: bool = False
    answered: bool = False
    owner: str = field(default_factory=lambda: secrets.token_hex(8))

    async def recorded(self, call: Call, book: CallBook) -> ExecutionResult | None:
        """Before the gate: the answer an earlier claim of the key gives ``call``, ended
        through ``book`` (the call does not run); None when the call goes on to the gate."""
        earlier = self.results.find(self.key)
        return None if earlier is None else await self._answer(call, book, earlier)

    async def claim(self, call: Call, book: CallBook) -> ExecutionResult | None:
        """After the gate: claim the key for ``call``: None when it runs (then :meth:`settle`),
        else the answer of an earlier claim (made since :meth:`recorded`), ended through
        ``book``."""
        call.claim = self.owner  # its row's call id names this claim
        earlier = self._claim(call, time.time() + LEASE_SECONDS)
        if earlier is not None:
            call.claim = None
        answer = None if earlier is None else await self._answer(call, book, earlier)
        if answer is None:
            self.held = True
            _leases.hold(self)
        else:
            self.answered = True
        return answer

    def _claim(self, call: Call, lease_until: float = 0.0) -> CallRecord | None:
        assert call.cap is not None
        digest = call.called_digest or args_digest(call.args)  # an edit: the call as made
        who, row_id = call.identity.id, storable(call.row_id)  # as the audit keeps them
        return self.results.claim(
            self.key, call.cap.id, digest, who, row_id, owner=self.owner, lease_until=lease_until
        )

    async def _settled(self, earlier: CallRecord) -> CallRecord | None:
        """``earlier`` once settled or once its lease ran out, or as it stands after one lease
        (its owner still renews it: alive); None when its claim was dropped meanwhile."""
        import asyncio  # lazy: `toolcards list` imports this module and never runs asyncio

        deadline = time.time() + LEASE_SECONDS
        record: CallRecord | None = earlier
        while record is not None and not record.settled:
            if time.time() >= min(record.lease_until, deadline):
                break
            await asyncio.sleep(_POLL)
            record = self.results.find(self.key)
        return record

    async def _answer(
        self, call: Call, book: CallBook, earlier: CallRecord
    ) -> ExecutionResult | None:
        """What an earlier claim of the key answers ``call``; None when it runs anyway (its
        tool is idempotent, and the earlier call never ended)."""
        assert call.cap is not None
        if earlier.elsewhere:  # another team's run, recovered here: its row is not ours to read
            msg = (
                f"error: call {call.call_id} of {call.cap.id} belongs to a run another team "
                "started; it is not run here"
            )
            self._record(Outcome.ERROR, msg)
            return book.finish(call, Outcome.ERROR, msg)
        asked = (call.cap.id, call.called_digest or args_digest(call.args), call.identity.id)
        if (earlier.tool_id, earlier.args_digest, earlier.principal) != asked:
            msg = f"error: call {call.call_id} was already made with another tool or arguments"
            return book.finish(call, Outcome.ERROR, msg)
        if not earlier.settled and not call.cap.annotations.idempotent:
            waited = await self._settled(earlier)
            if waited is None:  # withdrawn before its tool ran (it waits for approval)
                msg = f"error: call {call.call_id} of {call.cap.id} is waiting; retry later"
                return book.finish(call, Outcome.ERROR, msg)
            earlier = waited
        if earlier.settled:
            return self._replayed(call, book, earlier)
        if call.cap.annotations.idempotent:
            return None  # it may run again: the same effect however often it runs
        if earlier.lease_until > time.time():  # renewed all along: alive, neither dead nor done
            msg = (
                f"error: call {earlier.call_id or call.call_id} of {call.cap.id} is still "
                "running; retry once it has ended (it is not run twice)"
            )
            return book.finish(call, Outcome.ERROR, msg)
        ended = book.ending_of(call, earlier.call_id, earlier.claimed_at, earlier.args_digest)
        if ended is None:
            msg = (
                f"error: {call.cap.id} was interrupted (its process ended while it ran) and may "
                "have had its effect; it is not run again"
            )
            self._record(Outcome.ERROR, msg)
            return book.finish(call, Outcome.ERROR, msg, audited=INTERRUPTED)
        if ended.outcome == INTERRUPTED:
            how = "was interrupted (its process ended while it ran) and may have had its effect"
        else:
            how = f"ran to its end ({ended.outcome}) before its process ended"
        msg = f"error: {call.cap.id} {how}; its result was not recorded, and it is not run again"
        self._record(Outcome.ERROR, msg)
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
            self._record(*_recorded(result))
        finally:
            _leases.drop(self)

    def _record(self, outcome: Outcome, message: str, value: str | None = None) -> None:
        """Settle the key with this answer (``message`` as every store keeps it: see
        :func:`storable`)."""
        self.results.settle(self.key, outcome.value, storable(message), value)

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
            self._record(Outcome.ERROR, msg)
        except Exception:  # the store is down: the claim stays, as a dead process's does
            log.warning("could not record how call %s ended", self.key, exc_info=True)
        finally:
            _leases.drop(self)

    def release(self) -> None:
        """Drop the claim (the call was withdrawn before its tool ran: not a result to
        replay)."""
        try:
            self.results.release(self.key)
        finally:
            _leases.drop(self)
