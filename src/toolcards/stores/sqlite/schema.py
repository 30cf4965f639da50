"""The SQLite team store's schema and its migrations: the one place that creates or changes
its tables (:func:`migrate`, run in the transaction that opens a store)."""

from __future__ import annotations

import re
import sqlite3

from toolcards.stores import applied_calls
from toolcards.stores.events_sql import add_envelope_columns, check_schema
from toolcards.stores.rows import EVENT_ENVELOPE_COLUMNS, SCHEMA_VERSION

__all__ = ["is_current", "migrate"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS teams (
    team_id TEXT PRIMARY KEY, created_at REAL NOT NULL, stopped_at REAL,
    last_pos INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS actors (
    team_id TEXT NOT NULL, name TEXT NOT NULL, actor_cls TEXT NOT NULL,
    config_cls TEXT, config TEXT, created_at REAL NOT NULL,
    PRIMARY KEY (team_id, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state (
    team_id TEXT NOT NULL, actor TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (team_id, actor, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    pos INTEGER PRIMARY KEY, team_id TEXT NOT NULL, tool_id TEXT NOT NULL,
    seq INTEGER NOT NULL, payload TEXT NOT NULL, timestamp REAL NOT NULL,
    payload_type TEXT, team_pos INTEGER, event_id TEXT, sender TEXT, display_type TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS events_tool_seq ON events (team_id, tool_id, seq);
CREATE TABLE IF NOT EXISTS tool_seqs (
    team_id TEXT NOT NULL, tool_id TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (team_id, tool_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state_versions (
    team_id TEXT NOT NULL, actor TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (team_id, actor)
) WITHOUT ROWID
"""

_V1_TO_V2 = [
    "UPDATE events SET team_pos = ranked.n FROM (SELECT pos, ROW_NUMBER() OVER "
    "(PARTITION BY team_id ORDER BY pos) AS n FROM events) AS ranked "
    "WHERE events.pos = ranked.pos",
    "DROP INDEX IF EXISTS events_team_pos",
    "INSERT OR REPLACE INTO tool_seqs SELECT team_id, tool_id, MAX(seq) FROM events "
    "GROUP BY team_id, tool_id",
    "UPDATE teams SET last_pos = COALESCE((SELECT MAX(team_pos) FROM events e "
    "WHERE e.team_id = teams.team_id), 0)",
]
"""Version 1 -> 2: dense per-team positions and per-tool last seqs (payload types: NULL)."""


def migrate(conn: sqlite3.Connection, location: str) -> None:
    """Bring the store at ``location`` to :data:`SCHEMA_VERSION` (created when new); a store
    of a newer layout is refused before anything is written."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    row = None
    if exists:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    version = SCHEMA_VERSION if row is None else int(row[0])
    check_schema(location, version)
    if version < 2:  # tables of version 1 lack columns the new CREATEs would add
        conn.execute("ALTER TABLE events ADD COLUMN payload_type TEXT")
        conn.execute("ALTER TABLE events ADD COLUMN team_pos INTEGER")
        conn.execute("ALTER TABLE teams ADD COLUMN last_pos INTEGER NOT NULL DEFAULT 0")
    for statement in [*_SCHEMA.split(";"), *applied_calls.statements("")]:
        conn.execute(statement)  # a store written before a table gains it here
    columns = [row[1] for row in conn.execute("PRAGMA table_info(events)")]
    add_envelope_columns(conn.execute, "", columns)
    if version < 2:
        for statement in _V1_TO_V2:
            conn.execute(statement)
    conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS events_team_pos2 ON events (team_id, team_pos)")
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
        (str(SCHEMA_VERSION),),
    )


def is_current(conn: sqlite3.Connection, location: str) -> bool:
    """Whether :func:`migrate` has nothing to change in the store at ``location`` (read
    only: a reader of the file runs beside its writer, and cannot migrate it); a store of a
    newer layout is refused."""
    tables = {t[0] for t in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    row = None
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    version = 0 if row is None else int(row[0])
    check_schema(location, version)
    created = ";".join([_SCHEMA, *applied_calls.statements("")])
    wanted = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", created))
    columns = {column[1] for column in conn.execute("PRAGMA table_info(events)")}
    envelope = {name for name, _ in EVENT_ENVELOPE_COLUMNS}
    return version == SCHEMA_VERSION and wanted <= tables and envelope <= columns
