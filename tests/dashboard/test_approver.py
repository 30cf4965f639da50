"""InboxApprover: an approval-required call waits for a decision made in the inbox's broker
(the dashboard's), runs once when granted, and leaves nothing behind."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolcards.core.spec import annotate
from toolcards.governance import (
    ApprovalBroker,
    ApprovalState,
    AuditLog,
    CapabilityRegistry,
    Executor,
    Identity,
    Outcome,
    Policy,
)
from toolcards.surfaces.dashboard import InboxApprover

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]
CALLER = Identity("agent.carol", "agent", ["member"])
RITA = Identity("rita", roles=["approver"])
runs: list[str] = []


def deploy(env: str) -> str:
    """Deploy to an environment (a human approves each call)."""
    runs.append(env)
    return f"deployed {env}"


annotate(deploy, requires_approval=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _executor() -> Executor:
    runs.clear()
    return Executor(CapabilityRegistry.from_tools([deploy]), Policy.allow_all())


async def _decide_when_pending(inbox: ApprovalBroker, grant: bool) -> None:
    while not inbox.pending():
        await asyncio.sleep(0.01)
    [request] = inbox.pending()
    (inbox.grant if grant else inbox.deny)(request, approver=RITA, surface="dashboard")


async def test_a_call_granted_in_another_brokers_inbox_runs_once(tmp_path: Path) -> None:
    executor = _executor()  # its own broker, as a team member's executor has
    with AuditLog(tmp_path / "audit.db") as audit:
        inbox = ApprovalBroker(audit=audit)
        approver = InboxApprover(inbox, timeout=10)
        decided = asyncio.create_task(_decide_when_pending(inbox, grant=True))
        result = await executor.call("deploy", {"env": "prod"}, CALLER, approver=approver)
        await decided
        rows = audit.query(outcome="approval_granted")
    assert result.outcome is Outcome.OK and result.value == "deployed prod"
    assert runs == ["prod"]
    assert inbox.pending() == [] and executor.approvals.pending() == []
    assert [(r.principal, r.tool, r.surface) for r in rows] == [("rita", "deploy", "dashboard")]


async def _edit_when_pending(inbox: ApprovalBroker, env: str) -> str | None:
    while not inbox.pending():
        await asyncio.sleep(0.01)
    [request] = inbox.pending()
    granted = inbox.grant_record(request, approver=RITA, surface="dashboard", args={"env": env})
    return granted.edited_json


@pytest.mark.parametrize("shared", [False, True], ids=["another-broker", "shared-broker"])
async def test_an_edit_granted_in_the_inbox_is_what_runs(tmp_path: Path, shared: bool) -> None:
    """The approver saw the call, changed it to qa and granted that: qa runs (never the
    call's prod), the caller is told, and the row keeps both digests; also when the inbox's
    broker is not the executor's own (the request is copied into it)."""
    executor = _executor()
    with AuditLog(tmp_path / "audit.db") as audit:
        executor.audit = audit
        inbox = executor.approvals if shared else ApprovalBroker(audit=audit)
        decided = asyncio.create_task(_edit_when_pending(inbox, "qa"))
        result = await executor.call(
            "deploy", {"env": "prod"}, CALLER, approver=InboxApprover(inbox, timeout=10)
        )
        assert await decided == '{"env":"qa"}'
        [row] = audit.query(tool="deploy", outcome="ok")
    assert result.outcome is Outcome.OK, result.message
    assert (result.value, runs) == ("deployed qa", ["qa"])
    assert result.edit is not None and result.edit.args == {"env": "qa"}
    assert row.args == {"env": "qa"} and row.approved_args_digest is not None
    assert inbox.pending() == [] and executor.approvals.pending() == []


async def test_an_inbox_edit_the_policy_denies_is_refused_where_the_call_runs() -> None:
    """The copy's broker has no check of the executor's policy: the edit is checked where
    the call runs, and neither it nor the call's own arguments run."""
    runs.clear()
    policy = Policy.from_dict(
        {
            "rules": [
                {
                    "targets": ["deploy"],
                    "effect": "deny",
                    "conditions": {"arguments": {"env": ["root"]}},
                },
                {"targets": ["*"], "effect": "allow"},
            ]
        }
    )
    executor = Executor(CapabilityRegistry.from_tools([deploy]), policy)
    inbox = ApprovalBroker()
    decided = asyncio.create_task(_edit_when_pending(inbox, "root"))
    result = await executor.call(
        "deploy", {"env": "prod"}, CALLER, approver=InboxApprover(inbox, timeout=10)
    )
    await decided
    assert result.outcome is Outcome.DENIED, result.message
    assert runs == []


async def test_a_call_denied_in_the_inbox_is_refused() -> None:
    executor = _executor()
    inbox = ApprovalBroker()
    decided = asyncio.create_task(_decide_when_pending(inbox, grant=False))
    result = await executor.call(
        "deploy", {"env": "prod"}, CALLER, approver=InboxApprover(inbox, timeout=10)
    )
    await decided
    assert result.outcome is Outcome.DENIED and runs == []
    assert inbox.pending() == []


async def test_no_decision_in_time_is_an_approval_timeout_and_leaves_the_inbox_empty() -> None:
    executor = _executor()
    inbox = ApprovalBroker()
    result = await executor.call(
        "deploy", {"env": "prod"}, CALLER, approver=InboxApprover(inbox, timeout=0.2)
    )
    assert result.outcome is Outcome.APPROVAL_TIMEOUT and runs == []
    assert inbox.pending() == [] and executor.approvals.pending() == []


class LateBroker(ApprovalBroker):
    """An inbox whose approver grants just after the caller's last look at the request."""

    async def wait(self, handle: Any, timeout: float, **kw: Any) -> ApprovalState:
        state = await super().wait(handle, timeout, **kw)
        self.grant(handle, approver=RITA, surface="dashboard")  # the approver is told: granted
        return state


@pytest.mark.parametrize("shared", [False, True], ids=["another-broker", "shared-broker"])
async def test_a_grant_landing_as_the_wait_ends_runs_the_call(shared: bool) -> None:
    """The inbox's wait ended with the request pending, and then it was granted: the grant
    is honoured (the call runs once), never withdrawn into an approval timeout."""
    runs.clear()
    inbox = LateBroker()
    tools = CapabilityRegistry.from_tools([deploy])
    executor = Executor(tools, Policy.allow_all(), approvals=inbox if shared else None)
    result = await executor.call(
        "deploy", {"env": "prod"}, CALLER, approver=InboxApprover(inbox, timeout=0.05)
    )
    assert result.outcome is Outcome.OK, result.message
    assert runs == ["prod"] and inbox.pending() == [] and executor.approvals.pending() == []


async def test_another_calls_copy_in_the_inbox_is_never_waited_on_nor_withdrawn() -> None:
    """Two executors (brokers of their own) share the inbox; the same call (principal, id,
    arguments) asked through the second finds the first one's copy in the inbox: it is
    refused without touching it, and the first call runs once granted."""
    inbox, first, second = ApprovalBroker(), _executor(), _executor()

    def call(executor: Executor, timeout: float) -> Any:
        approver = InboxApprover(inbox, timeout)
        return executor.call("deploy", {"env": "prod"}, CALLER, approver=approver, call_id="c1")

    waiting = asyncio.create_task(call(first, 10))
    while not inbox.pending():
        await asyncio.sleep(0.01)
    [copy] = inbox.pending()
    other = await call(second, 0.05)
    inbox.grant(copy, approver=RITA, surface="dashboard")  # still there to grant
    assert other.outcome is Outcome.DENIED and (await waiting).ok
    assert runs == ["prod"] and inbox.pending() == [] and second.approvals.pending() == []


async def test_a_cancelled_call_leaves_the_inbox() -> None:
    executor = _executor()
    approver = InboxApprover(executor.approvals, timeout=10)  # the executor's own broker
    call = asyncio.create_task(executor.call("deploy", {"env": "prod"}, CALLER, approver=approver))
    while not executor.approvals.pending():
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert executor.approvals.pending() == [] and runs == []


async def test_the_shared_broker_case_runs_once_when_granted() -> None:
    executor = _executor()
    approver = InboxApprover(executor.approvals, timeout=10)
    decided = asyncio.create_task(_decide_when_pending(executor.approvals, grant=True))
    result = await executor.call("deploy", {"env": "qa"}, CALLER, approver=approver)
    await decided
    assert result.outcome is Outcome.OK and runs == ["qa"]
    assert executor.approvals.pending() == []


def test_a_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError):
        InboxApprover(ApprovalBroker(), timeout=0)
