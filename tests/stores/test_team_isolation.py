"""Two teams in one database never see each other's rows: audit, approvals, grants, rate
buckets, budget counters and team state, on SQLite, PostgreSQL and memory (the contract every
backend passes; invariant 4: every row belongs to a team)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from toolcards.core.approvals import ApprovalRequest, ApprovalState
from toolcards.core.grants import Grant
from toolcards.core.identity import Identity
from toolcards.governance import AuditLog
from toolcards.stores.base import ApprovalStore, RateLimits, Spend
from toolcards.stores.open import (
    open_approvals,
    open_budgets,
    open_rate_limits,
    open_stores,
    open_tasks,
)

NOW = 1_000.0


@dataclass(frozen=True)
class Limit:
    index: int
    count: int
    period: float


def _request(call_id: str, principal: str = "carol") -> ApprovalRequest:
    return ApprovalRequest(
        call_id=call_id,
        tool_id="pay",
        args_digest="d1",
        principal=principal,
        args={"amount": 5},
        reason="needs a human",
        expires_at=NOW + 60,
        surface="python",
        identity=Identity(principal, roles=["finance"]),
        created_at=NOW,
    )


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    if request.param == "memory":
        return ":memory:"
    return str(tmp_path / "shared.db")


@pytest.fixture
def approvals(location: str) -> Iterator[tuple[ApprovalStore, ApprovalStore]]:
    a, close_a = open_approvals(location, "a")
    b, close_b = open_approvals(location, "b")
    yield a, b
    for close in (close_a, close_b):
        if close is not None:
            close()


def test_a_team_never_lists_another_teams_pending_approvals(
    approvals: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = approvals
    a.add(_request("call-a"), NOW)
    b.add(_request("call-b"), NOW)
    assert [r.request.call_id for r in a.pending(NOW)] == ["call-a"]
    assert [r.request.call_id for r in b.pending(NOW)] == ["call-b"]


def test_a_team_cannot_decide_or_read_another_teams_request(
    approvals: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = approvals
    record = a.add(_request("call-a"), NOW)
    approval_id = record.request.approval_id
    assert b.get(approval_id) is None
    assert b.decide(approval_id, ApprovalState.GRANTED, "mallory", NOW) is None
    assert b.take(record.request.binding, approved=True, now=NOW) is None
    assert b.remove(approval_id) is False
    assert a.get(approval_id) is not None
    assert a.pending(NOW)[0].state is ApprovalState.PENDING


def test_the_same_binding_in_two_teams_is_two_requests(
    approvals: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = approvals
    a.add(_request("same"), NOW)
    b.add(_request("same"), NOW)
    granted = b.take(_request("same").binding, approved=True, now=NOW)
    assert granted is not None and granted.state is ApprovalState.GRANTED
    assert [r.request.call_id for r in a.pending(NOW)] == ["same"]


def _grant(grant_id: str) -> Grant:
    pattern = {"amount": {"eq": 5}}
    return Grant("carol", "pay", pattern, NOW + 60, "rita", NOW, grant_id=grant_id)


def test_a_team_never_sees_uses_or_revokes_another_teams_grants(
    approvals: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = (store.grants for store in approvals)  # type: ignore[attr-defined]
    assert a.add(_grant("g-a"), 10) and b.add(_grant("g-b"), 10)
    assert [g.grant_id for g in a.listing(NOW)] == ["g-a"]
    assert [g.grant_id for g in b.listing(NOW, ended=True)] == ["g-b"]
    assert b.get("g-a") is None and not b.live("g-a", NOW)
    assert b.revoke("g-a", "mallory", NOW) is None
    assert a.live("g-a", NOW)


def test_a_team_full_of_grants_leaves_another_team_room(
    approvals: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = (store.grants for store in approvals)  # type: ignore[attr-defined]
    assert a.add(_grant("g-1"), 1)
    assert not a.add(_grant("g-2"), 1)  # a holds its one live grant
    assert b.add(_grant("g-3"), 1)


_WRITES: dict[str, tuple[str, Callable[[Any, str], object]]] = {
    "approvals": ("_tx", lambda store, name: store.add(_request(name), NOW)),
    "grants": ("_grants_tx", lambda store, name: store.grants.add(_grant(name), 10)),
}


@pytest.mark.parametrize("kind", list(_WRITES))
def test_a_teams_open_transaction_holds_up_only_its_own_team(postgres_url: str, kind: str) -> None:
    """Team a's approvals (grants) transaction locked the table every team shares: team b's
    request (grant) waited behind it until it failed DatabaseBusy. Team a's own writers still
    go one by one."""
    opened = [open_approvals(postgres_url, team) for team in ("a", "b", "a")]
    (a, _), (b, _), (a_elsewhere, _) = opened  # a_elsewhere: another process of team a
    tx, write = _WRITES[kind]
    outcomes: dict[str, str] = {}

    def writing(store: Any, name: str) -> threading.Thread:
        def run() -> None:
            try:
                write(store, name)
                outcomes[name] = "written"
            except Exception as exc:
                outcomes[name] = repr(exc)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    try:
        with getattr(a, tx)(), psycopg.connect(postgres_url, autocommit=True) as watch:
            writing(b, "b").join(60)
            assert outcomes.get("b") == "written"
            own = writing(a_elsewhere, "a")
            assert _a_session_waits_for_a_lock(watch)
            assert own.is_alive() and "a" not in outcomes  # it waits for team a's lock
        own.join(60)
        assert outcomes.get("a") == "written"
    finally:
        for _, close in opened:
            if close is not None:
                close()


def _a_session_waits_for_a_lock(watch: psycopg.Connection[Any]) -> bool:
    """Whether, within 30 s, a session of the test's database waits for a lock."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (waiting,) = watch.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone() or (0,)
        if waiting:
            return True
        time.sleep(0.01)
    return False


def test_budget_counters_and_keys_belong_to_their_team(location: str) -> None:
    a, close_a = open_budgets(location, "a")
    b, close_b = open_budgets(location, "b")
    try:
        one = [Spend("pay-calls", 1, 1)]
        assert a.take("call-1", one, NOW) is None
        assert a.take(None, one, NOW) == 0  # a's budget is spent
        assert b.take("call-1", one, NOW) is None  # b's own counter, and b's own key
        assert b.take(None, one, NOW) == 0
        assert a.spent(["pay-calls"]) == {"pay-calls": 1.0} == b.spent(["pay-calls"])
        assert [c for c, _, _ in a.listing(NOW)] == ["pay-calls"]
    finally:
        for close in (close_a, close_b):
            if close is not None:
                close()


def test_rate_buckets_belong_to_their_team(location: str) -> None:
    if location == ":memory:":
        pytest.skip("memory buckets are one limiter object per team; nothing is shared")
    a, close_a = open_rate_limits(location, "a")
    b, close_b = open_rate_limits(location, "b")
    limits: list[RateLimits] = [a, b]
    try:
        one_per_hour = [Limit(0, 1, 3600.0)]
        assert limits[0].acquire(one_per_hour, "agent", "pay") == 0.0
        assert limits[0].acquire(one_per_hour, "agent", "pay") > 0.0
        assert limits[1].acquire(one_per_hour, "agent", "pay") == 0.0  # b's first call
    finally:
        for close in (close_a, close_b):
            if close is not None:
                close()


def test_a_principal_with_a_separator_in_its_id_has_its_own_bucket(location: str) -> None:
    if location == ":memory:":
        pytest.skip("memory buckets are keyed by tuples")
    limiter, close = open_rate_limits(location, "a")
    try:
        one = [Limit(0, 1, 3600.0)]
        assert limiter.acquire(one, "x|y", "z") == 0.0
        assert limiter.acquire(one, "x", "y|z") == 0.0
    finally:
        if close is not None:
            close()


def _log(location: str, team: str) -> AuditLog:
    return AuditLog(location, durability="sync", team_id=team, flush_on_signal=False)


def _row(log: AuditLog, tool: str) -> None:
    from toolcards.governance.audit.log import AuditRecord

    log.record(AuditRecord(NOW, "agent", "agent", (), "python", tool, "c1", {}, "allow", "ok"))


def test_a_team_reads_only_its_own_audit_rows(location: str) -> None:
    if location == ":memory:":
        pytest.skip("an in-memory audit table is one connection's: nothing is shared")
    a, b = _log(location, "a"), _log(location, "b")
    try:
        _row(a, "tool_of_a")
        _row(b, "tool_of_b")
        assert [e.tool for e in a.tail(10)] == ["tool_of_a"]
        assert [e.tool for e in b.query(tool="tool_of_a")] == []
        assert [e.tool for e in b.tail(10)] == ["tool_of_b"]
    finally:
        a.close()
        b.close()


def test_team_state_rows_belong_to_their_team(location: str) -> None:
    with open_stores(location, "a") as stores:
        stores.state.open_team("a")
        stores.state.open_team("b")
        stores.state.state_put("a", "#Board", "k", {"v": 1})
        assert stores.state.state_get("b", "#Board", "k") is None
        assert stores.state.state_items("b", "#Board") == []


def test_an_audit_file_written_before_teams_is_claimed_by_its_first_team(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, "
        "principal TEXT NOT NULL, principal_type TEXT NOT NULL, roles TEXT NOT NULL, "
        "surface TEXT NOT NULL, tool TEXT NOT NULL, call_id TEXT, args_digest TEXT NOT NULL, "
        "args TEXT NOT NULL, decision TEXT NOT NULL, reason TEXT, outcome TEXT NOT NULL, "
        "duration_ms REAL NOT NULL, error TEXT);"
        "CREATE INDEX audit_ts ON audit(ts);"
        "INSERT INTO audit (ts, principal, principal_type, roles, surface, tool, call_id, "
        "args_digest, args, decision, reason, outcome, duration_ms, error) VALUES "
        "(1.0, 'agent', 'agent', '', 'cli', 'old_tool', 'c0', 'd', '{}', 'allow', NULL, 'ok', "
        "1.0, NULL);"
    )
    old.commit()
    old.close()
    first, second = _log(str(path), "crm"), _log(str(path), "other")
    try:
        assert [e.tool for e in first.tail(10)] == ["old_tool"]
        assert second.tail(10) == []
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    "opener", ["audit", "approvals", "rate_limits", "call_results", "stores", "tasks"]
)
def test_a_shared_database_refuses_a_store_opened_without_a_team(
    postgres_url: str, opener: str
) -> None:
    from toolcards.stores.postgres.call_results import PostgresCallResults

    open_without_team = {
        "audit": lambda: AuditLog(postgres_url),
        "approvals": lambda: open_approvals(postgres_url),
        "rate_limits": lambda: open_rate_limits(postgres_url),
        "call_results": lambda: PostgresCallResults(postgres_url),
        "stores": lambda: open_stores(postgres_url),
        "tasks": lambda: open_tasks(postgres_url),
    }[opener]
    with pytest.raises(ValueError, match=r"^team_id: a PostgreSQL store holds many teams") as no:
        open_without_team()
    assert "\n" not in str(no.value)
