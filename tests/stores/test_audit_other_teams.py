"""A reader of a team without audit rows is told which other teams have rows in its table
(``AuditLog.elsewhere``: the dashboard's empty audit page, ``toolcards audit``). Finding them
takes one probe of a team-led index a team, however many rows those teams hold: a shared
PostgreSQL table holds the rows of every team."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg

from toolcards.stores import audit_sql
from toolcards.stores.postgres.governance import PostgresAuditTable, postgres_ddl

_FILL = (
    "INSERT INTO audit (ts, principal, principal_type, roles, surface, tool, args_digest, args, "
    "decision, outcome, duration_ms, team_id) WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL "
    "SELECT i + 1 FROM n WHERE i < ?) "
    "SELECT i, 'alice', 'user', '', 'mcp', 'pay', 'd', '{}', 'allow', 'ok', 1.0, ? FROM n"
)
"""``?`` rows of team ``?`` (SQL of both databases)."""


def _trail(rows: dict[str, int]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.executescript(f"{audit_sql.TABLE};{audit_sql.INDEXES}")
    for team, count in rows.items():
        db.execute(_FILL, (count, team))
    return db


def _steps(db: sqlite3.Connection, team_id: str) -> tuple[list[str], int]:
    """The other teams, and the steps of SQLite's machine it took to find them."""
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    db.set_progress_handler(step, 1)
    try:
        return audit_sql.other_teams(db, team_id), steps
    finally:
        db.set_progress_handler(None, 1)


def test_other_teams_take_the_same_steps_however_many_rows_they_hold() -> None:
    db = _trail({"": 3, "acme": 3, "beta": 3})
    few = _steps(db, "new")
    for team in ("", "acme", "beta"):
        db.execute(_FILL, (5000, team))
    assert _steps(db, "new") == few
    assert few[0] == ["", "acme", "beta"]


def test_other_teams_are_the_first_ones_but_the_readers_own() -> None:
    teams = [f"t{n:02}" for n in range(15)]
    db = _trail(dict.fromkeys(teams, 2))
    assert audit_sql.other_teams(db, "t03") == [team for team in teams if team != "t03"][:10]
    assert audit_sql.other_teams(db, "new") == teams[:10]
    assert audit_sql.other_teams(db, "t00", limit=2) == ["t01", "t02"]
    assert audit_sql.other_teams(_trail({"t00": 2}), "t00") == []


class _Recorded:
    """A cursor that keeps the statement it is given (and finds nothing)."""

    sql = ""
    params: Any = ()

    def execute(self, sql: str, params: Any = ()) -> _Recorded:
        self.sql, self.params = sql, params
        return self

    def fetchall(self) -> list[Any]:
        return []


def _rows_read(plan: dict[str, Any], table: str) -> float:
    """The rows of ``table`` the nodes of an executed plan read, sub-plans included."""
    own = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 0)
    read = own if plan.get("Relation Name") == table else 0
    return read + sum(_rows_read(child, table) for child in plan.get("Plans", []))


def test_other_teams_read_no_other_teams_rows_on_postgresql(postgres_url: str) -> None:
    teams = {"": 3, "acme": 20000, "beta": 3}
    table = PostgresAuditTable(postgres_url, "new")
    try:
        with psycopg.connect(postgres_url, autocommit=True) as db:
            for team, count in teams.items():
                db.execute(postgres_ddl(_FILL).replace("?", "%s"), (count, team))
            db.execute("ANALYZE toolcards_audit")
            statement = _Recorded()
            audit_sql.other_teams(statement, "new")
            sql = postgres_ddl(statement.sql).replace("?", "%s")
            row = db.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", statement.params).fetchone()
        assert row is not None
        assert _rows_read(row[0][0]["Plan"], "toolcards_audit") <= len(teams) + 1  # one a probe
        assert table.other_teams() == list(teams)
    finally:
        table.close()
