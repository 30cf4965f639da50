"""Approvals: bound to what the human saw, decided by someone else with the approver role,
single use, expiring, audited, and awaited across threads and processes."""

from __future__ import annotations

import asyncio
import subprocess
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from support.launch import PYTHON
from toolcards.core.spec import annotate
from toolcards.governance import (
    ApprovalBroker,
    ApprovalError,
    ApprovalState,
    AuditLog,
    CapabilityRegistry,
    Executor,
    Identity,
    Outcome,
    Policy,
    SqliteApprovalStore,
)

pytestmark = pytest.mark.anyio
CAROL = Identity("carol", roles=["finance"])
MALLORY = Identity("mallory", roles=["finance"])
RITA = Identity("rita", roles=["approver"])
runs: list[float] = []


def wire(amount: float) -> str:
    """Send money (a human approves each call)."""
    runs.append(amount)
    return f"wired {amount:g}"


annotate(wire, requires_approval=True)


def _executor(**kwargs: Any) -> Executor:
    runs.clear()
    return Executor(CapabilityRegistry.from_tools([wire]), Policy.allow_all(), **kwargs)


async def test_a_swapped_request_under_the_same_call_id_never_runs() -> None:
    executor = _executor()
    seen = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    swap = await executor.call("wire", {"amount": 5000}, MALLORY, call_id="c1")
    assert seen.approval is not None and swap.approval is not None
    assert swap.approval.approval_id != seen.approval.approval_id
    executor.approvals.grant(seen.approval, approver=RITA)  # the human approved what they saw
    attack = await executor.call("wire", {"amount": 5000}, MALLORY, call_id="c1")
    same_id_other_args = await executor.call("wire", {"amount": 5000}, CAROL, call_id="c1")
    assert attack.outcome is Outcome.NEEDS_APPROVAL
    assert same_id_other_args.outcome is Outcome.NEEDS_APPROVAL
    assert runs == []
    assert (await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")).ok
    assert runs == [5.0]


async def test_a_call_nested_past_the_serializer_depth_still_asks_for_approval() -> None:
    """Recording the request redacted its arguments through pydantic-core, which refuses more
    than ~255 levels: the call raised instead of waiting for a human."""

    def publish(payload: dict[str, Any]) -> str:
        """Publish a JSON payload (a human approves each call)."""
        return "published"

    annotate(publish, requires_approval=True)
    executor = Executor(CapabilityRegistry.from_tools([publish]), Policy.allow_all())
    deep: list[Any] = []
    for _ in range(299):
        deep = [deep]
    result = await executor.call("publish", {"payload": {"x": deep}}, CAROL, call_id="c1")
    assert result.outcome is Outcome.NEEDS_APPROVAL
    [request] = executor.approvals.pending()
    assert request.args_json == '{"payload":{"x":' + "[" * 300 + "]" * 300 + "}}"


async def test_a_pending_request_is_never_replaced() -> None:
    executor = _executor()
    first = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    await executor.call("wire", {"amount": 9}, MALLORY, call_id="c1")
    assert first.approval is not None
    kept = executor.approvals.get(first.approval.approval_id)
    assert kept == first.approval and kept.args == {"amount": 5}


async def test_a_grant_is_spent_by_one_run() -> None:
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None
    executor.approvals.grant(pending.approval.approval_id, approver=RITA)
    assert (await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")).ok
    again = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert again.outcome is Outcome.NEEDS_APPROVAL and runs == [5.0]


async def test_the_caller_cannot_approve_its_own_call() -> None:
    executor = _executor()
    carol_approver = Identity("carol", roles=["finance", "approver"])
    pending = await executor.call("wire", {"amount": 5}, carol_approver, call_id="c1")
    assert pending.approval is not None
    with pytest.raises(ApprovalError, match="own call"):
        executor.approvals.grant(pending.approval, approver=carol_approver)
    assert executor.approvals.state(pending.approval) is ApprovalState.PENDING


async def test_an_approver_needs_the_approver_role() -> None:
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None
    with pytest.raises(ApprovalError, match="'approver' role"):
        executor.approvals.grant(pending.approval, approver=MALLORY)


async def test_the_approver_role_name_is_configurable() -> None:
    executor = _executor(approvals=ApprovalBroker(approver_role="treasurer"))
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None
    with pytest.raises(ApprovalError):
        executor.approvals.grant(pending.approval, approver=RITA)
    executor.approvals.grant(pending.approval, approver=Identity("tom", roles=["treasurer"]))
    assert (await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")).ok


async def test_a_grant_must_name_the_request_as_recorded() -> None:
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None
    forged = replace(pending.approval, args={"amount": 1}, args_digest="0" * 64)
    with pytest.raises(ApprovalError, match="differs"):
        executor.approvals.grant(forged, approver=RITA)


async def test_a_request_is_decided_once() -> None:
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None
    executor.approvals.deny(pending.approval, approver=RITA)
    with pytest.raises(ApprovalError, match="already denied"):
        executor.approvals.grant(pending.approval, approver=RITA)


async def test_a_denied_call_is_refused_once_then_asks_again() -> None:
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None
    executor.approvals.deny(pending.approval, approver=RITA)
    refused = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert refused.outcome is Outcome.DENIED and "refused" in refused.message
    again = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert again.outcome is Outcome.NEEDS_APPROVAL and runs == []


@pytest.mark.parametrize("decide", ["grant", "deny"])
@pytest.mark.parametrize("session", ["conv-b", None])
async def test_a_decision_settles_only_a_call_of_the_session_that_asked(
    decide: str, session: str | None
) -> None:
    """One agent principal serves many users' conversations: a request decided for
    conversation A's call never settles the same call (id, arguments) made from another
    conversation, or from none, nor is spent by it (A's grant was used up unused, and A
    then found B's request in its way): that call is refused, and A's decision stays A's."""
    executor = _executor()
    asked = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1", session="conv-a")
    assert asked.approval is not None
    getattr(executor.approvals, decide)(asked.approval, approver=RITA)
    other = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1", session=session)
    assert other.outcome is Outcome.DENIED and "another conversation" in other.message
    assert other.approval is None and runs == []
    again = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1", session="conv-a")
    assert again.outcome is (Outcome.OK if decide == "grant" else Outcome.DENIED)
    assert runs == ([5] if decide == "grant" else [])


async def test_a_yes_to_another_sessions_pending_request_runs_nothing() -> None:
    """A call that finds conversation A's request pending under its id and arguments is
    refused at once: its approver is never asked about A's request, whose yes would be A's,
    and A's request stays A's."""
    executor = _executor()
    asked = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1", session="conv-a")
    approvers: list[Any] = []

    async def yes(request: Any) -> bool:
        approvers.append(request)
        return True

    other = await executor.call(
        "wire", {"amount": 5}, CAROL, approver=yes, call_id="c1", session="conv-b"
    )
    assert other.outcome is Outcome.DENIED and "another conversation" in other.message
    assert other.approval is None and approvers == [] and runs == []
    assert executor.approvals.pending() == [asked.approval]


@pytest.mark.parametrize("decide", ["grant", "timeout"])
async def test_a_call_of_another_session_never_takes_over_a_waiting_request(
    decide: str,
) -> None:
    """Conversation A's call waits in the inbox; the same call (principal, id, arguments)
    made in conversation B neither spends the grant an approver gives A while B would wait,
    nor withdraws A's request when B's own wait ends: B is refused at once, its approver
    never asked, and A runs once granted."""
    from toolcards.surfaces.approval import InboxApprover

    executor = _executor()
    broker = executor.approvals

    def call(session: str, approver: Any) -> Any:
        return executor.call(
            "wire", {"amount": 5}, CAROL, approver=approver, call_id="c1", session=session
        )

    a = asyncio.create_task(call("conv-a", InboxApprover(broker, 10)))
    while not broker.pending():
        await asyncio.sleep(0.01)
    [request] = broker.pending()
    inbox, asked = InboxApprover(broker, 10 if decide == "grant" else 0.05), asyncio.Event()

    async def approver(request: Any) -> Any:
        asked.set()
        return await inbox(request)

    b, b_waits = asyncio.create_task(call("conv-b", approver)), asyncio.create_task(asked.wait())
    # grant: while B waits on A's request (or once B ended); timeout: once B's wait ended
    ended = [b] if decide == "timeout" else [b, b_waits]
    await asyncio.wait(ended, return_when=asyncio.FIRST_COMPLETED)
    b_waits.cancel()
    broker.grant(request, approver=RITA)  # A's request is still there to grant
    other = await b
    assert other.outcome is Outcome.DENIED and "another conversation" in other.message
    assert not asked.is_set()
    assert (await a).ok and runs == [5.0]


@pytest.mark.parametrize("decide", ["grant", "deny"])
async def test_a_decision_made_as_the_approver_gives_up_is_honoured(decide: str) -> None:
    """A decision that lands after the approver's last look, before its request is withdrawn,
    is the call's: a grant runs it (the approver was told it was granted), a denial refuses
    it; never an approval timeout that threw the decision away."""
    from toolcards.governance.approvals.broker import ApprovalTimedOut

    executor = _executor()
    seen: list[Any] = []

    async def late(request: Any) -> bool:
        seen.append(request)
        getattr(executor.approvals, decide)(request, approver=RITA)
        raise ApprovalTimedOut(0.1)

    result = await executor.call("wire", {"amount": 7}, CAROL, approver=late, call_id="c1")
    expected = Outcome.OK if decide == "grant" else Outcome.DENIED
    assert result.outcome is expected and runs == ([7.0] if decide == "grant" else [])
    assert executor.approvals.get(seen[0]) is None  # spent: nothing left for a later call


async def test_an_expired_request_cannot_be_granted() -> None:
    now = [1000.0]
    broker = ApprovalBroker(ttl=60, clock=lambda: now[0])
    executor = _executor(approvals=broker)
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None
    now[0] += 61
    with pytest.raises(ApprovalError, match="no such pending request"):
        broker.grant(pending.approval, approver=RITA)
    assert broker.pending() == []


async def test_a_refused_decision_on_an_expired_request_names_its_tool(tmp_path: Path) -> None:
    now = [1000.0]
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        broker = ApprovalBroker(ttl=60, clock=lambda: now[0], audit=audit)
        executor = _executor(approvals=broker, audit=audit)
        pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
        assert pending.approval is not None
        now[0] += 61
        with pytest.raises(ApprovalError):
            broker.grant(pending.approval.approval_id, approver=RITA, surface="cli")
        rows = audit.query(outcome="approval_rejected")
    assert [(r.tool, r.call_id, r.principal) for r in rows] == [("wire", "c1", "rita")]


async def test_decisions_and_refused_attempts_are_audited_with_the_approver(
    tmp_path: Path,
) -> None:
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        executor = _executor(audit=audit)
        pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
        assert pending.approval is not None
        with pytest.raises(ApprovalError):
            executor.approvals.grant(pending.approval, approver=MALLORY, surface="cli")
        executor.approvals.grant(pending.approval, approver=RITA, surface="cli")
        await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
        rows = audit.query()
    summary = [(r.principal, r.decision, r.outcome, r.surface) for r in rows]
    assert summary == [
        ("carol", "allow", "needs_approval", "python"),
        ("mallory", "none", "approval_rejected", "cli"),
        ("rita", "grant", "approval_granted", "cli"),
        ("carol", "allow", "ok", "python"),
    ]
    assert rows[2].call_id == "c1" and rows[2].args_digest == rows[0].args_digest
    assert rows[2].reason == "requested by carol" and rows[2].roles == ("approver",)


async def test_a_waiting_call_runs_when_another_thread_grants_it() -> None:
    executor = _executor()
    broker = executor.approvals

    def approver_desk() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for request in broker.pending():
                broker.grant(request, approver=RITA)
                return
            time.sleep(0.01)

    desk = threading.Thread(target=approver_desk)
    desk.start()
    result = await executor.call("wire", {"amount": 7}, CAROL, approver=broker.waiter(10))
    desk.join(timeout=10)
    assert result.ok and runs == [7.0]


async def test_a_waiting_call_is_refused_when_nobody_decides_in_time() -> None:
    executor = _executor()
    result = await executor.call(
        "wire", {"amount": 7}, CAROL, approver=executor.approvals.waiter(0.05)
    )
    assert result.outcome is Outcome.DENIED and runs == []
    assert executor.approvals.pending() == []


async def test_waiting_backs_off_instead_of_spinning() -> None:
    broker = ApprovalBroker()
    executor = _executor(approvals=broker)
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None
    reads: list[str] = []
    store_get = broker.store.get

    def counting_get(approval_id: str) -> Any:
        reads.append(approval_id)
        return store_get(approval_id)

    broker.store.get = counting_get  # type: ignore[method-assign]
    state = await broker.wait(pending.approval, timeout=0.6)
    assert state is ApprovalState.PENDING
    assert len(reads) < 25  # a 5 ms poll without backoff would read ~120 times


async def test_wait_returns_as_soon_as_a_decision_lands() -> None:
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, CAROL, call_id="c1")
    assert pending.approval is not None

    async def decide_soon() -> None:
        await asyncio.sleep(0.05)
        executor.approvals.deny(pending.approval, approver=RITA)  # type: ignore[arg-type]

    task = asyncio.create_task(decide_soon())
    state = await executor.approvals.wait(pending.approval, timeout=10)
    await task
    assert state is ApprovalState.DENIED


GRANT_FROM_ANOTHER_PROCESS = textwrap.dedent(
    """
    import sys, time
    from toolcards.governance import ApprovalBroker, AuditLog, Identity, SqliteApprovalStore
    store_path, audit_path = sys.argv[1], sys.argv[2]
    audit = AuditLog(audit_path, durability="sync")
    broker = ApprovalBroker(store=SqliteApprovalStore(store_path), audit=audit)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pending = broker.pending()
        if pending:
            broker.grant(pending[0].approval_id, approver=Identity("rita", roles=["approver"]),
                         surface="cli")
            print("granted", pending[0].tool_id, pending[0].args["amount"])
            break
        time.sleep(0.02)
    audit.close()
    """
)


@pytest.mark.timeout(60)
async def test_a_call_waits_for_a_grant_made_by_another_process(tmp_path: Path) -> None:
    store_path, audit_path = tmp_path / "approvals.db", tmp_path / "audit.db"
    broker = ApprovalBroker(store=SqliteApprovalStore(store_path))
    with AuditLog(audit_path) as audit:
        executor = _executor(approvals=broker, audit=audit)
        desk = subprocess.Popen(
            [PYTHON, "-c", GRANT_FROM_ANOTHER_PROCESS, str(store_path), str(audit_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            result = await executor.call("wire", {"amount": 42}, CAROL, approver=broker.waiter(30))
            out, _ = desk.communicate(timeout=30)
        finally:
            desk.kill()
        rows = audit.query()
    assert out.strip() == "granted wire 42"
    assert result.ok and runs == [42.0]
    granted = [r for r in rows if r.outcome == "approval_granted"]
    assert [(r.principal, r.surface) for r in granted] == [("rita", "cli")]
