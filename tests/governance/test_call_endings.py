"""Every governed call that started ends in exactly one audit row, in this process: a
cancelled call (executor API and a pydantic-ai agent run), a timeout, an interrupt, a call
withdrawn while it waits for approval, a failure outside the tool."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.toolsets import FunctionToolset

from support.scripted import SequenceScript
from toolcards.core.spec import ToolAnnotations, annotate
from toolcards.governance import (
    AuditEntry,
    AuditLog,
    CapabilityRegistry,
    Executor,
    GovernedToolset,
    Identity,
    Outcome,
    Policy,
    ToolCapability,
)

pytestmark = pytest.mark.anyio
ALICE = Identity("alice", roles=["worker"])
ALLOW = Policy.from_dict({"default_effect": "allow"})


class Held:
    """``hold``: an async tool that waits until its call is cancelled; ``started`` is set
    once it runs."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        started = self.started

        async def hold(tag: str) -> str:
            """Waits until cancelled."""
            started.set()
            await asyncio.Event().wait()
            return "never"

        self.hold = hold


def nap(seconds: float) -> str:
    """A sync tool that sleeps."""
    time.sleep(seconds)
    return "rested"


def panic(tag: str) -> str:
    """Raises KeyboardInterrupt (as a signal would inside it)."""
    raise KeyboardInterrupt


@pytest.fixture
def audit(tmp_path: Path) -> Any:
    with AuditLog(tmp_path / "audit.db") as log:
        yield log


def rows(audit: AuditLog) -> list[tuple[str, str | None]]:
    return [(e.outcome, e.call_id) for e in audit.query(limit=1000)]


def entries(audit: AuditLog) -> list[AuditEntry]:
    return audit.query(limit=1000)


async def cancel_once_started(held: Held, coro: Any) -> None:
    task = asyncio.ensure_future(coro)
    await held.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_executor_call_has_one_cancelled_row_and_is_still_cancelled(
    audit: AuditLog,
) -> None:
    held = Held()
    executor = Executor(CapabilityRegistry.from_tools([held.hold]), ALLOW, audit=audit)
    await cancel_once_started(held, executor.call("hold", {"tag": "x"}, ALICE, call_id="c1"))
    assert rows(audit) == [("cancelled", "c1")]
    assert entries(audit)[0].decision == "allow"


async def test_a_call_without_a_call_id_gets_one_that_its_result_names(audit: AuditLog) -> None:
    executor = Executor(CapabilityRegistry.from_tools([nap]), ALLOW, audit=audit)
    result = await executor.call("nap", {"seconds": 0}, ALICE)
    assert result.call_id is not None
    assert rows(audit) == [("ok", result.call_id)]


async def test_a_sync_tool_over_its_timeout_has_one_timeout_row(audit: AuditLog) -> None:
    executor = Executor(CapabilityRegistry.from_tools([nap]), ALLOW, audit=audit, timeout=0.05)
    result = await executor.call("nap", {"seconds": 1.0}, ALICE, call_id="slow")
    assert result.outcome is Outcome.ERROR and "timed out" in result.message
    assert rows(audit) == [("timeout", "slow")]


async def test_an_interrupt_inside_a_tool_is_audited_and_raised(audit: AuditLog) -> None:
    executor = Executor(CapabilityRegistry.from_tools([panic]), ALLOW, audit=audit)
    with pytest.raises(KeyboardInterrupt):
        await executor.call("panic", {"tag": "x"}, ALICE, call_id="k1")
    assert rows(audit) == [("interrupted", "k1")]


async def test_a_failure_outside_the_tool_still_has_its_row(audit: AuditLog) -> None:
    executor = Executor(CapabilityRegistry(), ALLOW, audit=audit)
    cap = ToolCapability("no_invoke", "has nothing to run", {}, ToolAnnotations())
    with pytest.raises(TypeError):
        await executor.run(cap, {}, ALICE, call_id="b1")
    assert rows(audit) == [("error", "b1")]


async def test_a_call_cancelled_while_waiting_for_approval_has_one_row_and_no_request(
    audit: AuditLog,
) -> None:
    held = Held()
    gated = annotate(held.hold, requires_approval=True)
    executor = Executor(CapabilityRegistry.from_tools([gated]), ALLOW, audit=audit)
    asked = asyncio.Event()

    async def approver(request: Any) -> bool:
        asked.set()
        return await executor.approvals.waiter(60)(request)

    task = asyncio.ensure_future(
        executor.call("hold", {"tag": "x"}, ALICE, approver=approver, call_id="a1")
    )
    await asked.wait()
    assert len(executor.approvals.pending()) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rows(audit) == [("cancelled", "a1")]
    assert executor.approvals.pending() == []


async def test_every_row_of_an_approved_call_carries_the_call_id_made_at_its_start(
    audit: AuditLog,
) -> None:
    gated = annotate(nap, requires_approval=True)
    executor = Executor(CapabilityRegistry.from_tools([gated]), ALLOW, audit=audit)
    first = await executor.call("nap", {"seconds": 0}, ALICE)
    assert first.approval is not None and first.approval.call_id == first.call_id
    executor.approvals.grant(first.approval, approver=Identity("rita", roles=["approver"]))
    again = await executor.call("nap", {"seconds": 0}, ALICE, call_id=first.call_id)
    assert again.ok
    assert [(o, c == first.call_id) for o, c in rows(audit)] == [
        ("needs_approval", True),
        ("approval_granted", True),
        ("ok", True),
    ]


async def test_a_cancelled_agent_run_leaves_one_cancelled_row(audit: AuditLog) -> None:
    held = Held()
    tools: FunctionToolset[Any] = FunctionToolset()
    tools.add_function(held.hold, takes_ctx=False)
    governed = GovernedToolset(tools, policy=ALLOW, identity=ALICE, audit=audit)
    agent = Agent(SequenceScript([("hold", {"tag": "x"})]).model, toolsets=[governed])
    await cancel_once_started(held, agent.run("hold on"))
    assert rows(audit) == [("cancelled", "call-1")]
    assert entries(audit)[0].surface == "pydantic-ai"
