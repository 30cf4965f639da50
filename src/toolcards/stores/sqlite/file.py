"""The SQLite store's file: the checks of its location, the one-line error of a file that
cannot be opened, and the lock file that keeps it to one writing process."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path
from typing import TextIO

from toolcards.stores.errors import StoreError, StoreLockedError

__all__ = ["LockFile", "cannot_open", "check_location"]


class LockFile:
    """An exclusive, non-blocking ``flock`` on ``<store>.lock``, released by the kernel on exit.

    A clean release removes the file (while the lock is still held). A process that opened it
    just before then may get the lock of that removed file: the lock counts only while the
    path still names the file locked, so such a process opens the path again."""

    ATTEMPTS = 5
    """Locks found on a removed file before giving up (each needs another release between)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: TextIO | None = None

    def acquire(self, store: Path) -> None:
        try:
            import fcntl  # lazy: fcntl is POSIX only
        except ImportError:  # pragma: no cover - non-POSIX: no cross-process guard
            return
        for _ in range(self.ATTEMPTS):
            fh = os.fdopen(self._open(store), "a+")  # held open for the lock's lifetime
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                fh.close()
                raise StoreLockedError(
                    f"store {store} is open for writing by another process (pid {holder}); "
                    "stop that team first, or open a copy of the file"
                ) from None
            if _names(self.path, fh):
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                self._fh = fh
                return
            fh.close()  # the lock of a file released and removed meanwhile: again
        raise StoreLockedError(f"store {store}: its lock file keeps being replaced; retry")

    def _open(self, store: Path) -> int:
        """The lock file, created when missing; never through a link at its name (one planted
        there made the pid written over whatever file it named)."""
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(self.path, flags, 0o600)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise StoreError(
                f"store {store}: its lock file {self.path} is a link, which is not followed; "
                "remove it"
            ) from None

    def release(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):  # removed while still held, then unlocked
                if _names(self.path, self._fh):
                    self.path.unlink()
            self._fh.close()  # closing the descriptor drops the flock
            self._fh = None


def _names(path: Path, fh: TextIO) -> bool:
    """Whether ``path`` is the file open as ``fh`` (it was not removed or replaced)."""
    try:
        found, held = os.stat(path), os.fstat(fh.fileno())
        return (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)
    except FileNotFoundError:
        return False


def check_location(file: Path) -> None:
    """Refuse a store path that is a folder or lies in a system directory."""
    if file.is_dir():
        raise StoreError(
            f"store {file} is a directory; give a file path inside it, e.g. {file / 'team.db'}"
        )
    if str(file).startswith(("/proc/", "/sys/", "/dev/")):
        raise StoreError(f"store {file} is in a system directory; use a path in a writable folder")


def cannot_open(file: Path, exc: BaseException) -> StoreError:
    """The error to raise when opening ``file`` failed with ``exc``: the reason and a hint."""
    reason = getattr(exc, "strerror", None) or str(exc)
    text = str(exc).lower()
    read_only = getattr(exc, "errno", None) in (errno.EROFS, errno.EACCES, errno.EPERM)
    if isinstance(exc, PermissionError) or read_only or "readonly" in text or "read-only" in text:
        hint = "the location is not writable: choose a writable folder (or fix its permissions)"
    elif isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
        hint = "the file is not a toolcards store: give another path"
    else:
        hint = "check that the folder exists and is writable"
    return StoreError(f"cannot open store {file}: {reason}; {hint}")
