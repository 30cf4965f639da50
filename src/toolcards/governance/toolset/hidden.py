"""The calls a model makes to governed tools hidden from it, whose rows the governed toolset
writes itself: pydantic-ai answers a name it was not offered ("Unknown tool name") and never
calls the toolset (see :class:`~.governed.GovernedToolset`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart

from toolcards.core.identity import Identity, joined_key
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.redaction.redactor import storable

log = logging.getLogger(__name__)

_MAX_CALLS = 4096  # keys remembered as written by this process
_SKEW = 300.0
"""Seconds a row may seem older than the response that made its call: a run resumed in
another process may write its rows by a clock that far behind."""

Unanswered = tuple[ModelResponse | None, list[tuple[int, ToolCallPart]]]
"""The newest response of a run, and its calls no toolset was offered, with their places."""


class HiddenCalls:
    """Which hidden calls still need their row: each call's row is written once, however often
    its response is seen (a step prepared again, the run's end, a paused run resumed from its
    history again, in another toolset or process). A row carries its call's key
    (:func:`hidden_call_key`), which is remembered here and looked up in the audit trail
    before a row is written."""

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

    def unwritten(
        self,
        response: ModelResponse,
        calls: Iterable[tuple[int, ToolCallPart]],
        identity: Identity,
        audit: AuditLog | None,
    ) -> Iterator[tuple[ToolCallPart, str]]:
        """Each of ``calls`` (hidden calls of ``response``) with no row yet, and its row's key;
        it counts as written from here on."""
        for index, part in calls:
            key = hidden_call_key(response, index, part)
            if not self._written(key, response, identity, audit):
                yield part, key

    def _written(
        self, key: str, response: ModelResponse, identity: Identity, audit: AuditLog | None
    ) -> bool:
        """Whether the row of ``key`` is written: remembered, else found in ``audit`` among the
        caller's rows since ``response`` (bounded: the key has no index of its own)."""
        written = self.written
        if key in written:
            return True
        if len(written) >= _MAX_CALLS:
            del written[next(iter(written))]
        written[key] = None
        if audit is None:
            return False
        since = response.timestamp.timestamp() - _SKEW
        try:
            found = audit.query(principal=storable(identity.id), key=key, since=since, limit=1)
        except Exception as exc:  # the row twice rather than none, and the run goes on
            log.warning("audit trail unreadable (%s): a hidden call's row may repeat", exc)
            return False
        return bool(found)


def hidden_call_key(response: ModelResponse, index: int, part: ToolCallPart) -> str:
    """The key of the call ``part``, at ``index`` in ``response``: the run, when the response
    came, the call's place in it (a model may give two calls one id) and its id. The same
    history resumed again holds the same response: the same keys."""
    came = f"{response.timestamp.timestamp():.6f}"
    return "hidden:" + joined_key(response.run_id or "", came, str(index), part.tool_call_id)
