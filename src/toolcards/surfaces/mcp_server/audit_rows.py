"""Audit rows a surface writes itself: governed reads of resources and prompts (the executor
writes the one row of every tool call, also a cancelled one)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolcards.governance.audit.log import AuditRecord, made_by

if TYPE_CHECKING:
    from toolcards.core.identity import Identity
    from toolcards.governance.executor.pipeline import Executor
    from toolcards.governance.policy.policy import Decision


def record(
    executor: Executor,
    target: str,
    args: Mapping[str, Any] | None,
    who: Identity,
    *,
    surface: str,
    outcome: str,
    started: float,
    decision: Decision | None = None,
    call_id: str | None = None,
    error: str | None = None,
) -> None:
    """Append one row for ``target`` (a tool id, ``resource:<uri>`` or ``prompt:<name>``)."""
    audit = executor.audit
    if audit is None:
        return
    cap = executor.registry.get(target)
    audit.record(
        AuditRecord(
            time.time(),
            *made_by(who),
            surface=surface,
            tool=target,
            call_id=call_id,
            args=dict(args) if isinstance(args, Mapping) else {},
            decision=decision.effect if decision is not None else "none",
            outcome=outcome,
            reason=decision.reason if decision is not None else None,
            duration=time.perf_counter() - started,
            error=error,
            sensitive=tuple(cap.sensitive) if cap is not None else (),
            redactor=executor.policy.redaction,
        )
    )
