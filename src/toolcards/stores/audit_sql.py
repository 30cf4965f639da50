"""The audit table: its schema, its team migration and the statements both audit stores use.

Rows carry their ``team_id``; every statement the stores run filters by the table's team.
"""

from __future__ import annotations

from toolcards.stores.migrate import TeamColumn

TABLE = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    principal TEXT NOT NULL,
    principal_type TEXT NOT NULL,
    roles TEXT NOT NULL,
    surface TEXT NOT NULL,
    tool TEXT NOT NULL,
    call_id TEXT,
    args_digest TEXT NOT NULL,
    args TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT,
    outcome TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    error TEXT,
    team_id TEXT NOT NULL DEFAULT '',
    approved_args_digest TEXT,
    hook TEXT,
    grant_id TEXT
)
"""
INDEXES = """
CREATE INDEX IF NOT EXISTS audit_team_principal_ts ON audit(team_id, principal, ts);
CREATE INDEX IF NOT EXISTS audit_team_tool_ts ON audit(team_id, tool, ts);
CREATE INDEX IF NOT EXISTS audit_team_ts ON audit(team_id, ts);
CREATE INDEX IF NOT EXISTS audit_team_grant ON audit(team_id, grant_id)
"""
MIGRATION = TeamColumn(
    "audit",
    drop_indexes=("audit_principal_ts", "audit_tool_ts", "audit_ts"),
    added=(("approved_args_digest", "TEXT"), ("hook", "TEXT"), ("grant_id", "TEXT")),
)
"""Tables written before gain the team, the digest of an approver's edited arguments (NULL
in older rows: they ran as called), the guardrail hook that refused or changed a call and the
grant (a remembered approval) that let it run."""

COLUMNS = (
    "ts, principal, principal_type, roles, surface, tool, call_id, args_digest, args, "
    "decision, reason, outcome, duration_ms, error, approved_args_digest, hook, grant_id"
)
WIDTH = COLUMNS.count(",") + 1
"""Values in a row (a row kept by an older version may have fewer: the later ones are NULL)."""
INSERT = f"INSERT INTO audit ({COLUMNS}, team_id) VALUES ({', '.join('?' * (WIDTH + 1))})"


def select(where: str) -> str:
    """The query for one team's rows matching ``where`` (``?`` placeholders: the team, the
    condition's values, then the limit), newest first."""
    condition = f"team_id = ? AND ({where})" if where else "team_id = ?"
    return f"SELECT id, {COLUMNS} FROM audit WHERE {condition} ORDER BY id DESC LIMIT ?"
