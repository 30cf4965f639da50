"""Names as their directory stores them (the case a case-insensitive file system keeps)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class _Listing:
    """What one read of a directory tells: its names, and a name of each inode."""

    names: frozenset[str]
    by_inode: dict[int, str]


class StoredNames:
    """Stored names for one resolution, each directory read at most once.

    A link target such as ``é/../é/..`` enters the same directory again and again; reading
    it each time cost a full directory read per name (thousands for one path)."""

    def __init__(self) -> None:
        self._listings: dict[tuple[int, int], _Listing] = {}

    def of(self, name: str, dir_fd: int, entry: int | os.stat_result) -> str:
        """``name`` as the directory ``dir_fd`` stores it (``entry``: the entry opened, or its
        status). Only a case-insensitive file system (or directory) opens ``DEPLOY`` for a
        stored ``deploy``; the stored name is then found by its inode. An ASCII name without
        letters, or whose other case is absent or another entry, is stored as given (and so is
        any name when the directory cannot be read)."""
        try:
            return self._stored(name, dir_fd, entry)
        except OSError:
            return name

    def _stored(self, name: str, dir_fd: int, entry: int | os.stat_result) -> str:
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
        listing = self._listing(dir_fd)
        if name in listing.names:
            return name
        return listing.by_inode.get(st.st_ino, name)

    def _listing(self, dir_fd: int) -> _Listing:
        here = os.fstat(dir_fd)
        key = (here.st_dev, here.st_ino)
        listing = self._listings.get(key)
        if listing is None:
            with os.scandir(dir_fd) as it:
                entries = [(item.name, item.inode()) for item in it]
            by_inode = {inode: stored for stored, inode in entries}  # the last of hard links
            listing = _Listing(frozenset(stored for stored, _ in entries), by_inode)
            self._listings[key] = listing
        return listing
