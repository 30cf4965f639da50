"""One way to open a SQLite file that several processes share (WAL, a busy timeout)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def shared_connection(path: str | Path, *, sync: bool) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit) usable from any thread."""
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=10.0)
    db.execute("PRAGMA busy_timeout=10000")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={'FULL' if sync else 'NORMAL'}")
    return db
