"""Governed calls that run once per durable call key, for durable runs (DBOS, Temporal).

A durable engine that recovers a run replays it from the start: recorded model responses come
back from its journal with the same tool call ids, and the run's id is replay-stable (DBOS:
``<workflow id>:<step>``). So ``<run id>/<tool call id>`` names one call of one durable run,
in every process that replays it. :func:`run_once` claims that key in a
:class:`CallResults` store before the executor runs the call and settles it with the outcome
after; a replay finds the record and returns it: the tool does not run again and no second
audit row is written. Everything it reads at call time comes from the run context and the
store, nothing from the process, so a worker in another process (a Temporal activity) answers
the same way.

A key claimed but never settled means the process died while the tool ran: the tool may have
had its effect. An ``idempotent`` tool then runs again; any other is not repeated (at most
once): the call ends ``error`` with one ``interrupted`` audit row, and the model is told.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Protocol

from pydantic_core import to_json

from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.governance.audit.log import AuditRecord
from toolcards.governance.capability import ToolCapability
from toolcards.governance.executor.endings import INTERRUPTED
from toolcards.governance.executor.pipeline import ExecutionResult, Executor
from toolcards.governance.outcomes import Outcome
from toolcards.governance.redaction.redactor import args_digest
from toolcards.stores.call_results import CallRecord

log = logging.getLogger(__name__)

_MAX_KEY = 400


class CallResults(Protocol):
    """Where claimed and settled calls are kept (:mod:`toolcards.stores.call_results`)."""

    def claim(self, key: str, tool_id: str, args_digest: str) -> CallRecord | None: ...
    def settle(self, key: str, outcome: str, message: str, value: str | None) -> None: ...
    def release(self, key: str) -> None: ...


def durable_call_key(run_id: str | None, tool_call_id: str | None) -> str | None:
    """The key of one tool call of one run (None when either id is missing or too long)."""
    if not run_id or not tool_call_id:
        return None
    key = f"{run_id}/{tool_call_id}"
    return key if len(key) <= _MAX_KEY else None


async def run_once(
    results: CallResults,
    key: str,
    executor: Executor,
    cap: ToolCapability,
    args: dict[str, Any],
    identity: Identity | None,
    **options: Any,
) -> ExecutionResult:
    """``executor.run(cap, args, identity, **options)`` unless ``key`` was run before: then
    its recorded result (or, for a call its process died in, the refusal to repeat it)."""
    digest = args_digest(args)
    earlier = results.claim(key, cap.id, digest)
    if earlier is not None:
        if earlier.tool_id != cap.id or earlier.args_digest != digest:
            msg = f"error: call {key} was already made with another tool or arguments"
            return _refused(executor, cap, args, identity, options, "error", msg)
        if earlier.settled:
            log.info("replayed %s %s from its recorded result", cap.id, key)
            return _recorded(earlier, cap.id, options.get("call_id"))
        if not cap.annotations.idempotent:
            msg = (
                f"error: {cap.id} was interrupted (its process ended while it ran) and may "
                "have had its effect; it is not run again"
            )
            return _refused(executor, cap, args, identity, options, INTERRUPTED, msg)
    try:
        result = await executor.run(cap, args, identity, **options)
    except BaseException:
        results.release(key)  # withdrawn or deferred: not a result to replay
        raise
    if result.outcome is Outcome.NEEDS_APPROVAL:
        results.release(key)  # the approved call runs under the same key
        return result
    value = to_json(result.value, fallback=str).decode() if result.ok else None
    results.settle(key, result.outcome.value, result.message, value)
    return result


def _recorded(record: CallRecord, tool_id: str, call_id: str | None) -> ExecutionResult:
    value = json.loads(record.value) if record.value is not None else None
    outcome = Outcome(record.outcome or Outcome.ERROR.value)
    return ExecutionResult(
        outcome, tool_id, value=value, message=record.message or "", call_id=call_id
    )


def _refused(
    executor: Executor,
    cap: ToolCapability,
    args: dict[str, Any],
    identity: Identity | None,
    options: dict[str, Any],
    audited: str,
    message: str,
) -> ExecutionResult:
    """The end of a call that is not run: one audit row (``audited``), an ``error`` result."""
    who = identity if identity is not None else ANONYMOUS
    call_id = options.get("call_id")
    if executor.audit is not None:
        executor.audit.record(
            AuditRecord(
                ts=time.time(),
                principal=who.id,
                principal_type=who.type,
                roles=who.roles,
                surface=str(options.get("surface", "python")),
                tool=cap.id,
                call_id=call_id,
                args=args,
                decision="none",
                outcome=audited,
                error=message,
                sensitive=tuple(cap.sensitive),
                redactor=executor.policy.redaction,
            )
        )
    return ExecutionResult(Outcome.ERROR, cap.id, message=message, call_id=call_id)
