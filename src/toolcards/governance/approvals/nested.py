"""Nested approvals: a governed call made on behalf of a pydantic-ai run (by a sub-agent the
run's tool runs, or by a team member the tool sends a message to) can be answered by that run.

The run's delegating tool (``annotate(tool, delegates=True)``) runs with a :class:`CallerRun`
(the channel of :mod:`toolcards.core.nesting`). A call made under it that needs approval, by
another principal than the run's own caller, waits as every such call does: its request is
recorded in its broker, where the out-of-band inbox (the dashboard, ``toolcards approvals``)
can decide it. It also tells the channel, and the calling run sees the request as its own
deferred tool request (pydantic-ai's ``DeferredToolRequests``, answered in place by
``HandleDeferredToolCalls`` or after the run); its answer decides the waiting request in that
broker (:meth:`~toolcards.governance.approvals.decisions.ApprovalDecisions.answer_for_run`).
The first answer wins and is audited once; a later one changes nothing.

A caller never approves its own call: a call by the run's own principal is never asked of it.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from toolcards.core import nesting
from toolcards.core.approvals import ApprovalRequest, ApprovalState
from toolcards.core.identity import Identity
from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    ApprovalTimedOut,
    Approver,
    GrantedEdit,
)

__all__ = ["Asked", "CallerRun", "nested_approver"]


@dataclass(frozen=True, slots=True)
class Asked:
    """A waiting call's request, and the broker it waits in (where an answer decides it)."""

    request: ApprovalRequest
    broker: ApprovalBroker


class CallerRun:
    """The channel of one delegating tool call of a pydantic-ai run: the requests of calls
    made on its behalf that wait for a decision, and a signal to the run when one comes (from
    any thread)."""

    def __init__(self, caller: Identity, tool_id: str, call_id: str | None, timeout: float) -> None:
        self.caller = caller
        self.tool_id = tool_id
        self.call_id = call_id
        self.timeout = timeout
        """How long a call made on its behalf waits for an answer (seconds)."""
        self.token = nesting.remember(self)
        self._asked: list[Asked] = []
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        self._signal = asyncio.Event()

    def takes(self, principal: str) -> bool:
        """Whether a call of ``principal`` may be asked of this run (never the run's own)."""
        return principal != self.caller.id

    def ask(self, asked: Asked) -> None:
        """A call made on the run's behalf waits for ``asked`` (any thread)."""
        with self._lock:
            self._asked.append(asked)
        self._loop.call_soon_threadsafe(self._signal.set)

    async def asked(self) -> None:
        """Until a call asks (returns at once when one asked since the last :meth:`waiting`)."""
        await self._signal.wait()

    def waiting(self) -> list[Asked]:
        """The requests still pending, oldest first (the signal is reset)."""
        self._signal.clear()
        with self._lock:
            self._asked = [
                a for a in self._asked if a.broker.state(a.request) is ApprovalState.PENDING
            ]
            return list(self._asked)

    def answer(self, approved: bool, why: str = "", only: frozenset[str] | None = None) -> None:
        """Decide the waiting requests as the run's answer: those in ``only`` (the ids the run
        was shown), else every one (a denial stops them all). One already decided elsewhere
        keeps its decision; one the run was not shown waits on, to be shown next."""
        with self._lock:
            asked = [a for a in self._asked if only is None or a.request.approval_id in only]
            self._asked = [a for a in self._asked if a not in asked]
        for each in asked:
            each.broker.answer_for_run(
                each.request, approved=approved, run=self.caller, via=self.tool_id, why=why
            )


def nested_approver(run: CallerRun, broker: ApprovalBroker, inline: Approver | None) -> Approver:
    """The approver of a call made on ``run``'s behalf whose request lives in ``broker``: it
    tells the run, then waits for ``inline`` (an inbox approver of the member's team), or for
    a decision in ``broker`` (the run's answer, or the out-of-band inbox's)."""

    async def approve(request: ApprovalRequest) -> bool | GrantedEdit:
        run.ask(Asked(request, broker))
        if inline is not None:
            return await inline(request)
        state = await broker.wait(request, run.timeout)
        if state is ApprovalState.PENDING:
            raise ApprovalTimedOut(run.timeout)
        return state is ApprovalState.GRANTED

    return approve
