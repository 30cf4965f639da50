"""workspace_list (flat or tree) and workspace_glob (newest first), inside the workspace."""

from __future__ import annotations

import os
from pathlib import Path

from toolcards.tools.workspace.globs import glob_matches, walk_files
from toolcards.tools.workspace.paths import Contained


def render_tree(paths: Contained, start: Path, depth: int, max_entries: int) -> str:
    """Entries of ``start``: flat for depth 1, an ASCII tree deeper. Links are not followed."""
    lines: list[str] = [f"{paths.rel(start)}/"]
    budget = [max_entries]

    def walk(directory: Path, prefix: str, level: int) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: (not _is_dir(e), e.name))
        except OSError:
            return
        for k, entry in enumerate(entries):
            if budget[0] <= 0:
                return
            budget[0] -= 1
            last = k == len(entries) - 1
            branch = "" if depth == 1 else ("└── " if last else "├── ")
            lines.append(prefix + branch + _label(paths, entry))
            if _is_dir(entry) and level < depth:
                walk(
                    Path(entry.path),
                    prefix + ("" if depth == 1 else "    " if last else "│   "),
                    level + 1,
                )

    walk(start, "" if depth > 1 else "  ", 1)
    if budget[0] <= 0:
        lines.append(f"[... listing stopped after {max_entries} entries; list a subdirectory]")
    if len(lines) == 1:
        lines.append("  (empty)")
    return "\n".join(lines)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    return entry.is_dir(follow_symlinks=False)


def _label(paths: Contained, entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        where = "inside" if paths.inside_link(Path(entry.path)) else "outside the workspace"
        return f"{entry.name}@ (link, {where})"
    if entry.is_dir(follow_symlinks=False):
        return f"{entry.name}/"
    try:
        size = entry.stat(follow_symlinks=False).st_size
    except OSError:
        size = 0
    return f"{entry.name} ({size} bytes)"


def glob_files(paths: Contained, start: Path, pattern: str, max_results: int) -> str:
    """Files under ``start`` matching ``pattern`` (relative to ``start``), newest first."""
    if not start.is_dir():
        return f"{paths.rel(start)} is not a directory."
    hidden = pattern.startswith(".") or "/." in pattern
    base = paths.rel(start)
    found: list[tuple[float, str]] = []
    for rel, real in walk_files(paths.root, start, hidden=hidden):
        local = rel if base == "." else rel[len(base) + 1 :]
        if glob_matches(pattern, local):
            try:
                found.append((real.stat().st_mtime, rel))
            except OSError:
                continue
    if not found:
        return "No files found."
    found.sort(key=lambda item: (-item[0], item[1]))
    out = [rel for _, rel in found[:max_results]]
    if len(found) > max_results:
        out.append(f"[... {len(found) - max_results} more files; use a narrower pattern]")
    return "\n".join(out)
