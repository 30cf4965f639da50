"""Glob patterns (``*``, ``**``, ``?``, ``[...]``, ``{a,b}``) and contained directory walks."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from toolcards.core.errors import RetriableError

MAX_BRACE_EXPANSIONS = 64


def expand_braces(pattern: str) -> list[str]:
    """``src/*.{py,md}`` -> ``[src/*.py, src/*.md]`` (nested braces supported, bounded)."""
    start = pattern.find("{")
    if start == -1:
        return [pattern]
    depth = 0
    parts: list[str] = []
    last = start + 1
    for k in range(start, len(pattern)):
        ch = pattern[k]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                parts.append(pattern[last:k])
                head, tail = pattern[:start], pattern[k + 1 :]
                out: list[str] = []
                for part in parts:
                    out.extend(expand_braces(head + part + tail))
                    if len(out) > MAX_BRACE_EXPANSIONS:
                        raise RetriableError("pattern expands to too many alternatives")
                return out
        elif ch == "," and depth == 1:
            parts.append(pattern[last:k])
            last = k + 1
    return [pattern]


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
                continue
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> tuple[re.Pattern[str], bool]:
    """A regex for ``pattern`` and whether it applies to the whole path (it has a ``/``)."""
    alternatives = expand_braces(pattern)
    anchored = any("/" in a.strip("/") or a.startswith("**") for a in alternatives)
    body = "|".join(_translate(a.strip("/")) for a in alternatives)
    try:
        return re.compile(f"(?:{body})\\Z"), anchored
    except re.error as exc:
        raise RetriableError(f"invalid glob pattern {pattern!r}: {exc}") from None


def glob_matches(pattern: str, rel: str) -> bool:
    """True when workspace-relative ``rel`` matches; a pattern without ``/`` matches the name
    at any depth (like ripgrep's ``--glob``)."""
    regex, anchored = compile_glob(pattern)
    target = rel if anchored else rel.rsplit("/", 1)[-1]
    return regex.match(target) is not None


def walk_files(root: Path, start: Path, *, hidden: bool = False) -> list[tuple[str, Path]]:
    """Regular files under ``start`` (symbolic links never followed nor listed), in ripgrep's
    ``--sort=path`` order. Returns (path relative to root, path) pairs."""
    if start.is_file():
        return [(start.relative_to(root).as_posix(), start)]
    found: list[tuple[str, Path]] = []
    stack: list[Path] = [start]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if (not hidden and entry.name.startswith(".")) or entry.is_symlink():
                continue
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                stack.append(path)
            elif entry.is_file(follow_symlinks=False):
                found.append((path.relative_to(root).as_posix(), path))
    found.sort(key=lambda item: sort_key(item[0]))
    return found


def sort_key(rel: str) -> tuple[str, ...]:
    """Order of paths as ripgrep's ``--sort=path`` prints them."""
    return tuple(rel.split("/"))
