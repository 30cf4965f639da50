"""The PostgreSQL team store's schema: a version table, its tables, and the columns an older
store gains, created or migrated by :func:`migrate` on first use (under an advisory lock, so
processes opening one database at once do not race).

A store of the current layout is opened without taking a lock on any of its tables: PostgreSQL
takes a table's SHARE lock for ``CREATE INDEX IF NOT EXISTS`` (and an ACCESS EXCLUSIVE lock
for ``ALTER TABLE ... ADD COLUMN IF NOT EXISTS``) before it finds the index or column already
there, and holds it until the migration commits. A process opening the store while others
write would make their writes wait, and deadlock with a writer holding a table the migration
locks next; :func:`run_ddl` skips such a statement when its index exists, and columns are
added only when missing.
"""

from __future__ import annotations

import re
from typing import Any

from toolcards.core.identity import joined_key
from toolcards.stores import applied_calls
from toolcards.stores.events_sql import add_envelope_columns, check_schema
from toolcards.stores.migrate import postgres_columns
from toolcards.stores.postgres.connections import placeholders
from toolcards.stores.rows import SCHEMA_VERSION

__all__ = ["keyed_lock", "migrate", "run_ddl"]

_SCHEMA_LOCK = 7_264_331_942  # advisory lock id guarding schema creation

_CREATE_INDEX = re.compile(r"\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS toolcards_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS toolcards_teams (team_id TEXT PRIMARY KEY, "
    "created_at DOUBLE PRECISION NOT NULL, stopped_at DOUBLE PRECISION, "
    "last_pos BIGINT NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS toolcards_actors (team_id TEXT NOT NULL, name TEXT NOT NULL, "
    "tag TEXT NOT NULL, config TEXT, created_at DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (team_id, name))",
    "CREATE TABLE IF NOT EXISTS toolcards_state (team_id TEXT NOT NULL, actor TEXT NOT NULL, "
    'key TEXT COLLATE "C" NOT NULL, value TEXT NOT NULL, PRIMARY KEY (team_id, actor, key))',
    "CREATE TABLE IF NOT EXISTS toolcards_events (team_id TEXT NOT NULL, "
    "team_pos BIGINT NOT NULL, tool_id TEXT NOT NULL, seq BIGINT NOT NULL, "
    "payload TEXT NOT NULL, payload_type TEXT, timestamp DOUBLE PRECISION NOT NULL, "
    "event_id TEXT, sender TEXT, display_type TEXT, PRIMARY KEY (team_id, team_pos))",
    "CREATE UNIQUE INDEX IF NOT EXISTS toolcards_events_tool_seq "
    "ON toolcards_events (team_id, tool_id, seq)",
    "CREATE TABLE IF NOT EXISTS toolcards_tool_seqs (team_id TEXT NOT NULL, "
    "tool_id TEXT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (team_id, tool_id))",
    "CREATE TABLE IF NOT EXISTS toolcards_actor_versions (team_id TEXT NOT NULL, "
    "actor TEXT NOT NULL, version BIGINT NOT NULL, PRIMARY KEY (team_id, actor))",
    "CREATE TABLE IF NOT EXISTS toolcards_state_tombstones (team_id TEXT NOT NULL, "
    'actor TEXT NOT NULL, changed BIGINT NOT NULL, key TEXT COLLATE "C" NOT NULL, '
    "PRIMARY KEY (team_id, actor, changed, key))",
    "CREATE TABLE IF NOT EXISTS toolcards_state_pruned (team_id TEXT NOT NULL, "
    "actor TEXT NOT NULL, through BIGINT NOT NULL, PRIMARY KEY (team_id, actor))",
]
_STATE_CHANGED = [  # rows written before the column read 0: older than any copy's version
    "ALTER TABLE toolcards_state ADD COLUMN IF NOT EXISTS changed BIGINT NOT NULL DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS toolcards_state_changed "
    "ON toolcards_state (team_id, actor, changed)",
]


def keyed_lock(cur: Any, *parts: str) -> None:
    """On the cursor ``cur``, inside a transaction: take the advisory lock of the key
    :func:`~toolcards.core.identity.joined_key` makes of ``parts``, held until it ends."""
    cur.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (joined_key(*parts),),  # 'a/b'+'c' is not 'a'+'b/c'
    )


def migrate(cur: Any, location: str) -> None:
    """Inside a transaction, on the cursor ``cur``: bring the store at ``location`` to
    :data:`SCHEMA_VERSION`; a store of a newer layout is refused (nothing commits)."""
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
    for statement in [*_SCHEMA, *applied_calls.statements("toolcards_")]:
        run_ddl(cur, statement)  # a store written before a table gains it here
    events = postgres_columns(cur, "toolcards_events")
    add_envelope_columns(placeholders(cur), "toolcards_", events)
    if "changed" not in postgres_columns(cur, "toolcards_state"):
        for statement in _STATE_CHANGED:
            run_ddl(cur, statement)
    cur.execute("SELECT value FROM toolcards_meta WHERE key='schema_version'")
    row = cur.fetchone()
    if row is not None:
        check_schema(location, int(row[0]))
    cur.execute(
        "INSERT INTO toolcards_meta VALUES ('schema_version', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (str(SCHEMA_VERSION),),
    )


def run_ddl(cur: Any, statement: str) -> None:
    """Run one of the store's own DDL statements on ``cur``, except a ``CREATE INDEX IF NOT
    EXISTS`` whose index exists (looked up without a lock: see the module doc)."""
    named = _CREATE_INDEX.match(statement)
    if named is not None:
        cur.execute("SELECT to_regclass(%s)", (named.group(1),))
        found = cur.fetchone()
        if found is not None and found[0] is not None:
            return
    cur.execute(statement)
