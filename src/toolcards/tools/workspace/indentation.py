"""The exact level of the edit cascade, and re-indenting a replacement.

An exact occurrence of ``old`` that begins inside a line's indentation is one of two requests:

- ``old`` starts with its own indentation, which is less than the line's (``"    x = 1"`` found
  in ``"        x = 1"``): whole lines sent at another indentation. The replacement is shifted
  as a whole, every line by the same number of columns, and replaces the line from its start.
  Such an occurrence alone is no exact match: when no occurrence of ``old`` stands at a line
  start (or after code), the line levels decide, comparing every indentation of the lines.
- ``old`` starts at the line's code (``"x = 1"``): the line's indentation stays; a deletion of
  whole lines takes it too. A one-line ``old`` whose replacement adds lines is refused: whether
  those lines are indented as in the file or relative to the first line is unknowable.

No result ever has its first line shifted differently from the later ones, and no two matches
overlap: an occurrence in indentation an earlier match took part of (``"  "`` found again after
``"  "`` in ``"    x"``) is taken as it stands, as ``str.replace`` would.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.locate import Lines

TAB = 4
_OVERLAP = (
    "old_string ends inside the indentation of a line where it is found again, so its matches "
    "overlap; end old_string at the end of a line"
)
MAX_MATCHES = 10_000
"""Places one edit changes at most, counted as they are found: past them the edit is refused
before more are kept (a replace_all of "a" in a 19 MiB file of it kept a match per place, 3.3
GiB and 4 minutes holding the workspace lock)."""
_TOO_MANY = (
    f"old_string matches more than {MAX_MATCHES} places, more than one edit changes; "
    "include more surrounding text to make it rarer"
)
MAX_OCCURRENCES = 2 * MAX_MATCHES
"""Occurrences of old_string one edit looks at, matches or not, counted as they are found:
past them the edit is refused (3,000,000 occurrences of ``" \\nx"`` inside indentation, none a
match and so none counted, took 12 s holding the workspace lock)."""
_TOO_MANY_OCCURRENCES = (
    f"old_string stands in more than {MAX_OCCURRENCES} places (matches or not), more than one "
    "edit looks at; include more surrounding text to make it rarer"
)


@dataclass(frozen=True, slots=True)
class Match:
    """A region ``text[start:end]`` to replace by ``new``, moved ``shift`` columns by
    :func:`reindent` unless ``shift`` is None; ``line`` is 1-based.

    The moved text is built only when the edit is applied, one match at a time, and its size is
    known before: each occurrence of ``" "`` in a line of 20,000 spaces is moved as deep as it
    stands, and building them all to find the edit ambiguous took 193 MiB."""

    start: int
    end: int
    line: int
    new: str
    shift: int | None = None
    tabs: bool = False

    @property
    def replacement(self) -> str:
        return self.new if self.shift is None else reindent(self.new, self.shift, self.tabs)

    def size(self) -> int:
        """``len(self.replacement)``, without building it."""
        if self.shift is None:
            return len(self.new)
        lines = _layout(self.new, self.shift, self.tabs)
        return sum(t + s + len(body) for t, s, body in lines) + self.new.count("\n")


def width(indent: str) -> int:
    return len(indent.expandtabs(TAB))


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def reindent(new: str, shift: int, tabs: bool) -> str:
    """``new`` with every non-blank line moved ``shift`` columns (tabs: indented with tabs)."""
    return "\n".join("\t" * t + " " * s + body for t, s, body in _layout(new, shift, tabs))


def _layout(new: str, shift: int, tabs: bool) -> Iterator[tuple[int, int, str]]:
    """The lines of ``new`` moved ``shift`` columns: (tabs, spaces, the rest) of each."""
    for line in new.split("\n"):
        if not line.strip():
            yield 0, 0, line
            continue
        cols = width(indent_of(line)) + shift
        if cols < 0:
            raise RetriableError(
                "new_string is indented less than the block it replaces allows; "
                "copy old_string with the file's exact indentation"
            )
        yield (cols // TAB, cols % TAB, line.lstrip()) if tabs else (0, cols, line.lstrip())


def add_match(found: list[Match], match: Match) -> None:
    """``match`` appended to ``found``; RetriableError past :data:`MAX_MATCHES`."""
    if len(found) >= MAX_MATCHES:
        raise RetriableError(_TOO_MANY)
    found.append(match)


def _occurrences(text: str, old: str) -> Iterator[int]:
    """Where ``old`` stands in ``text``, left to right, without overlap; RetriableError past
    :data:`MAX_OCCURRENCES`."""
    pos = text.find(old)
    for _ in range(MAX_OCCURRENCES):
        if pos == -1:
            return
        yield pos
        pos = text.find(old, pos + len(old))
    if pos != -1:
        raise RetriableError(_TOO_MANY_OCCURRENCES)


def exact_matches(text: str, old: str, new: str) -> list[Match]:
    """Occurrences of ``old`` in ``text``, left to right, without overlap (see the module)."""
    found: list[Match] = []
    anchored = False
    lines = Lines(text)
    for pos in _occurrences(text, old):
        occurrence = _occurrence(text, pos, lines, old, new, found[-1].end if found else 0)
        if occurrence is not None:
            add_match(found, occurrence[0])
            anchored = anchored or not occurrence[1]
    if anchored or not found:
        return found
    if old.endswith("\n"):
        return []  # whole lines: the indentation-relative level compares every indentation
    return _line_heads(text, old, new)


def _occurrence(
    text: str, pos: int, lines: Lines, old: str, new: str, taken: int
) -> tuple[Match, bool] | None:
    """The match for the occurrence at ``pos`` and whether it starts before its line's code
    (alone, no exact match); None when it is no match (``old``'s later lines would be shifted
    differently from its first). In a line an earlier match ends in (past its start, before
    ``taken``) it stands as it is: replaced from the line's start, it would overlap that match
    (each ``"  "`` of ``"        x"`` was shifted there, once per depth)."""
    line, start = lines.of(pos), lines.start
    end = pos + len(old)
    if pos == start or pos > lines.code():
        return Match(pos, end, line, new), False
    if start < taken:
        return Match(pos, end, line, new), True
    indent = text[start:pos]
    one_line = not any(ln.strip() for ln in old.split("\n")[1:])
    if old[0] in " \t":
        if not one_line:
            return None
        return Match(start, end, line, new, width(indent), "\t" in indent), True
    ends_line = end == len(text) or text[end - 1] == "\n" or text[end] == "\n"
    if ends_line and not new.strip():
        return Match(start, end, line, new), False
    if one_line and any(ln.strip() for ln in new.split("\n")[1:]):
        raise RetriableError(
            "old_string starts after the indentation of its line, and new_string adds lines: "
            "whether they are indented as in the file or relative to the first line is unclear; "
            "send whole lines with their exact indentation in both old_string and new_string"
        )
    return Match(pos, end, line, new), False


def _line_heads(text: str, old: str, new: str) -> list[Match]:
    """A one-line ``old`` ending inside a line, found only inside deeper indentation: its code
    after the indentation of any line, each with ``new`` shifted by the difference. Only the
    heads of lines are looked at (in C): the code may stand after other code anywhere."""
    code = old.lstrip(" \t")
    if not code.strip():
        return []
    base = width(old[: len(old) - len(code)])
    found: list[Match] = []
    lines = Lines(text)
    for head in re.finditer(rf"^[^\S\n]*(?={re.escape(code)})", text, re.MULTILINE):
        start, pos = head.start(), head.end()
        if found and start < found[-1].end:
            raise RetriableError(_OVERLAP)
        indent = text[start:pos]
        line = lines.of(pos)
        add_match(
            found, Match(start, pos + len(code), line, new, width(indent) - base, "\t" in indent)
        )
    return found
