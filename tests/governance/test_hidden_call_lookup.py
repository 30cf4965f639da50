"""The rows of calls to hidden tools, resumed in a new process: a model picks how many hidden
calls one response makes, and each was looked up in the audit trail on its own (a flush, then
a scan of the caller's rows since the response), on the event loop, holding the log's lock
its writer needs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_ai.toolsets import FunctionToolset

from toolcards.governance import AuditLog, AuditRecord, GovernedToolset, Identity, Policy
from toolcards.governance.toolset.hidden import MORE_HIDDEN_CALLS
from toolcards.stores.audit_sql import KEYED, SqliteAuditTable

ALICE = Identity("alice", roles=["worker"])
POLICY = {"default_effect": "deny", "rules": [{"targets": ["pay"], "effect": "approve"}]}


def _agent(audit: AuditLog, hidden: int) -> Agent[None, Any]:
    """An agent whose first response makes ``hidden`` calls to the hidden ``secret`` beside a
    ``pay`` that pauses for approval, then says "done"."""
    inner: FunctionToolset[Any] = FunctionToolset()

    @inner.tool_plain
    def pay(x: int) -> int:
        return x

    @inner.tool_plain
    def secret(x: int) -> int:
        return x

    def model(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("done")])
        calls = [ToolCallPart("secret", {"x": i}, tool_call_id=f"c{i}") for i in range(hidden)]
        return ModelResponse(parts=[*calls, ToolCallPart("pay", {"x": 1}, tool_call_id="pay")])

    toolset = GovernedToolset(inner, policy=Policy.from_dict(POLICY), identity=ALICE, audit=audit)
    return Agent(FunctionModel(model), toolsets=[toolset], output_type=[str, DeferredToolRequests])


def _paused(path: Path, hidden: int) -> bytes:
    """The stored history of a run paused on ``pay`` (its hidden calls have no row yet)."""
    with AuditLog(path) as audit:
        first = _agent(audit, hidden).run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    return ModelMessagesTypeAdapter.dump_json(first.all_messages())


def _resume(audit: AuditLog, stored: bytes, hidden: int) -> None:
    """Resume the history as a new process does: a new agent and toolset, the pay denied."""
    history = ModelMessagesTypeAdapter.validate_json(stored)
    results = DeferredToolResults(approvals={"pay": False})
    output = _agent(audit, hidden).run_sync(message_history=history, deferred_tool_results=results)
    assert output.output == "done"


def _hidden_rows(path: Path) -> list[tuple[str, str | None, str]]:
    with AuditLog(path) as audit:
        rows = audit.query(limit=10_000)
    return [(r.tool, r.call_id, r.outcome) for r in rows if r.tool != "pay"]


def test_a_resume_looks_a_responses_hidden_calls_up_in_one_statement_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """30 hidden calls made 30 flushes and 30 scans of the caller's rows, on the event loop:
    now one statement by key, no flush, on a worker thread; one row per call across resumes."""
    path = tmp_path / "audit.db"
    stored = _paused(path, 30)
    lookups: list[int] = []
    flushes: list[int] = []
    select, flush = SqliteAuditTable.select, AuditLog.flush

    def counted_select(table: SqliteAuditTable, where: str, *args: Any) -> Any:
        if "row_key" in where:
            lookups.append(threading.get_ident())
        return select(table, where, *args)

    def counted_flush(log: AuditLog, timeout: float = 10.0) -> bool:
        flushes.append(threading.get_ident())
        return flush(log, timeout)

    monkeypatch.setattr(SqliteAuditTable, "select", counted_select)
    monkeypatch.setattr(AuditLog, "flush", counted_flush)
    for _ in range(2):
        with AuditLog(path) as audit:
            _resume(audit, stored, 30)
            runs = len(flushes)
        assert len(lookups) == 1 and runs == 0
        assert lookups.pop() != threading.get_ident()  # run_sync's loop runs on this thread
        flushes.clear()
    assert _hidden_rows(path) == [("secret", f"c{i}", "unknown_tool") for i in range(30)]


def test_hidden_calls_past_the_cap_of_a_response_share_one_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A response of 250 hidden calls made 250 rows and 250 look-ups: the first 100 have a
    row each, the other 150 one row saying how many; a resume looks up 101 keys at most."""
    path = tmp_path / "audit.db"
    stored = _paused(path, 250)
    asked: list[int] = []
    select = SqliteAuditTable.select

    def counted_select(table: SqliteAuditTable, where: str, params: list[Any], limit: int) -> Any:
        if "row_key" in where:
            asked.append(len(params) - 1)  # the caller, then the keys
        return select(table, where, params, limit)

    monkeypatch.setattr(SqliteAuditTable, "select", counted_select)
    for _ in range(2):
        with AuditLog(path) as audit:
            _resume(audit, stored, 250)
    assert asked == [101, 101]
    rows = _hidden_rows(path)
    assert rows[:100] == [("secret", f"c{i}", "unknown_tool") for i in range(100)]
    assert rows[100:] == [(MORE_HIDDEN_CALLS, None, "unknown_tool")]
    with AuditLog(path) as audit:
        (more,) = audit.query(tool=MORE_HIDDEN_CALLS)
    assert more.args == {"calls": 150, "tools": ["secret"]} and more.principal == "alice"


def test_a_busy_audit_log_holds_up_the_lookup_only_for_its_bound(tmp_path: Path) -> None:
    """While the log's writer holds its lock (waiting for another process's write lock), the
    lookup waited for it, once per hidden call: the resume now ends while the lock is still
    held, and each call still has one row."""
    path = tmp_path / "audit.db"
    stored = _paused(path, 3)
    with AuditLog(path) as audit:
        taken, done = threading.Event(), threading.Event()
        freed_by_the_run: list[bool] = []

        def writer() -> None:
            with audit._lock:
                taken.set()
                freed_by_the_run.append(done.wait(timeout=60))

        holder = threading.Thread(target=writer)
        holder.start()
        taken.wait()
        try:
            _resume(audit, stored, 3)
        finally:
            done.set()
            holder.join()
    assert freed_by_the_run == [True]
    assert _hidden_rows(path) == [("secret", f"c{i}", "unknown_tool") for i in range(3)]


@pytest.fixture(params=["sqlite", "postgres"])
def trail(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "audit.db")
    return str(request.getfixturevalue("postgres_url"))


def test_keys_are_found_among_the_callers_rows_past_a_statements_worth(trail: str) -> None:
    """420 keys of alice's rows (one of them on three rows) among 450 asked, on both stores:
    a key's extra rows keep no other key out, bob's row is not alice's, and alice's row in
    another team of the same trail is not this team's (invariant 4)."""

    def row(principal: str, key: str) -> AuditRecord:
        return AuditRecord(
            ts=time.time(), principal=principal, principal_type="user", roles=(),
            surface="python", tool="t", call_id=None, args={}, decision="deny",
            outcome="unknown_tool", key=key,
        )  # fmt: skip

    with AuditLog(trail, team_id="trail-other") as other:
        other.record(row("alice", f"{KEYED}k430"))
        assert other.flush()
    with AuditLog(trail, team_id="trail") as audit:
        for key in [*[f"{KEYED}k{i}" for i in range(420)], f"{KEYED}k0", f"{KEYED}k0"]:
            audit.record(row("alice", key))
        audit.record(row("bob", f"{KEYED}k420"))
        assert audit.flush()
        found = audit.keyed("alice", [f"{KEYED}k{i}" for i in range(450)], timeout=10.0)
    assert found == {f"{KEYED}k{i}" for i in range(420)}
