"""One way to open a SQLite file that several processes share (WAL, a busy timeout).

The files it opens hold audit rows, approval requests and recorded call results (a pending
call's arguments may hold a password): a file it creates is private to its user (0600), and
so are its ``-wal`` and ``-shm`` files, which SQLite creates with the database file's mode.

A file that lies where agents write (:func:`~toolcards.core.host_files.where_agents_write`,
judged of the path as given: a data config's database) is opened with no link followed on its
path: an agent could plant one (at the file's name or a folder's) after the config was checked,
and the opener read and wrote the host's database through it. The operator's own files are
opened with their links followed.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from toolcards.core.host_files import where_agents_write

BUSY_TIMEOUT = 10.0
"""Seconds a statement waits for another process's lock (and the WAL switch is retried)."""


def shared_connection(path: str | Path, *, sync: bool) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit) usable from any thread; a file
    that does not exist yet is created 0600."""
    db = connect(path, private=True)
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
    return connect(path, read_only=True, timeout=timeout)


def connect(
    path: str | Path,
    *,
    read_only: bool = False,
    private: bool = False,
    timeout: float = BUSY_TIMEOUT,
) -> sqlite3.Connection:
    """An autocommit connection to ``path`` usable from any thread (``read_only``: it can
    neither create nor write the file; ``private``: a file that does not exist yet is created
    0600); a statement waits ``timeout`` seconds for another connection's lock. A file where
    agents write is opened only when no name on its path is a link, before and after SQLite
    opened it (sqlite3.OperationalError naming the link)."""
    file = _agents_file(path)
    name = str(file or path)
    if private:
        _create_private(name)
    if read_only:
        name = f"{(file or Path(path).resolve()).as_uri()}?mode=ro"
    db = sqlite3.connect(
        name, uri=read_only, check_same_thread=False, isolation_level=None, timeout=timeout
    )
    # SQLite opens the name it resolved every link of: a link planted since the check shows
    if file is not None and db.execute("PRAGMA database_list").fetchone()[2] != str(file):
        db.close()
        raise _through_a_link(file)
    return db


def database_path(path: str | Path) -> Path:
    """``path`` made absolute, as a store names its file: kept as given (no name on it a link:
    sqlite3.OperationalError naming it) where agents write, else with its links resolved."""
    return _agents_file(path) or Path(path).resolve()


def _agents_file(path: str | Path) -> Path | None:
    """``path`` made absolute when it names a file where agents write (sqlite3.OperationalError
    when a name on it is a link), else None (the operator's file, or a database in memory)."""
    name = str(path)
    if name in ("", ":memory:") or name.startswith("file:") or not where_agents_write(name):
        return None
    file = Path(os.path.abspath(name))
    if os.path.realpath(file) != str(file):
        raise _through_a_link(file)
    return file


def _through_a_link(file: Path) -> sqlite3.OperationalError:
    """The refusal of ``file``, reached through a link: the first link on its path named."""
    link = next((p for p in (*reversed(file.parents), file) if p.is_symlink()), None)
    if link is None:
        where = "a link was on its path while it was opened"
    else:
        where = "it is a link" if link == file else f"{link} on its path is a link"
    return sqlite3.OperationalError(
        f"database {file} lies where agents write and {where}, which is not followed"
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
