"""workspace_list (flat or tree) and workspace_glob (newest first), inside the workspace.

Both walk held directory descriptors (see ``paths.py``): links are shown, never followed.
"""

from __future__ import annotations

import os
import stat

from toolcards.tools.workspace.globs import glob_matches, iter_files
from toolcards.tools.workspace.paths import Contained, iter_dir, open_child_dir


def render_tree(paths: Contained, start: int, rel: str, depth: int, max_entries: int) -> str:
    """Entries of the held directory ``start``: flat for depth 1, an ASCII tree deeper."""
    lines: list[str] = [f"{rel}/"]
    budget = [max_entries]
    base = "" if rel == "." else rel + "/"

    def walk(fd: int, where: str, prefix: str, level: int) -> None:
        entries = sorted(iter_dir(fd), key=lambda e: (not _is_dir(e), e.name))
        for k, entry in enumerate(entries):
            if budget[0] <= 0:
                return
            budget[0] -= 1
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
    if budget[0] <= 0:
        lines.append(f"[... listing stopped after {max_entries} entries; list a subdirectory]")
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
    first."""
    hidden = pattern.startswith(".") or "/." in pattern
    cut = 0 if rel == "." else len(rel) + 1
    found: list[tuple[float, str]] = []
    for path, fd, name in iter_files(start, rel, hidden=hidden):
        if glob_matches(pattern, path[cut:]):
            try:
                found.append((os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime, path))
            except OSError:
                continue
    if not found:
        return "No files found."
    found.sort(key=lambda item: (-item[0], item[1]))
    out = [path for _, path in found[:max_results]]
    if len(found) > max_results:
        out.append(f"[... {len(found) - max_results} more files; use a narrower pattern]")
    return "\n".join(out)
