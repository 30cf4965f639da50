"""workspace_list (flat or tree) and workspace_glob (newest first), inside the workspace.

Both walk held directory descriptors (see ``paths.py``): links are shown, never followed.
Both are bounded: the listing in entries read and shown, the glob in entries visited and
in time.
"""

from __future__ import annotations

import heapq
import os
import stat
from collections.abc import Iterator

from toolcards.tools.workspace.globs import WalkBound, glob_matches, iter_files
from toolcards.tools.workspace.paths import Contained, iter_dir, open_child_dir

MAX_GLOB_ENTRIES = 100_000
"""Entries (files, directories, links) one workspace_glob looks at: a walk of 500,000 files
took 5 to 12 s a call, and kept every match before cutting to ``max_results``."""
GLOB_TIMEOUT_S = 10.0
"""Seconds one workspace_glob walks (a slow file system reaches them before the entries)."""


def render_tree(paths: Contained, start: int, rel: str, depth: int, max_entries: int) -> str:
    """Entries of the held directory ``start``: flat for depth 1, an ASCII tree deeper;
    directories first, then by name. A directory is read for the entries left to show and one
    more, never whole (sorting 500,000 entries to show 500 took up to 3 s and 140 MiB): one too
    long to show is cut to the first entries it lists, sorted, and the note says so."""
    lines: list[str] = [f"{rel}/"]
    left, cut, partial = max_entries, False, False
    base = "" if rel == "." else rel + "/"

    def walk(fd: int, where: str, prefix: str, level: int) -> None:
        nonlocal left, cut, partial
        entries = sorted(iter_dir(fd, left + 1), key=lambda e: (not _is_dir(e), e.name))
        partial = partial or len(entries) > left > 0
        for k, entry in enumerate(entries):
            if left <= 0:
                cut = True
                return
            left -= 1
            last = k == len(entries) - 1
            branch = "" if depth == 1 else ("└── " if last else "├── ")
            lines.append(prefix + branch + _label(paths, entry, where + entry.name))
            if not _is_dir(entry) or level >= depth:
                continue
            child = open_child_dir(entry.name, fd)
            if child is None:
                continue
            try:
                inner = prefix + ("" if depth == 1 else "    " if last else "│   ")
                walk(child, f"{where}{entry.name}/", inner, level + 1)
            finally:
                os.close(child)

    walk(start, base, "" if depth > 1 else "  ", 1)
    if cut:
        order = " (the first read, sorted: not the first by name)" if partial else ""
        lines.append(f"[... listing stopped after {max_entries} entries{order}; list a "
                     "subdirectory]")  # fmt: skip
    if len(lines) == 1:
        lines.append("  (empty)")
    return "\n".join(lines)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    return entry.is_dir(follow_symlinks=False)


def _label(paths: Contained, entry: os.DirEntry[str], rel: str) -> str:
    if entry.is_symlink():
        where = "inside" if paths.link_inside(rel) else "outside the workspace"
        return f"{entry.name}@ (link, {where})"
    if entry.is_dir(follow_symlinks=False):
        return f"{entry.name}/"
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return f"{entry.name} (0 bytes)"
    if not stat.S_ISREG(st.st_mode):
        return f"{entry.name} (special file, not readable)"
    return f"{entry.name} ({st.st_size} bytes)"


def glob_files(start: int, rel: str, pattern: str, max_results: int) -> str:
    """Files under the held directory ``start`` matching ``pattern`` (relative to it), newest
    first: the ``max_results`` newest kept as they come, within :data:`MAX_GLOB_ENTRIES` and
    :data:`GLOB_TIMEOUT_S` (past them the answer says it was narrowed)."""
    bound = WalkBound(MAX_GLOB_ENTRIES, GLOB_TIMEOUT_S)
    matched = 0

    def stamped() -> Iterator[tuple[float, str]]:
        nonlocal matched
        for path, mtime in _matches(start, rel, pattern, bound):
            matched += 1
            yield -mtime, path

    out = [path for _, path in heapq.nsmallest(max_results, stamped())]
    if not out:
        out.append("No files found.")
    if matched > max_results:
        out.append(f"[... {matched - max_results} more files; use a narrower pattern]")
    if bound.narrowed:
        out.append(bound.note("pattern"))
    return "\n".join(out)


def _matches(start: int, rel: str, pattern: str, bound: WalkBound) -> Iterator[tuple[str, float]]:
    """(path, modification time) of each file the walk meets that matches ``pattern``."""
    hidden = pattern.startswith(".") or "/." in pattern
    cut = 0 if rel == "." else len(rel) + 1
    for path, fd, name in iter_files(start, rel, hidden=hidden, bound=bound):
        if glob_matches(pattern, path[cut:]):
            try:
                yield path, os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime
            except OSError:
                continue
