"""Glob patterns (``*``, ``**``, ``?``, ``[...]``, ``{a,b}``) and contained directory walks."""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator
from functools import lru_cache

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.paths import iter_dir, open_child_dir

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


MAX_DEPTH = 256


def iter_files(
    top: int, top_rel: str, *, hidden: bool = False
) -> Generator[tuple[str, int, str], None, None]:
    """Regular files under the held directory ``top`` (links never followed nor listed), in
    ripgrep's ``--sort=path`` order, as (path relative to the workspace, directory descriptor,
    name). The descriptor is valid until the next item is asked for.

    Every subdirectory is entered with ``O_NOFOLLOW`` relative to its parent's descriptor, so a
    directory swapped for a link while the walk runs is skipped, never followed.
    """
    prefix = "" if top_rel == "." else top_rel + "/"
    stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = []
    first = os.dup(top)
    stack.append((first, prefix, iter_dir(first)))
    try:
        while stack:
            fd, base, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                os.close(fd)
                stack.pop()
                continue
            if (not hidden and entry.name.startswith(".")) or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                child = open_child_dir(entry.name, fd) if len(stack) < MAX_DEPTH else None
                if child is not None:
                    stack.append((child, f"{base}{entry.name}/", iter_dir(child)))
            elif entry.is_file(follow_symlinks=False):
                yield base + entry.name, fd, entry.name
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def sort_key(rel: str) -> tuple[str, ...]:
    """Order of paths as ripgrep's ``--sort=path`` prints them."""
    return tuple(rel.split("/"))
