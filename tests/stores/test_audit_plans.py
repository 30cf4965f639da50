"""Each secondary index of the SQLite audit table serves a query a reader runs: the filters of
`toolcards audit query` and the dashboard (a caller, a tool, a time range, a grant), the
row a durable recovery looks for (its call id, tool and caller since a time) and the rows of a
response's hidden calls (their keys). An index dropped to make rows cheaper to write turns
one of these into a scan of the team's rows."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from toolcards.governance import AuditLog, AuditRecord
from toolcards.stores import audit_sql

# what a reader asks for (the conditions AuditLog.query makes) -> the index and the terms
# it searches by
QUERIES = {
    "caller": ("principal = ?", "audit_team_principal_ts", "team_id=? AND principal=?"),
    "tool": ("tool = ?", "audit_team_tool_ts", "team_id=? AND tool=?"),
    "since": ("ts >= ?", "audit_team_ts", "team_id=? AND ts>?"),
    "time range, next page": (
        "ts >= ? AND ts <= ? AND id < ?",
        "audit_team_ts",
        "team_id=? AND ts>? AND ts<?",
    ),
    "caller and tool since": (
        "principal = ? AND tool = ? AND ts >= ?",
        "audit_team_",
        "AND ts>?",
    ),
    "recovery of a call": (
        "principal = ? AND tool = ? AND call_id = ? AND ts >= ?",
        "audit_team_",
        "AND ts>?",
    ),
    "grant": ("grant_id = ?", "audit_team_grant", "team_id=? AND grant_id=?"),
    "hidden calls of a response": (
        audit_sql.keys_of(3),
        "audit_team_hidden_key",
        "team_id=? AND row_key=?",
    ),
}


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plans") / "audit.db"
    with AuditLog(path) as log:
        for n in range(300):
            log.record(
                AuditRecord(
                    ts=time.time(), principal=f"user{n % 7}", principal_type="user", roles=(),
                    surface="python", tool=f"tool{n % 11}", call_id=f"c{n}", args={"n": n},
                    decision="allow", outcome="ok", grant_id=f"g{n}" if n % 50 == 0 else None,
                )
            )  # fmt: skip
    return path


@pytest.mark.parametrize("name", list(QUERIES))
def test_each_reader_query_is_searched_through_an_index(trail: Path, name: str) -> None:
    where, index, terms = QUERIES[name]
    sql = audit_sql.select(where)
    with sqlite3.connect(trail) as db:
        plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", [1] * sql.count("?"))]
    searches = [step for step in plan if step.startswith("SEARCH audit USING INDEX")]
    assert searches, plan
    assert index in searches[0] and terms in searches[0], plan
