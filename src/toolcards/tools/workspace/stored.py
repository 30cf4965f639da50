"""Names as their directory stores them (the case a case-insensitive file system keeps)."""

from __future__ import annotations

import itertools
import os
import unicodedata
from dataclasses import dataclass

from toolcards.core.errors import RetriableError

MAX_LISTED = 65_536
"""Entries one resolution reads to learn stored names (~40 ms): only a directory that opens
another spelling of the name as the same entry is read, but it could hold millions."""


@dataclass(frozen=True)
class _Listing:
    """What one read of a directory tells: its names, a name of each inode, and whether the
    read saw every entry (or stopped at :data:`MAX_LISTED`)."""

    names: frozenset[str]
    by_inode: dict[int, str]
    whole: bool


class StoredNames:
    """Stored names for one resolution, each directory read at most once, and all of them
    within :data:`MAX_LISTED` entries.

    A link target such as ``é/../é/..`` enters the same directory again and again; reading
    it each time cost a full directory read per name (thousands for one path)."""

    def __init__(self) -> None:
        self._listings: dict[tuple[int, int], _Listing] = {}
        self._left = MAX_LISTED

    def of(self, name: str, dir_fd: int, entry: int | os.stat_result) -> str:
        """``name`` as the directory ``dir_fd`` stores it (``entry``: the entry opened, or its
        status). Only a case- or normalisation-insensitive file system (or directory) opens
        ``DEPLOY`` for a stored ``deploy`` (or ``é`` for a stored ``e`` + accent); the stored
        name is then found by its inode. A name no other spelling opens as the same entry is
        stored as given (and so is any name when the directory cannot be read); one the
        entries read within the bound do not show is refused (RetriableError)."""
        try:
            return self._stored(name, dir_fd, entry)
        except OSError:
            return name

    def _stored(self, name: str, dir_fd: int, entry: int | os.stat_result) -> str:
        if not _aliased(name, dir_fd, entry):
            return name
        st = _status(entry)
        listing = self._listing(dir_fd)
        if name in listing.names:
            return name
        found = listing.by_inode.get(st.st_ino)
        if found is None and not listing.whole:
            raise RetriableError(
                f"cannot tell how its directory stores {name!r} within the {MAX_LISTED} "
                "entries a path may read; use a smaller directory"
            )
        return name if found is None else found

    def _listing(self, dir_fd: int) -> _Listing:
        here = os.fstat(dir_fd)
        key = (here.st_dev, here.st_ino)
        listing = self._listings.get(key)
        if listing is None:
            with os.scandir(dir_fd) as it:
                read = [(item.name, item.inode()) for item in itertools.islice(it, self._left + 1)]
            whole = len(read) <= self._left
            entries = read[: self._left]
            self._left -= len(entries)
            by_inode = {inode: stored for stored, inode in entries}  # the last of hard links
            listing = _Listing(frozenset(stored for stored, _ in entries), by_inode, whole)
            self._listings[key] = listing
        return listing


def _aliased(name: str, dir_fd: int, entry: int | os.stat_result) -> bool:
    """True when another case or normal form of ``name`` opens the same entry in ``dir_fd``:
    the directory aliases spellings, so the one stored is not known without reading it. Where
    every other spelling is absent (or another entry), the name opened is the one stored."""
    for twin in _twins(name):
        try:
            other = os.stat(twin, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:  # absent, or a spelling too long to be a name
            continue
        st = _status(entry)
        if (other.st_ino, other.st_dev) == (st.st_ino, st.st_dev):
            return True
    return False


def _status(entry: int | os.stat_result) -> os.stat_result:
    return os.fstat(entry) if isinstance(entry, int) else entry


def _twins(name: str) -> set[str]:
    """The other spellings of ``name`` an insensitive file system opens as it: its other case
    (an ASCII name) or its other cases and normal forms (NFC, NFD). A name without them (no
    letters, or caseless and normalised, like ``日本``) is stored as given."""
    forms = {name.swapcase()}
    if not name.isascii():
        forms |= {name.casefold(), *(unicodedata.normalize(f, name) for f in ("NFC", "NFD"))}
    forms.discard(name)
    return forms
