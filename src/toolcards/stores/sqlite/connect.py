"""One way to open a SQLite file that several processes share (WAL, a busy timeout).

The files it opens hold audit rows, approval requests and recorded call results (a pending
call's arguments may hold a password): a file it creates is private to its user (0600), and
so are its ``-wal`` and ``-shm`` files, which SQLite creates with the database file's mode.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT = 10.0
"""Seconds a statement waits for another process's lock (and the WAL switch is retried)."""


def shared_connection(path: str | Path, *, sync: bool) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit) usable from any thread; a file
    that does not exist yet is created 0600."""
    _create_private(path)
    db = sqlite3.connect(
        str(path), check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT
    )
    db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
    try:
        enable_wal(db)
        db.execute(f"PRAGMA synchronous={'FULL' if sync else 'NORMAL'}")
    except BaseException:
        db.close()
        raise
    return db


def read_only_connection(path: str | Path, timeout: float = BUSY_TIMEOUT) -> sqlite3.Connection:
    """An autocommit connection usable from any thread that reads ``path`` and can neither
    create nor write it: a reader beside the file's writer, which (WAL) never waits for the
    writer's lock; a statement waits ``timeout`` seconds for another connection's lock.
    SQLite makes the ``-wal`` and ``-shm`` files if missing, with the file's mode."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    return sqlite3.connect(
        uri, uri=True, check_same_thread=False, isolation_level=None, timeout=timeout
    )


def _create_private(path: str | Path) -> None:
    """Create the database file, readable and writable by its user only, when it is new."""
    name = str(path)
    if name == ":memory:" or name.startswith("file:"):
        return
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError:  # a folder that does not exist: sqlite3 says so in its own words
        return
    os.close(fd)


def enable_wal(db: sqlite3.Connection, timeout: float = BUSY_TIMEOUT) -> None:
    """Switch ``db`` to WAL, retried for at most ``timeout`` seconds: the switch takes the
    file's exclusive lock and SQLite answers "database is locked" at once, without its busy
    handler, while another process opens (or switches) the same new file."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)  # a bounded backoff: the other opener holds the lock for moments
        pause = min(pause * 2, 0.2)


@contextmanager
def immediate(db: sqlite3.Connection, lock: threading.Lock) -> Iterator[sqlite3.Connection]:
    """One write transaction on ``db`` (this process's users serialised by ``lock``), taken up
    front, so that a read-then-write is atomic across processes."""
    with lock:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
