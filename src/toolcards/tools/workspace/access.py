"""The one way in to workspace files for code outside the workspace tools.

MCP resources (reads, listings, subscriptions), the dashboard, prompts and reports read
workspace files only through this module; ``tests/test_containment_rule.py`` enforces it. Both
functions use the tools' own containment (``paths.py``, ``textfile.py``): the path is walked one
name at a time from a held descriptor of the workspace directory with ``O_NOFOLLOW`` (links
met on the way are expanded by the walk and must stay inside), the file is opened with
``O_NOFOLLOW | O_NONBLOCK`` (a FIFO opens at once and is refused by ``fstat``, never read), and
only a regular file with one name (``st_nlink == 1``: a hard link may be a second name of an
outside file) within the size cap is read, from that descriptor, at most ``cap`` bytes.

Hidden names (``.env``, ``.git/config``: a name starting with a dot, or anything below one) are
neither listed nor read, whichever way they are spelled or reached (a link inside that leads to
one): what :func:`list_files` shows is exactly what :func:`read_bytes` reads.

Every refusal is an :class:`AccessRefused` with a one-line reason; surfaces report it as
"not found", so a caller learns nothing about what lies behind a refused name.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from toolcards.core.errors import RetriableError, ToolcardsError
from toolcards.tools.workspace.globs import WalkBound, iter_files
from toolcards.tools.workspace.listing import MAX_GLOB_ENTRIES
from toolcards.tools.workspace.paths import Contained
from toolcards.tools.workspace.textfile import read_fd, regular_fd

MAX_LIST_ENTRIES = MAX_GLOB_ENTRIES
"""Entries (files, directories, links) one :func:`list_files` walks, as many as a glob: the
``limit`` counts only files it shows, so one file beside 1,000,000 links (never shown) had
every listing and resource completion read, sort and stat them all (3.6 s, 193 MiB)."""
LIST_TIMEOUT_S = 2.0
"""Seconds one :func:`list_files` walks: it answers every ``resources/list`` and completion,
so it waits less than a glob (100,000 entries take about 0.3 s on a local disk)."""


class AccessRefused(ToolcardsError, LookupError):
    """A workspace file that is missing, outside, special, hard-linked or over the cap."""


def read_bytes(root: Path, rel: str, cap: int) -> bytes:
    """The bytes of the regular file ``rel`` (relative to the workspace ``root``).

    Raises :class:`AccessRefused` when ``rel`` leads outside (a ``..``, an absolute path, a link
    to the outside, also one swapped in while this runs), is not a regular file, has other
    names (hard links), is hidden (as written or as resolved), or is larger than ``cap`` bytes.
    """
    try:
        with Contained(root).locate(rel) as spot:
            if _hidden(rel) or _hidden(spot.rel):
                raise AccessRefused("no such file")  # what a listing never shows
            fd = regular_fd(spot, cap=cap, allow_hardlinks=False)
            return read_fd(fd, cap, spot.rel)
    except (RetriableError, OSError, ValueError) as exc:
        raise AccessRefused(_reason(exc)) from None


def list_files(root: Path, limit: int, *, bound: WalkBound | None = None) -> list[str]:
    """Up to ``limit`` files of the workspace ``root``, relative to it, in path order.

    Only what :func:`read_bytes` would read is listed: regular files with one name. Hidden
    names (and what is below them) and links are skipped; every directory is entered from its
    parent's descriptor with ``O_NOFOLLOW``, so a directory swapped for a link is skipped,
    never followed. The walk stays within ``bound`` (default :data:`MAX_LIST_ENTRIES` and
    :data:`LIST_TIMEOUT_S`): past it the listing is shorter, and ``bound.narrowed`` says so.
    Raises :class:`AccessRefused` when the workspace cannot be opened.
    """
    bound = WalkBound(MAX_LIST_ENTRIES, LIST_TIMEOUT_S) if bound is None else bound
    found: list[str] = []
    if limit <= 0:
        return found
    try:
        top = Contained(root).open_root()
    except (OSError, ValueError) as exc:
        raise AccessRefused(_reason(exc)) from None
    try:
        with contextlib.closing(iter_files(top, ".", bound=bound)) as files:
            for rel, dir_fd, name in files:
                if _single_regular(name, dir_fd):
                    found.append(rel)
                    if len(found) >= limit:
                        break
    finally:
        os.close(top)
    return found


def _hidden(rel: str) -> bool:
    return any(name.startswith(".") and name != "." for name in rel.split("/"))


def _single_regular(name: str, dir_fd: int) -> bool:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
