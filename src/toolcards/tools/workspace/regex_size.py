"""How large a ``regex`` pattern compiles, weighed from its text before it is compiled.

The ``regex`` package compiles a counted repeat by copying its body ``min`` times, in C, with
the interpreter lock held and nothing that can stop it: ``(?:a{1000}){6000}`` (20
characters) takes seconds and gigabytes. A pattern is therefore weighed first, by a small
scanner of the syntax that decides the copies (groups, sets, escapes, comments, counted
repeats): each atom counts once times the product of the minimum counts of the repeats around
it, and a pattern heavier than :data:`MAX_PATTERN_SIZE` is refused; compiling the rest takes
milliseconds at most.

The scanner never weighs less than ``regex`` compiles: where its reading and the package's
could differ (a ``[`` inside a set, a ``#`` that verbose mode may read as a comment holding
brackets, unbalanced groups), it falls back to the bound ``len(pattern)`` times the product of
every count in the pattern.
"""

from __future__ import annotations

import re

from toolcards.core.errors import RetriableError, ToolcardsError

MAX_PATTERN_SIZE = 50_000
"""Nodes of the compiled pattern with every counted repeat copied out (about 1 microsecond of
compile each); a search pattern a person writes weighs a few hundred."""

_VERBOSE = 64  # regex.VERBOSE (== re.VERBOSE); the package itself is not imported here
_INLINE_VERBOSE = re.compile(r"\(\?[\^\w-]*x[\^\w-]*[:)]")
_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
_COUNT_SPACED = re.compile(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}")  # verbose mode allows spaces
_POSIX_CLASS = re.compile(r"\[:\^?\w+:\]")
_ANY_COUNT = re.compile(r"\{\s*(\d+)")


class AmbiguousPattern(ToolcardsError):
    """The scanner's reading may differ from the package's: the coarse bound is used (never
    raised out of :func:`pattern_weight`)."""


def check_pattern_size(pattern: str, flags: int = 0) -> None:
    """Raise RetriableError when ``pattern`` compiles to more than MAX_PATTERN_SIZE nodes.
    A pattern that does not parse is weighed all the same: compiling it reports the error."""
    if pattern_weight(pattern, flags, MAX_PATTERN_SIZE) > MAX_PATTERN_SIZE:
        raise RetriableError(
            f"pattern too large: its counted repeats such as {{1000}} expand to more than "
            f"{MAX_PATTERN_SIZE:,} steps; use smaller counts, or + and *"
        )


def pattern_weight(pattern: str, flags: int = 0, cap: int = MAX_PATTERN_SIZE) -> int:
    """Atoms of ``pattern`` with repeats copied out ``min`` times (at least this much is what
    ``regex`` compiles); the count stops a little past ``cap``."""
    verbose = bool(flags & _VERBOSE) or _INLINE_VERBOSE.search(pattern) is not None
    try:
        return _scan(pattern, verbose, cap)
    except AmbiguousPattern:
        return _coarse(pattern, cap)


def _coarse(pattern: str, cap: int) -> int:
    """``len(pattern)`` times every count in it: no reading of the pattern weighs more."""
    total = max(1, len(pattern))
    for found in _ANY_COUNT.finditer(pattern):
        total *= max(1, int(found.group(1)))
        if total > cap:
            return total
    return total


def _scan(pattern: str, verbose: bool, cap: int) -> int:
    # one frame per open group: [weight of what the group holds so far, weight of its last unit]
    frames: list[list[int]] = [[0, 0]]
    count = _COUNT_SPACED if verbose else _COUNT
    i, end = 0, len(pattern)
    while i < end:
        char = pattern[i]
        frame = frames[-1]
        if verbose and char.isspace():
            if not frame[1]:  # a count after it may repeat it: weigh it as an atom
                frame[0] += 1
                frame[1] = 1
            i += 1
            continue
        if char == "#" and verbose and ("\n" in pattern or _structural(pattern, i)):
            raise AmbiguousPattern  # verbose mode may read a comment there, holding structure
        if char == "(":
            if pattern.startswith("(?#", i):
                i = _comment_end(pattern, i + 3)
                continue
            flags = re.match(r"\(\?[\^\w-]*\)", pattern[i:])
            if flags is not None:
                i += len(flags.group())  # an inline flag group: no atom
                continue
            frames.append([1, 0])  # the group's own node
            i += 1
            continue
        if char == ")":
            if len(frames) == 1:
                raise AmbiguousPattern
            weight = frames.pop()[0]
            frames[-1][0] += weight
            frames[-1][1] = weight
            i += 1
        elif char == "|":
            frame[1] = 0
            i += 1
        elif (
            char == "{"
            and frame[1]
            and (found := count.match(pattern, i)) is not None
            and (found.group(1) or found.group(2))
        ):
            times = max(1, int(found.group(1) or 0))
            frame[0] += frame[1] * (times - 1)
            frame[1] *= times
            i = found.end()
        elif char in "*+?":
            i += 1  # a minimum of 0 or 1 copies nothing
        else:
            start, i = i, _set_end(pattern, i) if char == "[" else _escape_end(pattern, i)
            weight = i - start if char == "[" else 1  # a set compiles one item per member
            frame[0] += weight
            frame[1] = weight
        if frame[0] > cap:
            return frame[0]
    if len(frames) != 1:
        raise AmbiguousPattern
    return frames[0][0]


def _structural(pattern: str, start: int) -> bool:
    return any(c in pattern[start:] for c in "()[]\\")


def _comment_end(pattern: str, i: int) -> int:
    """The index after a ``(?#...)`` comment whose text starts at ``i`` (``\\`` escapes)."""
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
        elif pattern[i] == ")":
            return i + 1
        else:
            i += 1
    raise AmbiguousPattern


def _escape_end(pattern: str, i: int) -> int:
    """The index after the atom at ``i``: one character, or an escape with its argument."""
    if pattern[i] != "\\":
        return i + 1
    if i + 2 < len(pattern) and pattern[i + 1] in "pPN" and pattern[i + 2] == "{":
        close = pattern.find("}", i + 3)
        return len(pattern) if close < 0 else close + 1
    return i + 2


def _set_end(pattern: str, i: int) -> int:
    """The index after the set opening at ``i``; a ``[`` inside (a nested set in version 1,
    a literal in version 0) other than a POSIX class is ambiguous."""
    i += 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1  # a leading ] is literal
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
        elif char == "]":
            return i + 1
        elif char == "[":
            posix = _POSIX_CLASS.match(pattern, i)
            if posix is None:
                raise AmbiguousPattern
            i = posix.end()
        else:
            i += 1
    raise AmbiguousPattern
