"""The delegating calls of a governed toolset: a tool that runs other agents
(``annotate(tool, delegates=True)``) runs as a task of its own, with its run's channel
(:class:`~toolcards.governance.approvals.nested.CallerRun`) in its context. When a call made
on its behalf waits for approval, the tool call is deferred to pydantic-ai
(``ApprovalRequired``, the waiting requests in its metadata, exact arguments included) while
the task waits, parked under its tool call id. The run's answer comes back as the same tool
call approved (the waiting requests are granted: the task goes on, and its result is the tool
call's), or denied (seen in the run's messages before its next step: the waiting requests are
denied and the task is cancelled). A parked call nobody answers within its wait is cancelled.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic_ai.exceptions import ApprovalRequired

from toolcards.core import nesting
from toolcards.core.identity import Identity
from toolcards.governance.approvals.nested import CallerRun

__all__ = ["DELEGATED_WAIT", "DelegatedCalls"]

_Parked = tuple[CallerRun, "asyncio.Future[Any]", frozenset[str], float]
"""A parked call: its run's channel, its task, the request ids the run was shown, since when."""

DELEGATED_WAIT = 300.0
"""How long a delegating call waits, parked, for its run's answer (seconds)."""
_MAX_PARKED = 1024


class DelegatedCalls:
    """The delegating calls of one governed toolset (and its per-run copies) that are parked
    while their run answers, by tool call id."""

    def __init__(self, wait: float = DELEGATED_WAIT) -> None:
        self.wait = wait
        self._parked: dict[str, _Parked] = {}
        self._lock = threading.Lock()

    async def run(
        self,
        call_id: str | None,
        approved: bool,
        caller: Identity,
        tool_id: str,
        start: Callable[[], Awaitable[Any]],
        conversation: str = "",
    ) -> Any:
        """The delegating call's result: started (``start()``, with the run's channel in its
        context), or resumed when ``approved`` names one parked by this conversation for this
        caller (another conversation, or another caller, naming its tool call id starts its
        own); raises ``ApprovalRequired`` while calls made on its behalf wait for the run."""
        key = f"{conversation}\0{call_id}" if call_id else ""
        parked = self._unpark(key, caller) if approved and key else None
        if parked is not None:
            run, task, shown, _ = parked
            run.answer(True, only=shown)  # what the run saw; a later request is shown next
        else:
            run = CallerRun(caller, tool_id, call_id, self.wait)
            token = nesting.calling_run.set(run)
            try:
                task = asyncio.ensure_future(start())
            finally:
                nesting.calling_run.reset(token)
        return await self._until_done_or_asked(key, run, task)

    def stop(self, call_id: str | None, caller: Identity, conversation: str, why: str) -> bool:
        """Deny and cancel ``caller``'s call parked under ``call_id`` in ``conversation``
        (an answer that cannot apply to it, such as an edit of work already running); False
        when none is parked there."""
        parked = self._unpark(f"{conversation}\0{call_id}", caller) if call_id else None
        if parked is None:
            return False
        run, task, _, _ = parked
        run.answer(False, why)
        task.cancel()
        return True

    def settle(self, messages: Sequence[Any], conversation: str = "") -> None:
        """Deny and cancel the parked calls the run's answer denied (a ``denied`` tool return
        of theirs in ``messages``, of this conversation), and those parked longer than their
        wait."""
        if not self._parked:
            return
        denied: dict[str, str] = {}
        for message in messages[-2:]:  # the answer is in the newest request
            for part in getattr(message, "parts", ()):
                if getattr(part, "outcome", None) == "denied":
                    call_id = getattr(part, "tool_call_id", "")
                    denied[f"{conversation}\0{call_id}"] = str(part.content)
        now = time.monotonic()
        with self._lock:
            ended = [
                key
                for key, (_, _, _, since) in self._parked.items()
                if key in denied or now - since > self.wait
            ]
            stopped = [(key, self._parked.pop(key)) for key in ended]
        for key, (run, task, _, _) in stopped:
            run.answer(False, denied.get(key, "nobody answered in time"))
            task.cancel()

    async def _until_done_or_asked(
        self, key: str, run: CallerRun, task: asyncio.Future[Any]
    ) -> Any:
        while True:
            signal = asyncio.ensure_future(run.asked())
            try:
                await asyncio.wait({task, signal}, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:  # the tool call itself is cancelled: so is its work
                signal.cancel()
                task.cancel()
                raise
            signal.cancel()
            if task.done():
                return task.result()
            waiting = run.waiting()
            if not waiting:  # decided meanwhile (the inbox): wait on
                continue
            self._park(key, run, task, frozenset(each.request.approval_id for each in waiting))
            raise ApprovalRequired(
                metadata={
                    "nested": [
                        {
                            **each.request.as_metadata(),
                            "exact_args": each.request.exact_args,
                            "via": run.tool_id,
                        }
                        for each in waiting
                    ]
                }
            )

    def _park(
        self, key: str, run: CallerRun, task: asyncio.Future[Any], shown: frozenset[str]
    ) -> None:
        with self._lock:
            if len(self._parked) >= _MAX_PARKED:
                oldest = min(self._parked, key=lambda k: self._parked[k][3])
                dropped = self._parked.pop(oldest)[1]
                dropped.cancel()
            self._parked[key] = (run, task, shown, time.monotonic())

    def _unpark(self, key: str, caller: Identity) -> _Parked | None:
        with self._lock:
            found = self._parked.get(key)
            if found is None or found[0].caller != caller:
                return None
            del self._parked[key]
        return found
