"""The columns governance tables gained: the team every row belongs to, and later additions.

SQLite files are one config's (one team's): the first team to open a file with this version
owns it (recorded in the file) and claims its old rows; a reader that names no team reads the
owner's (``AuditLog("audit.db")`` shows the trail its config wrote). A PostgreSQL database may
be shared by several teams, so its old rows keep the empty team: no team sees them (an operator
assigns them with one ``UPDATE ... SET team_id = '<team>' WHERE team_id = ''``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from toolcards.stores.base import DEFAULT_TEAM


@dataclass(frozen=True)
class TeamColumn:
    """Adds ``team_id`` to ``table`` when missing and drops the indexes made without it; adds
    the ``added`` columns (name, DDL) a table made by an older version lacks; migrates the
    tables made beside it (``beside``: by the same statements, so opened with it)."""

    table: str
    drop_indexes: tuple[str, ...] = ()
    added: tuple[tuple[str, str], ...] = ()
    beside: tuple[TeamColumn, ...] = ()

    def sqlite(self, conn: sqlite3.Connection, claim_for: str, prefix: str = "") -> None:
        """Run inside the caller's write transaction (one migrating process at a time)."""
        for other in self.beside:
            other.sqlite(conn, claim_for, prefix)
        table = prefix + self.table
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for name, ddl in self.added:
            if name not in columns:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {ddl}")
        if "team_id" in columns:
            return
        conn.execute(f"ALTER TABLE {table} ADD COLUMN team_id TEXT NOT NULL DEFAULT ''")
        conn.execute(f"UPDATE {table} SET team_id = ?", (claim_for,))
        for index in self.drop_indexes:
            conn.execute(f"DROP INDEX IF EXISTS {index}")

    def current(self, conn: sqlite3.Connection, prefix: str = "") -> bool:
        """Whether :meth:`sqlite` has nothing to add (a missing table has no columns)."""
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({prefix}{self.table})")}
        wanted = {"team_id", *(name for name, _ in self.added)}
        return wanted <= columns and all(other.current(conn, prefix) for other in self.beside)

    def postgres(self, cur: Any, prefix: str = "toolcards_") -> None:
        """Run under the schema lock; old rows keep the empty team (see the module doc)."""
        for other in self.beside:
            other.postgres(cur, prefix)
        table = prefix + self.table
        columns = postgres_columns(cur, table)  # read first: see postgres_columns
        for name, ddl in self.added:
            if name not in columns:
                cur.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {ddl}")
        if "team_id" in columns:
            return
        cur.execute(f"ALTER TABLE {table} ADD COLUMN team_id TEXT NOT NULL DEFAULT ''")
        for index in self.drop_indexes:
            cur.execute(f"DROP INDEX IF EXISTS {prefix}{index}")


_OWNER = "CREATE TABLE IF NOT EXISTS toolcards_owner (team_id TEXT NOT NULL)"


def sqlite_setup(
    conn: sqlite3.Connection, table: str, migration: TeamColumn, indexes: str, team_id: str | None
) -> str:
    """Create ``table`` (with its team column; the statements of ``table`` may create tables
    beside it), migrate an old one, then create its indexes, in one write transaction.
    Returns the team: ``team_id``, or (None) the file's owner."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_OWNER)
        row = conn.execute("SELECT team_id FROM toolcards_owner").fetchone()
        if row is None:
            owner = team_id or DEFAULT_TEAM
            conn.execute("INSERT INTO toolcards_owner VALUES (?)", (owner,))
        else:
            owner = str(row[0])
        for statement in table.split(";"):
            conn.execute(statement)
        migration.sqlite(conn, owner)
        for statement in indexes.split(";"):
            if statement.strip():
                conn.execute(statement)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return team_id or owner


def sqlite_owner(conn: sqlite3.Connection, migration: TeamColumn) -> str | None:
    """The owner of a file :func:`sqlite_setup` made, read without writing (a reader beside
    the file's writer migrates nothing): None when setup would still create, claim or migrate
    something in it."""
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'toolcards_owner'"
    if conn.execute(found).fetchone() is None or not migration.current(conn):
        return None
    row = conn.execute("SELECT team_id FROM toolcards_owner").fetchone()
    return None if row is None else str(row[0])


def postgres_columns(cur: Any, table: str) -> set[str]:
    """The columns ``table`` has in the current schema (none when it does not exist), read
    without a lock: a migration asks before it alters, since an ``ALTER TABLE ... IF NOT
    EXISTS`` locks out the table's users even when it adds nothing."""
    cur.execute(
        "SELECT column_name FROM information_schema.columns WHERE "
        "table_schema = current_schema() AND table_name = %s",
        (table,),
    )
    return {str(row[0]) for row in cur.fetchall()}
