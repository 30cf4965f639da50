"""Containment: model paths are checked as text, then resolved one name at a time from a held
descriptor of the workspace directory.

Every directory on the way is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to the one
before it, and the entry itself is opened with ``O_NOFOLLOW`` relative to its directory. A
symbolic link met on the way is read and expanded by this module (``..`` pops a held
descriptor, an absolute target must name the workspace itself), never by the kernel. So a
concurrent swap of a checked directory for a link cannot lead outside: the swapped name is seen
as a link and checked again, and what was opened stays what is used.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from toolcards.core.errors import RetriableError
from toolcards.core.host_files import open_unlinked
from toolcards.tools.workspace.stored import StoredNames

MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
MAX_LINKS = 40
MAX_NAMES = 4096
"""Names one resolution walks, those its links add included (40 links of ~4 KB each add
~80,000: a walk that long is refused, not done)."""
CACHE_DIR_NAME = ".toolcards-cache"
"""Hidden sibling of the workspaces under the workspaces root (never inside a workspace)."""

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
ENTRY_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""Opening never follows a link and never blocks (a FIFO opens at once; fstat tells)."""


@dataclass(eq=False)
class Spot:
    """A location inside the workspace, resolved and held open (close it after use).

    ``parent`` is the directory that holds the entry, or the deepest existing directory when
    ``missing`` names directories still to create before ``name``. ``fd`` is the entry opened
    (when it exists and links were followed), ``st`` its status (None when it does not exist).
    A path that ends at a directory reached through ``..`` in a link (the workspace itself,
    say) has no ``parent``; ``fd`` is that directory.
    """

    parent: int | None
    name: str
    rel: str
    missing: tuple[str, ...] = ()
    fd: int | None = None
    st: os.stat_result | None = None
    _closed: bool = field(default=False, repr=False)

    @property
    def exists(self) -> bool:
        return self.st is not None

    @property
    def is_dir(self) -> bool:
        return self.st is not None and stat.S_ISDIR(self.st.st_mode)

    @property
    def is_link(self) -> bool:
        return self.st is not None and stat.S_ISLNK(self.st.st_mode)

    def opened_dir(self) -> int:
        """The descriptor of this directory; RetriableError when it is not one."""
        if not self.is_dir:
            raise RetriableError(f"{self.rel} is not a directory")
        if self.fd is None:
            raise RetriableError(f"{self.rel} changed while it was being opened; try again")
        return self.fd

    def release_entry(self) -> None:
        """Close the entry's descriptor, keeping its directory (and ``st``)."""
        if self.fd is not None and self.parent is not None:
            os.close(self.fd)
            self.fd = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd in (self.fd, self.parent):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def __enter__(self) -> Spot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Contained:
    """A workspace directory and the rules for turning model paths into places inside it."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._root_parts = self.root.parts

    def cache_dir(self, kind: str) -> Path:
        """``<workspaces root>/.toolcards-cache/<kind>/<workspace id>``: outside every listing."""
        return self.root.parent / CACHE_DIR_NAME / kind / self.root.name

    def open_root(self) -> int:
        """A new descriptor of the workspace directory (the caller closes it), opened by the
        real path it had when this was made, no name on it followed as a link: a folder on
        the way swapped for one since (an agent's, to another team's workspace) is refused
        (OSError), never followed."""
        return open_unlinked(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, "workspace")

    def locate(
        self, path: str, *, allow_root: bool = False, follow: bool = True, named: bool = True
    ) -> Spot:
        """Resolve a model path inside the workspace; RetriableError when it leads outside.

        ``follow``: a link as the last name is followed (the entry is opened, non-blocking);
        otherwise the last name is only looked at (``st`` is its lstat) and never opened.
        ``named=False``: names stay as given, no directory is read for its stored spelling
        (for a caller that asks only where the path leads: containment never depends on it).

        The name reached (``rel``) is a fixed point: given back as a path, it is read as the
        same names. The policy decides on it and the tool resolves it again: a link to
        ``" deploy"`` gave ``" deploy/x"``, which the policy saw and the tool read as
        ``deploy/x`` (surrounding blank space stripped), so such a name is refused.
        """
        parts = _names(path)
        if not parts and not allow_root:
            raise RetriableError("a path to a file inside the workspace is required")
        spot = _Walk(self, path, follow, named).run(parts, allow_root)
        if not _fixed(spot.rel):
            spot.close()
            raise RetriableError(
                f"path {path!r} leads to {spot.rel!r}, a name no path argument spells as it is "
                "(blank space at an end, say); rename it or use another path"
            )
        return spot

    def canonical(self, path: str, *, allow_root: bool = False, follow: bool = True) -> str:
        """The name the tools act on for ``path``, resolved as :meth:`locate` resolves it:
        surrounding whitespace stripped, ``.`` and empty names dropped, links inside the
        workspace followed (the last name only with ``follow``), every existing name as its
        directory stores it (its case on a case-insensitive file system); RetriableError
        where the tools refuse the path (``..``, absolute, outside, through a file) or it
        leads to a name that, given back, is not read as itself (``canonical(rel) == rel``)."""
        try:
            with self.locate(path, allow_root=allow_root, follow=follow) as spot:
                return spot.rel
        except OSError as exc:
            raise RetriableError(f"filesystem error: {exc.strerror or exc}") from None

    def exists(self, path: str) -> bool:
        """True when ``path`` names an existing entry (links followed) inside the workspace."""
        with self.locate(path) as spot:
            return spot.exists

    def link_inside(self, rel: str) -> bool:
        """For a symbolic link found while walking: True when it resolves inside. Where it
        leads is all that is asked: a listing of 500 links through a 100,000-entry directory
        read that directory 500 times for stored names no one shows."""
        try:
            self.locate(rel, allow_root=True, named=False).close()
        except (RetriableError, OSError):
            return False
        return True

    def absolute_inside(self, target: str) -> list[str] | None:
        """The names below the workspace that an absolute link target names, or None."""
        parts = PurePosixPath(target).parts
        if parts[: len(self._root_parts)] != self._root_parts:
            return None
        return list(parts[len(self._root_parts) :])


class _Walk:
    """One resolution: a stack of held directory descriptors and the real names they have."""

    def __init__(self, paths: Contained, shown: str, follow: bool, named: bool) -> None:
        self.paths = paths
        self.shown = shown
        self.follow = follow
        self.stack: list[int] = []
        self.names: list[str] = []
        self.links = 0
        self.retries = 0
        self.walked = 0
        self.stored = StoredNames() if named else None

    def run(self, parts: list[str], allow_root: bool) -> Spot:
        self.stack.append(self.paths.open_root())
        try:
            spot = self._walk(deque(parts), allow_root)
        except BaseException:
            self._close(self.stack)
            raise
        return spot

    def _walk(self, pending: deque[str], allow_root: bool) -> Spot:
        while pending:
            name = pending.popleft()
            self._count()
            if name in ("", "."):
                continue
            if name == "..":
                if not self.names:
                    raise self._escape()
                os.close(self.stack.pop())
                self.names.pop()
                continue
            if not pending:
                spot = self._last(name, pending)
                if spot is not None:
                    return spot
                continue
            fd = _try_open(name, DIR_FLAGS, self.stack[-1])
            if fd is not None:
                self.names.append(self._named(name, self.stack[-1], fd))
                self.stack.append(fd)
                continue
            kind = _lstat(name, self.stack[-1])
            if kind is not None and stat.S_ISLNK(kind.st_mode):
                self._expand(name, pending)
            elif kind is None:
                return self._missing(name, pending)
            elif stat.S_ISDIR(kind.st_mode) and self._retry():
                pending.appendleft(name)  # it was something else a moment ago: look again
            else:
                raise RetriableError(f"{self._rel(name)} is not a directory")
        if not allow_root and not self.names:
            raise RetriableError(f"path {self.shown!r} is the workspace itself, not a file")
        return self._here()

    def _last(self, name: str, pending: deque[str]) -> Spot | None:
        """The last name: opened (or looked at); None when it was a link now expanded.

        A special file that cannot be opened (a socket) comes back with ``st`` and no ``fd``;
        so does an entry that kept changing between the open and the look.
        """
        parent = self.stack[-1]
        st: os.stat_result | None = None
        for _ in range(8):
            if self.follow:
                fd = _try_open(name, ENTRY_FLAGS, parent)
                if fd is not None:
                    return self._spot(name, fd=fd, st=os.fstat(fd))
            st = _lstat(name, parent)
            if st is None or not self.follow:
                break
            if stat.S_ISLNK(st.st_mode):
                self._expand(name, pending)
                return None
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                break
        return self._spot(name, st=st)

    def _count(self) -> None:
        self.walked += 1
        if self.walked > MAX_NAMES:
            raise RetriableError(f"path {self.shown!r} walks more than {MAX_NAMES} names (links)")

    def _retry(self) -> bool:
        self.retries += 1
        if self.retries > MAX_LINKS:
            raise RetriableError(f"path {self.shown!r} keeps changing; try again")
        return True

    def _expand(self, name: str, pending: deque[str]) -> None:
        self.links += 1
        if self.links > MAX_LINKS:
            raise RetriableError(f"path {self.shown!r} has too many levels of symbolic links")
        target = os.readlink(name, dir_fd=self.stack[-1])
        if target.startswith("/"):
            below = self.paths.absolute_inside(target)
            if below is None:
                raise self._escape()
            self._close(self.stack[1:])
            del self.stack[1:]
            self.names.clear()
            pending.extendleft(reversed(below))
        else:
            pending.extendleft(reversed(target.split("/")))

    def _missing(self, name: str, pending: deque[str]) -> Spot:
        rest = [p for p in pending if p not in ("", ".")]
        if ".." in rest:
            raise RetriableError(f"not found: {self._rel(name)}")
        names = [name, *rest]
        return self._spot(names[-1], missing=tuple(names[:-1]))

    def _spot(
        self,
        name: str,
        *,
        fd: int | None = None,
        st: os.stat_result | None = None,
        missing: tuple[str, ...] = (),
    ) -> Spot:
        parent = self.stack.pop()
        self._close(self.stack)
        self.stack.clear()
        if st is not None:
            name = self._named(name, parent, st)
        rel = "/".join([*self.names, *missing, name])
        return Spot(parent, name, rel, missing, fd, st)

    def _here(self) -> Spot:
        fd = self.stack.pop()
        self._close(self.stack)
        self.stack.clear()
        rel = "/".join(self.names) or "."
        name = self.names[-1] if self.names else ""
        return Spot(None, name, rel, fd=fd, st=os.fstat(fd))

    def _named(self, name: str, dir_fd: int, entry: int | os.stat_result) -> str:
        return name if self.stored is None else self.stored.of(name, dir_fd, entry)

    def _rel(self, name: str) -> str:
        return "/".join([*self.names, name])

    def _escape(self) -> RetriableError:
        return RetriableError(
            f"path {self.shown!r} leads outside the workspace (through a symbolic link); "
            "use a path whose real location is inside the workspace"
        )

    @staticmethod
    def _close(fds: list[int]) -> None:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _try_open(name: str, flags: int, dir_fd: int) -> int | None:
    """``name`` opened relative to ``dir_fd``; None when it is a link, missing or not a dir."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOENT, errno.ENOTDIR, errno.ENXIO):
            return None
        raise


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_child_dir(name: str, dir_fd: int) -> int | None:
    """A subdirectory met while walking, opened without following links (None if it is not)."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


def make_dirs(parent: int, names: tuple[str, ...]) -> tuple[int, list[tuple[int, str]]]:
    """Create ``names`` one below the other under ``parent`` (existing ones are entered).

    Returns a new descriptor of the last directory and the (descriptor, name) pairs of the
    directories created, for an undo. Each is entered with ``O_NOFOLLOW``: a name replaced by a
    link in between is refused, never followed.
    """
    fd = os.dup(parent)
    created: list[tuple[int, str]] = []
    try:
        for name in names:
            made = False
            try:
                os.mkdir(name, dir_fd=fd)
                made = True
            except FileExistsError:
                pass
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                raise RetriableError(f"{name} is not a directory (or was replaced)") from None
            if made:
                created.append((os.dup(fd), name))
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        undo_dirs(created)
        raise
    return fd, created


def undo_dirs(created: list[tuple[int, str]], *, remove: bool = True) -> None:
    """Remove directories made by ``make_dirs`` (deepest first) and close their parents;
    ``remove=False`` only closes (the directories stay)."""
    for parent, name in reversed(created):
        if remove:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=parent)
        with contextlib.suppress(OSError):
            os.close(parent)


def iter_dir(dir_fd: int, limit: int | None = None) -> Iterator[os.DirEntry[str]]:
    """Entries of a held directory, sorted by name (empty when it cannot be read); with
    ``limit``, the first ``limit`` the directory lists, sorted (a walk within a budget)."""
    try:
        with os.scandir(dir_fd) as it:
            entries = sorted(itertools.islice(it, limit), key=lambda e: e.name)
    except OSError:
        return iter(())
    return iter(entries)


def check_pattern(pattern: str, what: str) -> str:
    """A glob or include pattern: relative, no ``..`` part, no NUL; returns it stripped."""
    text = _check_text(pattern, what)
    if text.startswith(("!", "-")):
        raise RetriableError(f"{what} {pattern!r} may not start with '!' or '-'")
    _check_relative(text, what)
    for alternative in _brace_parts(text):
        if alternative.startswith(("/", "~")):
            raise RetriableError(f"{what} {pattern!r} may not contain an absolute part")
        if ".." in PurePosixPath(alternative).parts:
            raise RetriableError(f"{what} {pattern!r} may not contain '..'")
    return text


def check_relative_path(path: str) -> str:
    """A configured relative file path (no ``..``, not absolute, not empty); returns it."""
    text = _check_text(path, "path")
    if text in ("", "."):
        raise RetriableError("a file path is required")
    _check_relative(text, "path")
    return text


def _names(path: str) -> list[str]:
    """The names a model path is read as (checked; ``.`` and empty names dropped)."""
    text = _check_text(path, "path")
    if text in ("", "."):
        return []
    _check_relative(text, "path")
    return [p for p in text.split("/") if p not in ("", ".")]


def _fixed(rel: str) -> bool:
    """True when ``rel``, given as a path, is read as exactly its own names: resolving a
    canonical name again can then strip, drop or decode no part of it (and act elsewhere)."""
    try:
        return rel == "." or _names(rel) == rel.split("/")
    except RetriableError:
        return False


def _check_text(value: str, what: str) -> str:
    if not isinstance(value, str):
        raise RetriableError(f"{what} must be a string")
    if "\x00" in value:
        raise RetriableError(f"{what} contains a NUL byte")
    if not value.isascii():  # as the file system spells it: escaped bytes decoded as UTF-8
        try:
            value = value.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise RetriableError(
                f"{what} holds a lone surrogate (U+D800-U+DFFF), which no file name has"
            ) from None
    text = value.strip()
    if len(text) > MAX_PATH_CHARS:
        raise RetriableError(f"{what} is longer than {MAX_PATH_CHARS} characters")
    for name in text.split("/"):
        if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise RetriableError(f"{what} has a name longer than {MAX_NAME_BYTES} bytes")
    return text


def _check_relative(text: str, what: str) -> None:
    if text.startswith(("/", "~", "\\")) or (len(text) > 1 and text[1] == ":"):
        raise RetriableError(
            f"{what} {text!r} is absolute; use a path relative to the workspace (e.g. 'src/a.py')"
        )
    if ".." in PurePosixPath(text.replace("\\", "/")).parts:
        raise RetriableError(f"{what} {text!r} may not contain '..'; stay inside the workspace")


def _brace_parts(text: str) -> list[str]:
    """The pattern with every ``{`` and ``,`` treated as a separator (for the ``..`` check)."""
    flat = text
    for ch in "{},":
        flat = flat.replace(ch, "\n")
    return [p for p in flat.split("\n") if p] + [text]
