"""The audit table: its SQLite schema and the statements both audit stores use."""

from __future__ import annotations

SCHEMA = """
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
    error TEXT
);
CREATE INDEX IF NOT EXISTS audit_principal_ts ON audit(principal, ts);
CREATE INDEX IF NOT EXISTS audit_tool_ts ON audit(tool, ts);
CREATE INDEX IF NOT EXISTS audit_ts ON audit(ts);
"""
COLUMNS = (
    "ts, principal, principal_type, roles, surface, tool, call_id, args_digest, args, "
    "decision, reason, outcome, duration_ms, error"
)
INSERT = f"INSERT INTO audit ({COLUMNS}) VALUES ({', '.join('?' * 14)})"
