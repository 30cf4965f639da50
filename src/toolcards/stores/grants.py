"""Remembered approvals (grants) in SQL, beside the pending approvals: the schema and the logic
the SQLite and PostgreSQL approval stores share, and how each tells every process of a team
that its grants changed (a :class:`Stamp`).

Every row carries its ``team_id`` and every statement filters by the store's team. A revoked
grant keeps its row (revoked, with who revoked it and when): the audit trail names its id.
"""

from __future__ import annotations

import json
import mmap
import os
import secrets
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from operator import getitem
from pathlib import Path
from typing import Any, Protocol

from toolcards.core.grants import Grant
from toolcards.stores.migrate import TeamColumn

TABLE = """
CREATE TABLE IF NOT EXISTS grants (
    grant_id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL DEFAULT '',
    principal TEXT NOT NULL,
    tool_id TEXT NOT NULL,
    pattern TEXT NOT NULL,
    session TEXT NOT NULL,
    expires_at REAL NOT NULL,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    approval_id TEXT NOT NULL,
    revoked_at REAL,
    revoked_by TEXT
)
"""
INDEXES = "CREATE INDEX IF NOT EXISTS grants_team_expiry ON grants(team_id, expires_at)"
MIGRATION = TeamColumn("grants")
"""Made with its team column: nothing to migrate yet."""

_FIELDS = (
    "grant_id, principal, tool_id, pattern, session, expires_at, created_by, created_at, "
    "approval_id, revoked_at, revoked_by"
)
_LIVE = "revoked_at IS NULL AND expires_at > ?"


class Stamp(Protocol):
    """Tells every process sharing a store that its grants changed."""

    def read(self) -> object:
        """The current value (cheap: read before every governed call that needs approval)."""
        ...

    def move(self) -> None:
        """Change the value, after a change of the grants committed."""
        ...

    def close(self) -> None: ...


class CounterStamp:
    """A stamp for one process (an in-memory database)."""

    def __init__(self) -> None:
        self._value = 0

    def read(self) -> object:
        return self._value

    def move(self) -> None:
        self._value += 1

    def close(self) -> None:
        return None


class FileStamp:
    """Eight bytes in a file beside a SQLite database, mapped into every process that opens
    it: reading them costs a fraction of a microsecond, and a process that revoked a grant
    writes fresh random bytes there once its transaction committed, so the next call of every
    other process reads the grants again (random bytes: two writers never leave a value a
    reader already saw)."""

    SIZE = 8

    def __init__(self, path: Path) -> None:
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags, 0o600)  # private, as the database beside it
        try:
            if os.fstat(fd).st_size < self.SIZE:
                os.ftruncate(fd, self.SIZE)  # two processes doing it at once: still 8 bytes
            self._map = mmap.mmap(fd, self.SIZE)
        finally:
            os.close(fd)
        self._word = memoryview(self._map).cast("Q")
        self.read: Callable[[], object] = partial(getitem, self._word, 0)
        """The eight bytes as one number (a C call, no copy: read before every call that
        needs approval)."""

    def move(self) -> None:
        self._map[: self.SIZE] = secrets.token_bytes(self.SIZE)

    def close(self) -> None:
        self._word.release()
        self._map.close()


class SqlGrants:
    """One team's grants in a SQL table. ``write`` opens a write transaction that is atomic
    across processes and ``read`` a cursor, each yielding an object with ``execute(sql,
    params)`` speaking ``?`` placeholders; ``stamp`` moves after each change commits.
    ``fresh``: the stamp is read before any change can be (SQLite); else every use of a grant
    is confirmed with :meth:`live` (PostgreSQL, whose stamp moves on a notification)."""

    def __init__(
        self,
        table: str,
        team_id: str,
        write: Callable[[], AbstractContextManager[Any]],
        read: Callable[[], AbstractContextManager[Any]],
        stamp: Stamp,
        *,
        fresh: bool,
    ) -> None:
        self.table = table
        self.team_id = team_id
        self._write = write
        self._read = read
        self._stamp = stamp
        self.fresh = fresh
        self.stamp: Callable[[], object] = stamp.read
        """A value that moves with every change of the grants (see :class:`Stamp`)."""

    def add(self, grant: Grant, limit: int) -> bool:
        with self._write() as db:
            held = db.execute(
                f"SELECT count(*) FROM {self.table} WHERE team_id = ? AND {_LIVE}",
                (self.team_id, grant.created_at),
            ).fetchone()[0]
            if int(held) >= limit:
                return False
            db.execute(
                f"INSERT INTO {self.table} ({_FIELDS}, team_id) VALUES ({', '.join('?' * 12)})",
                (*_values(grant), self.team_id),
            )
        self._stamp.move()
        return True

    def revoke(self, grant_id: str, by: str, now: float) -> Grant | None:
        with self._write() as db:
            changed = db.execute(
                f"UPDATE {self.table} SET revoked_at = ?, revoked_by = ? "
                f"WHERE grant_id = ? AND team_id = ? AND {_LIVE}",
                (now, by, grant_id, self.team_id, now),
            ).rowcount
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE grant_id = ? AND team_id = ?",
                (grant_id, self.team_id),
            ).fetchone()
        if not changed:
            return None
        self._stamp.move()
        return None if row is None else _grant(row)

    def get(self, grant_id: str) -> Grant | None:
        with self._read() as db:
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE grant_id = ? AND team_id = ?",
                (grant_id, self.team_id),
            ).fetchone()
        return None if row is None else _grant(row)

    def listing(self, now: float, *, ended: bool = False, limit: int = 1000) -> list[Grant]:
        where, params = ("", ()) if ended else (f" AND {_LIVE}", (now,))
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE team_id = ?{where} "
                "ORDER BY created_at DESC, grant_id LIMIT ?",
                (self.team_id, *params, int(limit)),
            ).fetchall()
        return [_grant(row) for row in rows]

    def live(self, grant_id: str, now: float) -> bool:
        with self._read() as db:
            row = db.execute(
                f"SELECT 1 FROM {self.table} WHERE grant_id = ? AND team_id = ? AND {_LIVE}",
                (grant_id, self.team_id, now),
            ).fetchone()
        return row is not None

    def close(self) -> None:
        self._stamp.close()


def _values(grant: Grant) -> tuple[Any, ...]:
    return (
        grant.grant_id,
        grant.principal,
        grant.tool_id,
        grant.pattern_json,
        grant.session,
        grant.expires_at,
        grant.created_by,
        grant.created_at,
        grant.approval_id,
        grant.revoked_at,
        grant.revoked_by,
    )


def _grant(row: tuple[Any, ...]) -> Grant:
    (grant_id, principal, tool_id, pattern, session, expires_at, created_by, created_at,
     approval_id, revoked_at, revoked_by) = row  # fmt: skip
    return Grant(
        principal=str(principal),
        tool_id=str(tool_id),
        pattern=json.loads(str(pattern)),
        expires_at=float(expires_at),
        created_by=str(created_by),
        created_at=float(created_at),
        session=str(session),
        approval_id=str(approval_id),
        grant_id=str(grant_id),
        revoked_at=None if revoked_at is None else float(revoked_at),
        revoked_by=None if revoked_by is None else str(revoked_by),
    )
