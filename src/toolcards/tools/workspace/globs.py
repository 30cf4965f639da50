"""Glob patterns (``*``, ``**``, ``?``, ``[...]``, ``{a,b}``) and contained directory walks."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from functools import lru_cache
from typing import Any

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.paths import iter_dir, open_child_dir
from toolcards.tools.workspace.work_budget import WorkBudget

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


_STAR = "*"
_GLOBSTAR = "**"
_Token = str | re.Pattern[str]
"""A segment's token: one character to equal, ``?`` (any one), ``*`` (any run), or a
compiled ``[...]`` class matching one character."""


def _segment(text: str) -> tuple[_Token, ...]:
    """The tokens of one ``/``-free part of a pattern (``**`` inside a part is ``*``, as in
    gitignore)."""
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "*":
            if not tokens or tokens[-1] != _STAR:
                tokens.append(_STAR)
        elif ch == "[" and (end := text.find("]", i + 2)) != -1:
            body = text[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            try:
                tokens.append(re.compile("[" + body.replace("\\", "\\\\") + "]"))
            except re.error as exc:
                raise RetriableError(f"invalid glob class [{text[i + 1 : end]}]: {exc}") from None
            i = end + 1
            continue
        else:
            tokens.append(ch)
        i += 1
    return tuple(tokens)


MAX_GLOB_STEPS = 10_000
"""Steps one path's match may take (a pattern needs tens; past it the pattern is refused)."""


def _wild_match(
    items: tuple[Any, ...], text: Sequence[Any], star: Any, one: Any, budget: WorkBudget
) -> bool:
    """Whether ``items`` (with ``star`` matching any run) match all of ``text``, item by item
    through ``one(item, part, budget)``: the greedy walk that, on a mismatch, lets the last
    star take one more part. At most ``len(items) * len(text)`` steps, within ``budget`` (a
    regex backtracks through every way its stars can split the text:
    ``*a*a*a*a*a*a*a*b`` took 18 s on one name of 60 characters)."""
    t = i = 0
    last_star, mark = -1, 0
    steps = 0
    while t < len(text):
        steps += 1
        if i < len(items) and items[i] is star:
            last_star, mark = i, t
            i += 1
        elif i < len(items) and one(items[i], text[t], budget):
            i += 1
            t += 1
        elif last_star >= 0:
            i, mark = last_star + 1, mark + 1
            t = mark
        else:
            break
    else:
        while i < len(items) and items[i] is star:
            i += 1
        budget.spend(steps)
        return i == len(items)
    budget.spend(steps)
    return False


def _one(token: _Token, ch: str, _budget: WorkBudget) -> bool:
    if isinstance(token, str):
        return token == "?" or token == ch
    return token.fullmatch(ch) is not None


_NameTest = Callable[[str, WorkBudget], bool]


def _name_test(tokens: tuple[_Token, ...]) -> _NameTest:
    """A test of one name against a part's tokens: a string comparison for the common shapes
    (``name``, ``*.py``, ``test_*``, ``test_*.py``), else the wildcard walk."""
    if all(isinstance(t, str) and t not in ("?", _STAR) for t in tokens):
        literal = "".join(tokens)  # type: ignore[arg-type]
        return lambda name, _: name == literal
    stars = [k for k, t in enumerate(tokens) if t is _STAR]
    rest = [t for t in tokens if t is not _STAR]
    if len(stars) == 1 and all(isinstance(t, str) and t != "?" for t in rest):
        head = "".join(tokens[: stars[0]])  # type: ignore[arg-type]
        tail = "".join(tokens[stars[0] + 1 :])  # type: ignore[arg-type]
        least = len(head) + len(tail)
        return lambda name, _: len(name) >= least and name.startswith(head) and name.endswith(tail)
    return lambda name, budget: _wild_match(tokens, name, _STAR, _one, budget)


def _tested(test: _NameTest, name: str, budget: WorkBudget) -> bool:
    return test(name, budget)


class _Glob:
    """One alternative of a pattern: its ``/``-separated parts, each a ``**`` (any number of
    directories; at the end, at least one name) or a test of one name."""

    __slots__ = ("deep", "parts")

    def __init__(self, pattern: str) -> None:
        parts: list[Any] = []
        for text in pattern.split("/"):
            if text == "**":
                if not parts or parts[-1] is not _GLOBSTAR:
                    parts.append(_GLOBSTAR)
            else:
                parts.append(_name_test(_segment(text)))
        if parts and parts[-1] is _GLOBSTAR:  # `src/**`: something inside src
            parts.insert(-1, _name_test((_STAR,)))
        self.parts = tuple(parts)
        self.deep = _GLOBSTAR in parts

    def matches(self, path: str, budget: WorkBudget) -> bool:
        parts = self.parts
        if len(parts) == 1 and not self.deep:
            return "/" not in path and parts[0](path, budget)
        names = path.split("/")
        if not self.deep:
            if len(names) != len(parts):
                return False
            return all(test(name, budget) for test, name in zip(parts, names, strict=True))
        return _wild_match(parts, names, _GLOBSTAR, _tested, budget)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> tuple[tuple[_Glob, ...], bool]:
    """The alternatives of ``pattern`` and whether it applies to the whole path (it has a
    ``/``, or starts with ``**``)."""
    alternatives = expand_braces(pattern)
    anchored = any("/" in a.strip("/") or a.startswith("**") for a in alternatives)
    return tuple(_Glob(a.strip("/")) for a in alternatives), anchored


def glob_matches(pattern: str, rel: str) -> bool:
    """True when workspace-relative ``rel`` matches; a pattern without ``/`` matches the name
    at any depth (like ripgrep's ``--glob``). RetriableError when the match of ``rel`` takes
    more than :data:`MAX_GLOB_STEPS` (linear work: at most the pattern's length times the
    path's)."""
    globs, anchored = compile_glob(pattern)
    target = rel if anchored else rel.rsplit("/", 1)[-1]
    budget = WorkBudget(MAX_GLOB_STEPS, lambda: _too_costly(pattern))
    return any(glob.matches(target, budget) for glob in globs)


MAX_DEPTH = 256


class WalkBound:
    """Entries (files, directories, links) and seconds one walk may take: no directory is read
    past the entries left (those read are walked), and the walk stops when the seconds ran
    out; ``narrowed`` tells either."""

    __slots__ = ("deadline", "entries", "narrowed", "visited")

    def __init__(self, entries: int, seconds: float) -> None:
        self.entries = entries
        self.deadline = time.monotonic() + seconds
        self.visited = 0
        self.narrowed = False

    def listed(self, dir_fd: int) -> Iterator[os.DirEntry[str]]:
        """The held directory's entries, sorted, as many as the budget leaves (one more is
        read to tell that it ran out)."""
        left = self.entries - self.visited
        found = list(iter_dir(dir_fd, left + 1))
        if len(found) > left:
            self.narrowed = True
            del found[left:]
        self.visited += len(found)
        return iter(found)

    def expired(self) -> bool:
        """True (``narrowed``) once the seconds ran out."""
        if time.monotonic() < self.deadline:
            return False
        self.narrowed = True
        return True

    def note(self, narrower: str) -> str:
        """The line a cut answer ends with (``narrower``: what else the caller can narrow)."""
        return f"[narrowed: visited {self.visited} entries, narrow the path or {narrower}]"


def iter_files(
    top: int, top_rel: str, *, hidden: bool = False, bound: WalkBound | None = None
) -> Generator[tuple[str, int, str], None, None]:
    """Regular files under the held directory ``top`` (links never followed nor listed), in
    ripgrep's ``--sort=path`` order, as (path relative to the workspace, directory descriptor,
    name). The descriptor is valid until the next item is asked for. With ``bound``, the walk
    ends where the bound runs out (a directory is read for the entries left, not whole).

    Every subdirectory is entered with ``O_NOFOLLOW`` relative to its parent's descriptor, so a
    directory swapped for a link while the walk runs is skipped, never followed.
    """
    prefix = "" if top_rel == "." else top_rel + "/"
    stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = []

    def listed(fd: int) -> Iterator[os.DirEntry[str]]:
        return iter_dir(fd) if bound is None else bound.listed(fd)

    first = os.dup(top)
    stack.append((first, prefix, listed(first)))
    try:
        while stack:
            if bound is not None and bound.expired():
                return
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
                    stack.append((child, f"{base}{entry.name}/", listed(child)))
            elif entry.is_file(follow_symlinks=False):
                yield base + entry.name, fd, entry.name
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def sort_key(rel: str) -> tuple[str, ...]:
    """Order of paths as ripgrep's ``--sort=path`` prints them."""
    return tuple(rel.split("/"))


def _too_costly(pattern: str) -> str:
    return (
        f"glob pattern {pattern!r} takes more than {MAX_GLOB_STEPS:,} steps to match one path; "
        "use fewer '*' and '**'"
    )
