"""Names as their directory stores them (the case a case-insensitive file system keeps)."""

from __future__ import annotations

import os


def stored_name(name: str, dir_fd: int, entry: int | os.stat_result) -> str:
    """``name`` as the directory ``dir_fd`` stores it (``entry``: the entry opened, or its
    status). Only a case-insensitive file system (or directory) opens ``DEPLOY`` for a stored
    ``deploy``; the stored name is then found by its inode. An ASCII name without letters, or
    whose other case is absent or another entry, is stored as given (and so is any name
    when the directory cannot be read)."""
    try:
        return _stored(name, dir_fd, entry)
    except OSError:
        return name


def _stored(name: str, dir_fd: int, entry: int | os.stat_result) -> str:
    if name.isascii():
        twin = name.swapcase()
        if twin == name:
            return name
        other = os.stat(twin, dir_fd=dir_fd, follow_symlinks=False)  # absent: raises
    else:
        other = None
    st = os.fstat(entry) if isinstance(entry, int) else entry
    if other is not None and (other.st_ino, other.st_dev) != (st.st_ino, st.st_dev):
        return name
    stored = name
    with os.scandir(dir_fd) as it:
        for item in it:
            if item.name == name:
                return name
            if item.inode() == st.st_ino:
                stored = item.name
    return stored
