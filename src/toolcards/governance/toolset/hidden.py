"""The calls a model makes to governed tools hidden from it, whose rows the governed toolset
writes itself: pydantic-ai answers a name it was not offered ("Unknown tool name") and never
calls the toolset (see :class:`~.governed.GovernedToolset`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import anyio
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart

from toolcards.core.identity import Identity, joined_key
from toolcards.governance.audit.log import AuditLog, AuditRecord, made_by
from toolcards.governance.outcomes import Outcome
from toolcards.governance.redaction.redactor import Redactor, storable
from toolcards.stores.audit_sql import KEYED

log = logging.getLogger(__name__)

_MAX_CALLS = 4096  # keys remembered as written by this process
_MAX_ROWS = 100
"""Hidden calls of one response written a row each (a model picks how many calls a response
makes); the calls past them share one row (:meth:`Unwritten.more_record`)."""
_WAIT = 1.0
"""Seconds a look-up waits for the audit log (its writer may be waiting for another
process's lock): past them, the calls count as unwritten."""
MORE_HIDDEN_CALLS = "hidden_calls"
"""The tool of the row shared by the hidden calls of a response past :data:`_MAX_ROWS`."""

Unanswered = tuple[ModelResponse | None, list[tuple[int, ToolCallPart]]]
"""The newest response of a run, and its calls no toolset was offered, with their places."""


class Unwritten(NamedTuple):
    """The hidden calls of one response whose rows are to be written."""

    calls: list[tuple[ToolCallPart, str]]
    """The calls written a row each, each with its row's key."""
    more: list[ToolCallPart]
    """The calls past :data:`_MAX_ROWS` (empty: none, or their shared row is written)."""
    more_key: str
    """The key of their shared row."""

    def more_record(self, identity: Identity, surface: str, redactor: Redactor) -> AuditRecord:
        """The row of :attr:`more`: how many calls, and the tools they named."""
        count = len(self.more)
        return AuditRecord(
            time.time(),
            *made_by(identity),
            surface=surface,
            tool=MORE_HIDDEN_CALLS,
            call_id=None,
            args={"calls": count, "tools": sorted({part.tool_name for part in self.more})},
            decision="deny",
            outcome=Outcome.UNKNOWN_TOOL.value,
            reason=f"{count} more calls to hidden tools (the first {_MAX_ROWS} have a row each)",
            redactor=redactor,
            key=self.more_key,
        )


class HiddenCalls:
    """Which hidden calls still need their row: each call's row is written once, however often
    its response is seen (a step prepared again, the run's end, a paused run resumed from its
    history again, in another toolset or process). A row carries its call's key
    (:func:`hidden_call_key`), which is remembered here and looked up in the audit trail
    before a row is written: the keys of one response in one look-up by the trail's key
    index, off the event loop. It sees committed rows only: a row another toolset of this
    process queued a moment before may be written twice (the row twice rather than none)."""

    def __init__(self) -> None:
        self.written: dict[str, None] = {}
        """Keys of calls written (or found written) by this process, oldest first."""

    @staticmethod
    def unanswered(ctx: RunContext[Any]) -> Unanswered:
        """The newest response in ``ctx`` and its calls of names not offered to the step that
        made them (``ctx.tool_manager``, still the one that answered the response's calls)."""
        response = next((m for m in reversed(ctx.messages) if isinstance(m, ModelResponse)), None)
        if response is None:
            return None, []
        manager = ctx.tool_manager
        offered = manager.tools if manager is not None and manager.tools is not None else {}
        calls = [
            (index, part)
            for index, part in enumerate(response.parts)
            if isinstance(part, ToolCallPart) and part.tool_name not in offered
        ]
        return response, calls

    async def unwritten(
        self,
        response: ModelResponse,
        calls: Sequence[tuple[int, ToolCallPart]],
        identity: Identity,
        audit: AuditLog | None,
    ) -> Unwritten:
        """The calls of ``calls`` (hidden calls of ``response``) with no row yet; they count
        as written from here on (also for a step prepared meanwhile). The keys not remembered
        are looked up in ``audit`` (the caller's rows) together, on a worker thread."""
        keyed = [(part, hidden_call_key(response, i, part)) for i, part in calls[:_MAX_ROWS]]
        more = [part for _, part in calls[_MAX_ROWS:]]
        more_key = _key(response, "more")
        keys = [key for _, key in keyed] + ([more_key] if more else [])
        new = [key for key in keys if key not in self.written]
        self._remember(new)
        found = await _found(new, identity, audit) if new and audit is not None else set()
        fresh = set(new) - found
        return Unwritten(
            [(part, key) for part, key in keyed if key in fresh],
            more if more_key in fresh else [],
            more_key,
        )

    def _remember(self, keys: list[str]) -> None:
        written = self.written
        for key in keys:
            if len(written) >= _MAX_CALLS:
                del written[next(iter(written))]
            written[key] = None


async def _found(keys: list[str], identity: Identity, audit: AuditLog) -> set[str]:
    """Which of ``keys`` are keys of ``identity``'s rows in ``audit``: none when the trail
    cannot say within :data:`_WAIT` seconds (the row twice rather than none)."""
    principal = storable(identity.id)
    try:
        return await anyio.to_thread.run_sync(audit.keyed, principal, keys, _WAIT)
    except Exception as exc:  # the run goes on
        log.warning("audit trail unreadable (%s): a hidden call's row may repeat", exc)
        return set()


def hidden_call_key(response: ModelResponse, index: int, part: ToolCallPart) -> str:
    """The key of the call ``part``, at ``index`` in ``response``: the run, when the response
    came, the call's place in it (a model may give two calls one id) and its id. The same
    history resumed again holds the same response: the same keys."""
    return _key(response, str(index), part.tool_call_id)


def _key(response: ModelResponse, *parts: str) -> str:
    """A key of ``response`` (its run and when it came) and ``parts``."""
    came = f"{response.timestamp.timestamp():.6f}"
    return KEYED + joined_key(response.run_id or "", came, *parts)
