"""An approver's edit of a pending call: what is approved and what runs, once; checked as a
fresh call's arguments (schema, then the policy on the edit); never by the caller itself;
audited with the digest of the call and the digest of the edit."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

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
from toolcards.governance.approvals.edits import MAX_EDITED_ARGS
from toolcards.governance.redaction.redactor import args_digest

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent
CAROL = Identity("carol", roles=["finance"])
RITA = Identity("rita", roles=["approver"])
CALLED = {"amount": 5000, "currency": "EUR", "to": "acme"}
runs: list[dict[str, Any]] = []


def transfer_money(amount: float, currency: str, to: str) -> str:
    """Send money (a human approves each call)."""
    runs.append({"amount": amount, "currency": currency, "to": to})
    return f"sent {amount:g} {currency} to {to}"


annotate(transfer_money, requires_approval=True)


def _executor(tmp_path: Path, audit: AuditLog | None = None) -> Executor:
    runs.clear()
    broker = ApprovalBroker(store=SqliteApprovalStore(tmp_path / "approvals.db"))
    policy = Policy.from_yaml(HERE / "edit_policy.yaml")
    registry = CapabilityRegistry.from_tools([transfer_money])
    return Executor(registry, policy, approvals=broker, audit=audit)


def _other_desk(tmp_path: Path) -> ApprovalBroker:
    """A broker of another process on the same inbox (no executor: it cannot check edits)."""
    return ApprovalBroker(store=SqliteApprovalStore(tmp_path / "approvals.db"))


async def _pending(executor: Executor) -> Any:
    waiting = await executor.call("transfer_money", CALLED, CAROL, call_id="c1")
    assert waiting.outcome is Outcome.NEEDS_APPROVAL and waiting.approval is not None
    return waiting.approval


async def test_a_granted_edit_runs_once_and_the_call_as_made_never(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    executor.approvals.grant(request, approver=RITA, args={**CALLED, "amount": 50})
    ran = await executor.call("transfer_money", CALLED, CAROL, call_id="c1")
    again = await executor.call("transfer_money", CALLED, CAROL, call_id="c1")
    assert ran.ok and ran.value == "sent 50 EUR to acme"
    assert again.outcome is Outcome.NEEDS_APPROVAL  # spent: a new request, not a second run
    assert runs == [{"amount": 50.0, "currency": "EUR", "to": "acme"}]


async def test_an_edit_granted_in_another_process_runs_without_asking_again(
    tmp_path: Path,
) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    _other_desk(tmp_path).grant(request.approval_id, approver=RITA, args={**CALLED, "amount": 7})
    ran = await executor.call("transfer_money", CALLED, CAROL, call_id="c1")
    assert ran.ok and runs == [{"amount": 7.0, "currency": "EUR", "to": "acme"}]


async def test_the_audit_keeps_the_digest_of_the_call_and_of_the_edit(tmp_path: Path) -> None:
    edit = {**CALLED, "amount": 50}
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = _executor(tmp_path, audit)
        request = await _pending(executor)
        executor.approvals.grant(request, approver=RITA, args=edit)
        await executor.call("transfer_money", CALLED, CAROL, call_id="c1")
        rows = {row.outcome: row for row in audit.query()}
    for outcome in ("approval_granted", "ok"):
        assert rows[outcome].args_digest == args_digest(CALLED)
        assert rows[outcome].approved_args_digest == args_digest(edit)
    assert rows["ok"].args == edit
    assert rows["needs_approval"].approved_args_digest is None


async def test_an_edit_the_policy_denies_is_refused_at_the_grant(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    with pytest.raises(ApprovalError, match="edited arguments is not permitted for carol"):
        executor.approvals.grant(request, approver=RITA, args={**CALLED, "to": "mallory"})
    assert executor.approvals.state(request) is ApprovalState.PENDING
    assert runs == []


async def test_an_edit_the_policy_denies_where_it_runs_is_denied(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    _other_desk(tmp_path).grant(
        request.approval_id, approver=RITA, args={**CALLED, "to": "mallory"}
    )
    result = await executor.call("transfer_money", CALLED, CAROL, call_id="c1")
    assert result.outcome is Outcome.DENIED
    assert result.message == (
        "denied: transfer_money with the edited arguments is not permitted for carol"
    )
    assert runs == []


async def test_an_edit_failing_validation_is_refused_in_one_line(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    with pytest.raises(ApprovalError) as refused:
        executor.approvals.grant(request, approver=RITA, args={"amount": "lots", "to": "acme"})
    message = str(refused.value)
    assert "\n" not in message and "invalid arguments for transfer_money" in message
    assert "amount" in message and "currency" in message and "lots" not in message
    assert executor.approvals.state(request) is ApprovalState.PENDING


async def test_an_invalid_edit_granted_elsewhere_is_refused_where_it_runs(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    _other_desk(tmp_path).grant(request.approval_id, approver=RITA, args={"amount": "lots"})
    result = await executor.call("transfer_money", CALLED, CAROL, call_id="c1")
    assert result.outcome is Outcome.DENIED and "\n" not in result.message
    assert result.message.startswith("denied: edited arguments: invalid arguments for")
    assert runs == []


async def test_a_caller_cannot_approve_its_own_call_by_editing_it(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    both = Identity("carol", roles=["finance", "approver"])
    waiting = await executor.call("transfer_money", CALLED, both, call_id="c1")
    assert waiting.approval is not None
    with pytest.raises(ApprovalError, match="own call"):
        executor.approvals.grant(waiting.approval, approver=both, args={**CALLED, "amount": 1})
    assert executor.approvals.state(waiting.approval) is ApprovalState.PENDING
    assert executor.approvals.edit_of(waiting.approval) is None


async def test_an_edit_longer_than_the_bound_is_refused(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    huge = {**CALLED, "to": "x" * MAX_EDITED_ARGS}
    with pytest.raises(ApprovalError, match=f"longer than {MAX_EDITED_ARGS} characters"):
        executor.approvals.grant(request, approver=RITA, args=huge)


async def test_an_edit_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    with pytest.raises(ApprovalError, match="one JSON object"):
        executor.approvals.grant(request, approver=RITA, args=[1, 2])  # type: ignore[arg-type]


async def test_an_edit_equal_to_the_call_is_a_plain_grant(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    request = await _pending(executor)
    executor.approvals.grant(request, approver=RITA, args=dict(CALLED))
    assert executor.approvals.edit_of(request) is None
    assert (await executor.call("transfer_money", CALLED, CAROL, call_id="c1")).ok


def test_older_sqlite_tables_gain_the_edit_columns(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "approvals.db") as db:  # the schema before edits
        db.execute(
            "CREATE TABLE approvals (approval_id TEXT PRIMARY KEY, call_id TEXT NOT NULL, "
            "tool_id TEXT NOT NULL, args_digest TEXT NOT NULL, principal TEXT NOT NULL, "
            "principal_type TEXT NOT NULL, roles TEXT NOT NULL, args TEXT NOT NULL, "
            "reason TEXT NOT NULL, surface TEXT NOT NULL, created_at REAL NOT NULL, "
            "expires_at REAL NOT NULL, state TEXT NOT NULL, approver TEXT, decided_at REAL, "
            "args_exact TEXT NOT NULL DEFAULT '', team_id TEXT NOT NULL DEFAULT '')"
        )
    with sqlite3.connect(tmp_path / "audit.db") as db:
        db.execute(
            "CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, "
            "principal TEXT NOT NULL, principal_type TEXT NOT NULL, roles TEXT NOT NULL, "
            "surface TEXT NOT NULL, tool TEXT NOT NULL, call_id TEXT, args_digest TEXT NOT NULL, "
            "args TEXT NOT NULL, decision TEXT NOT NULL, reason TEXT, outcome TEXT NOT NULL, "
            "duration_ms REAL NOT NULL, error TEXT, team_id TEXT NOT NULL DEFAULT '')"
        )
    broker = ApprovalBroker(store=SqliteApprovalStore(tmp_path / "approvals.db"))
    request = broker.request(tool_id="t", args={"a": 1}, identity=CAROL, reason="r")
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        broker.audit = audit
        broker.grant(request, approver=RITA, args={"a": 2})
        [granted] = audit.query(outcome="approval_granted")
    assert broker.edit_of(request) == {"a": 2}
    assert granted.approved_args_digest == args_digest({"a": 2})


def test_older_postgres_tables_gain_the_edit_columns(postgres_url: str) -> None:
    import psycopg

    from toolcards.stores.postgres.governance import PostgresApprovalStore

    with psycopg.connect(postgres_url, autocommit=True) as db:  # the schema before edits
        db.execute(
            "CREATE TABLE toolcards_approvals (approval_id TEXT PRIMARY KEY, call_id TEXT NOT "
            "NULL, tool_id TEXT NOT NULL, args_digest TEXT NOT NULL, principal TEXT NOT NULL, "
            "principal_type TEXT NOT NULL, roles TEXT NOT NULL, args TEXT NOT NULL, "
            "reason TEXT NOT NULL, surface TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL, state TEXT NOT NULL, approver TEXT, "
            "decided_at DOUBLE PRECISION, args_exact TEXT NOT NULL DEFAULT '', "
            "team_id TEXT NOT NULL DEFAULT '')"
        )
        db.execute(
            "CREATE TABLE toolcards_audit (id BIGSERIAL PRIMARY KEY, ts DOUBLE PRECISION NOT "
            "NULL, principal TEXT NOT NULL, principal_type TEXT NOT NULL, roles TEXT NOT NULL, "
            "surface TEXT NOT NULL, tool TEXT NOT NULL, call_id TEXT, args_digest TEXT NOT NULL, "
            "args TEXT NOT NULL, decision TEXT NOT NULL, reason TEXT, outcome TEXT NOT NULL, "
            "duration_ms DOUBLE PRECISION NOT NULL, error TEXT, team_id TEXT NOT NULL DEFAULT '')"
        )
    store = PostgresApprovalStore(postgres_url, "t")
    try:
        broker = ApprovalBroker(store=store)
        request = broker.request(tool_id="t", args={"a": 1}, identity=CAROL, reason="r")
        with AuditLog(postgres_url, durability="sync", team_id="t") as audit:
            broker.audit = audit
            broker.grant(request, approver=RITA, args={"a": 2})
            [granted] = audit.query(outcome="approval_granted")
        assert broker.edit_of(request) == {"a": 2}
        assert granted.approved_args_digest == args_digest({"a": 2})
    finally:
        store.close()


def test_a_row_an_older_version_spilled_is_written_with_the_new_columns_empty(
    tmp_path: Path,
) -> None:
    from toolcards.governance.audit.log import AuditRecord

    old = (1.0, "carol", "user", "", "cli", "t", "c0", "d", "{}", "allow", None, "ok", 1.0, None)
    with AuditLog(tmp_path / "audit.db", durability="sync", spill_dir=tmp_path / "spill") as audit:
        audit.spill.add([old])  # the 14 values a row had before approved_args_digest
        audit.record(AuditRecord(2.0, "carol", "user", (), "cli", "t", "c1", {}, "allow", "ok"))
        rows = audit.query()
    assert [(r.call_id, r.approved_args_digest) for r in rows] == [("c0", None), ("c1", None)]
