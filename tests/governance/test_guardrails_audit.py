"""The audit trail's ``hook`` column: a trail written before it gains it (SQLite and
PostgreSQL), its old rows read as hook-less, and a refused call's row names its hook."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from toolcards.governance import (
    AuditLog,
    CapabilityRegistry,
    Executor,
    HookContext,
    Identity,
    Policy,
    Refuse,
    input_guardrail,
)

pytestmark = pytest.mark.anyio

OLD_COLUMNS = (
    "id {id}, ts {real} NOT NULL, principal TEXT NOT NULL, principal_type TEXT NOT NULL, "
    "roles TEXT NOT NULL, surface TEXT NOT NULL, tool TEXT NOT NULL, call_id TEXT, "
    "args_digest TEXT NOT NULL, args TEXT NOT NULL, decision TEXT NOT NULL, reason TEXT, "
    "outcome TEXT NOT NULL, duration_ms {real} NOT NULL, error TEXT, "
    "team_id TEXT NOT NULL DEFAULT ''"
)
OLD_ROW = (
    "(ts, principal, principal_type, roles, surface, tool, call_id, args_digest, args, "
    "decision, reason, outcome, duration_ms, error, team_id) VALUES "
    "(1.0, 'agent', 'agent', '', 'cli', 'old_tool', 'c0', 'd', '{}', 'allow', NULL, 'ok', "
    "1.0, NULL, 'crm')"
)


def ping(n: int) -> int:
    """Answer n."""
    return n


@input_guardrail
def closed(ctx: HookContext, args: dict[str, Any]) -> Refuse:
    return Refuse("closed")


async def _refused_call(audit: AuditLog) -> None:
    registry = CapabilityRegistry.from_tools([ping])
    executor = Executor(registry, Policy.allow_all(), audit=audit, hooks=[closed])
    await executor.call("ping", {"n": 1}, Identity("alice"))


def _rows(audit: AuditLog) -> list[tuple[str, str, str | None]]:
    return [(e.tool, e.outcome, e.hook) for e in audit.tail(10)]


async def test_an_sqlite_trail_from_before_hooks_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    columns = OLD_COLUMNS.format(id="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL")
    old.executescript(
        f"CREATE TABLE audit ({columns});"
        "CREATE TABLE toolcards_owner (team_id TEXT NOT NULL);"
        "INSERT INTO toolcards_owner VALUES ('crm');"
        f"INSERT INTO audit {OLD_ROW};"
    )
    old.commit()
    old.close()
    with AuditLog(path, durability="sync", team_id="crm") as audit:
        await _refused_call(audit)
        assert _rows(audit) == [("old_tool", "ok", None), ("ping", "refused", "closed")]


async def test_a_postgres_trail_from_before_hooks_gains_the_column(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as db:
        columns = OLD_COLUMNS.format(id="BIGSERIAL PRIMARY KEY", real="DOUBLE PRECISION")
        db.execute(f"CREATE TABLE toolcards_audit ({columns})")
        db.execute(f"INSERT INTO toolcards_audit {OLD_ROW}")
    with AuditLog(postgres_url, durability="sync", team_id="crm") as audit:
        await _refused_call(audit)
        assert _rows(audit) == [("old_tool", "ok", None), ("ping", "refused", "closed")]
