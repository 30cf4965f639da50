"""Edit matching: a cascade of conservative levels, each of which must match uniquely.

Levels, in order: exact substring (at a line start or after code; see ``indentation`` for
one found inside a line's indentation); line-trimmed (trailing whitespace ignored); whitespace-
collapsed (runs of inner whitespace equal); indentation-relative (the block is shifted as a
whole, the new text is shifted the same way); escape-normalised (over-escaped ``\\n``/``\\"``,
typographic quotes, ``read`` line-number prefixes undone, then the levels again). A level with
several matches stops the cascade with an error listing their lines; no level matching gives an
error quoting the closest region. There is never a fuzzy-similarity guess. The line levels of one
edit compare at most :data:`MAX_WORK` lines: past it the edit is refused. A result longer than
the workspace's text-file cap is refused before it is built.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.indentation import (
    Match,
    exact_matches,
    indent_of,
    width,
)
from toolcards.tools.workspace.limits import ReadCaps
from toolcards.tools.workspace.locate import (
    candidate_windows,
    closest_region,
    line_count,
)
from toolcards.tools.workspace.textfile import MAX_TEXT_BYTES
from toolcards.tools.workspace.work_budget import WorkBudget

_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2032": "'", "\u00a0": " "}
)
_FOLDED = "".join(chr(c) for c in _QUOTES)
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\", "`": "`"}
_NUMBERED = re.compile(r"^ *\d+\t")
MAX_WORK = 4_000_000
"""Lines compared, and walked to find where to compare them, by the line levels of one edit, at
most (an old_string of 2,000 lines of one word against a file of 20,000 such lines took 100 s,
holding the workspace lock): past it the edit is refused."""
_TOO_COSTLY = "old_string matches too many places to weigh: add a rarer line to it"


@dataclass(frozen=True, slots=True)
class EditResult:
    text: str
    count: int
    level: str


def apply_edit(
    text: str, old: str, new: str, *, replace_all: bool = False, cap: int = MAX_TEXT_BYTES
) -> EditResult:
    """Replace ``old`` by ``new`` in ``text`` (all LF) through the cascade; RetriableError else,
    and for a result longer than ``cap`` characters (the workspace's text-file cap)."""
    if old == "":
        raise RetriableError("old_string is empty; use workspace_write to create or overwrite")
    if old == new:
        raise RetriableError("old_string and new_string are identical; nothing to change")
    budget = WorkBudget(MAX_WORK, lambda: _TOO_COSTLY)
    for level, finder in _levels(old, new, budget):
        matches = finder(text)
        if not matches:
            continue
        if len(matches) > 1 and not replace_all:
            lines = ", ".join(str(m.line) for m in matches[:20])
            raise RetriableError(
                f"old_string matches {len(matches)} places ({level} match, lines {lines}); "
                "include more surrounding lines to make it unique, or set replace_all=true"
            )
        return EditResult(_splice(text, matches, cap), len(matches), level)
    raise RetriableError(not_found_message(text, old))


def _splice(text: str, matches: list[Match], cap: int) -> str:
    """``text`` with ``matches`` replaced, refused before it is built when longer than ``cap``:
    a replacement moved to the depth of its place can be far longer than new_string (each
    occurrence of " " in a line of 20,000 spaces made 200 MB)."""
    size = pos = 0
    for m in matches:
        size += max(0, m.start - pos) + m.size()
        pos = m.end
    size += len(text) - pos
    if size > cap:
        raise RetriableError(
            f"the edit would make the file {size} characters long, over the text-file cap "
            f"({cap} bytes); change fewer places at a time or send a shorter new_string"
        )
    out: list[str] = []
    pos = 0
    for m in matches:
        out.append(text[pos : m.start])
        out.append(m.replacement)
        pos = m.end
    out.append(text[pos:])
    return "".join(out)


Finder = Callable[[str], list[Match]]


def _levels(old: str, new: str, budget: WorkBudget) -> list[tuple[str, Finder]]:
    levels: list[tuple[str, Finder]] = _base_levels(old, new, budget)
    variants = _normalised_requests(old, new)
    for old_n, new_n, fold in variants:
        for name, finder in _base_levels(old_n, new_n, budget, fold=fold):
            levels.append((f"escape-normalised {name}", finder))
    return levels


def _base_levels(
    old: str, new: str, budget: WorkBudget, *, fold: bool = False
) -> list[tuple[str, Finder]]:
    seen: dict[str, tuple[str, list[tuple[int, int]] | None]] = {}

    def view(text: str) -> str:
        if not fold or not any(ch in text for ch in _FOLDED):
            return text
        if "view" not in seen:
            seen["view"] = (text.translate(_QUOTES), None)
        return seen["view"][0]

    def windows(text: str, old_lines: list[str]) -> list[tuple[int, int]]:
        """Candidate windows, found once for the three line levels (same text, same lines)."""
        cached = seen.get("windows")
        if cached is None or cached[0] is not text:
            cached = (text, candidate_windows(text, old_lines, budget))
            seen["windows"] = cached
        assert cached[1] is not None
        return cached[1]

    def exact(text: str) -> list[Match]:
        return exact_matches(view(text), old, new)

    def lines(norm: Callable[[str], str], indent: bool) -> Finder:
        return lambda text: _line_level(view(text), old, new, norm, indent, windows, budget)

    return [
        ("exact", exact),
        ("line-trimmed", lines(str.rstrip, False)),
        ("whitespace-collapsed", lines(_collapse_inner, False)),
        ("indentation-relative", lines(_collapse_all, True)),
    ]


def _normalised_requests(old: str, new: str) -> list[tuple[str, str, bool]]:
    """Variants of the request with common model mistakes undone (each only if it changes)."""
    out: list[tuple[str, str, bool]] = []
    if _is_numbered(old):
        new_n = _strip_numbers(new) if _is_numbered(new) else new
        out.append((_strip_numbers(old), new_n, False))
    unescaped = _unescape(old)
    if unescaped != old:
        out.append((unescaped, _unescape(new), False))
    folded = old.translate(_QUOTES)
    if folded != old:
        out.append((folded, new.translate(_QUOTES), True))
    elif any(ch in old for ch in "'\""):
        out.append((old, new, True))
    return out


def _is_numbered(text: str) -> bool:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return bool(lines) and all(_NUMBERED.match(ln) for ln in lines)


def _strip_numbers(text: str) -> str:
    return "\n".join(_NUMBERED.sub("", ln, count=1) for ln in text.split("\n"))


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return re.sub(r"\\([nt\"'\\`])", lambda m: _ESCAPES[m.group(1)], text)


def _collapse_inner(line: str) -> str:
    body = line.lstrip()
    return line[: len(line) - len(body)] + " ".join(body.split())


def _collapse_all(line: str) -> str:
    return " ".join(line.split())


def _line_level(
    text: str,
    old: str,
    new: str,
    norm: Callable[[str], str],
    indent: bool,
    windows: Callable[[str, list[str]], list[tuple[int, int]]],
    budget: WorkBudget,
) -> list[Match]:
    """Windows of whole lines equal to the old lines under ``norm``, left to right, without
    overlap. Only candidate windows (see ``locate.candidate_windows``) are compared."""
    old_lines = old.split("\n")
    trailing_nl = old.endswith("\n") and len(old_lines) > 1
    if trailing_nl:
        old_lines.pop()
    if not any(ln.strip() for ln in old_lines):
        return []
    want = [norm(ln) for ln in old_lines]
    size = len(want)
    total = line_count(text)
    found: list[Match] = []
    free = 0
    for i, offset in windows(text, old_lines):
        if i < free or i + size > total:
            continue
        window = _equal_lines(text, offset, want, norm, budget)
        if window is None:
            continue
        if indent and _shift(old_lines, window) is None:
            continue
        found.append(_line_match(text, new, window, old_lines, offset, i, trailing_nl))
        free = i + size
    return found


def _equal_lines(
    text: str, offset: int, want: list[str], norm: Callable[[str], str], budget: WorkBudget
) -> list[str] | None:
    """The lines from ``offset`` (a line start; ``len(want)`` lines stand there) when each
    equals its line of ``want`` under ``norm``, else None, found at the first that differs.
    The lines compared are spent from ``budget``."""
    window: list[str] = []
    pos = offset
    for expected in want:
        end = text.find("\n", pos)
        line = text[pos:] if end == -1 else text[pos:end]
        if norm(line) != expected:
            budget.spend(len(window) + 1)
            return None
        window.append(line)
        pos = len(text) + 1 if end == -1 else end + 1
    budget.spend(len(window))
    return window


def _line_match(
    text: str,
    new: str,
    window: list[str],
    old_lines: list[str],
    offset: int,
    i: int,
    trailing_nl: bool,
) -> Match:
    end = offset + sum(len(w) + 1 for w in window) - 1
    if trailing_nl and end < len(text):
        end += 1
    elif trailing_nl and new.endswith("\n"):
        new = new[:-1]
    if not _indents_differ(old_lines, window):
        return Match(offset, end, i + 1, new)
    return Match(offset, end, i + 1, new, _shift(old_lines, window) or 0, _uses_tabs(window))


def _shift(old_lines: list[str], window: list[str]) -> int | None:
    """The indentation offset (in columns) between the old block and the file block.

    None when the blocks' relative indentation differs (then they do not match at this level).
    """
    deltas = {
        width(indent_of(f)) - width(indent_of(o))
        for o, f in zip(old_lines, window, strict=True)
        if o.strip()
    }
    return deltas.pop() if len(deltas) == 1 else None


def _indents_differ(old_lines: list[str], window: list[str]) -> bool:
    return any(
        indent_of(o) != indent_of(f) for o, f in zip(old_lines, window, strict=True) if o.strip()
    )


def _uses_tabs(window: list[str]) -> bool:
    """True when the block's own code is tab-indented (whitespace-only lines do not count:
    a stray tab on an empty line says nothing about how the code is indented)."""
    return any("\t" in indent_of(ln) for ln in window if ln.strip())


def not_found_message(text: str, old: str) -> str:
    """The no-match error, quoting the region of ``text`` closest to ``old``."""
    region = closest_region(text, old)
    hint = "Re-read the file (workspace_read) and copy old_string exactly."
    if region is None:
        return f"old_string was not found. {hint}"
    first, block = region
    numbered = quote_lines(first, block)
    return f"old_string was not found. Closest region (line {first}):\n{numbered}\n{hint}"


def quote_lines(first: int, block: list[str], max_lines: int = 40) -> str:
    """``block`` numbered like workspace_read output, at most ``max_lines`` lines."""
    shown = [f"{first + k:6d}\t{ln[:300]}" for k, ln in enumerate(block[:max_lines])]
    if len(block) > max_lines:
        shown.append(f"[... {len(block) - max_lines} more lines]")
    return "\n".join(shown)


MAX_DIFF_LINES = 400
"""Lines of one file's diff shown."""
MAX_DIFF_LINE_CHARS = ReadCaps().max_line_chars
"""A diff line longer than this is cut with a marker, as workspace_read cuts lines."""
MAX_DIFF_CHARS = 100_000
"""Characters of diff one edit answers with, over all the files it changed: a one-word change
in a file of one long line (minified code) would otherwise answer with that line twice, and a
multi-edit of many such files with all of them."""


def unified_diffs(changes: list[tuple[str, str, str]], max_chars: int = MAX_DIFF_CHARS) -> str:
    """Unified diffs of one operation's changed files, ``(before, after, rel)`` each: at most
    :data:`MAX_DIFF_LINES` lines a file, each cut at :data:`MAX_DIFF_LINE_CHARS`, and
    ``max_chars`` for them all; once that is reached, the files after it are counted, not
    diffed."""
    out: list[str] = []
    left = max_chars
    for k, (before, after, rel) in enumerate(changes):
        if left <= 0:
            more = len(changes) - k
            files = f"{more} more changed file{'s' if more > 1 else ''}"
            out.append(
                f"[... {files} not shown, from {rel} on: diffs are capped at {max_chars} chars]"
            )
            break
        diff, full = _capped(_diff_lines(before, after, rel), rel, MAX_DIFF_LINES, left)
        out.append(diff)
        left = 0 if full else left - len(diff) - 1
    return "\n".join(out)


def _diff_lines(before: str, after: str, rel: str) -> list[str]:
    """The unified diff's lines (without line ends), each cut at :data:`MAX_DIFF_LINE_CHARS`.

    Only the span between the first and last changed line is handed to difflib, so a small
    edit in a large file costs little; hunk headers are shifted back to file line numbers.
    The unchanged head and tail are found by comparing the texts a chunk at a time, and the
    file is split into lines only around the change.
    """
    lead, a_part, b_part = _around_change(before, after)
    a, b = a_part.splitlines(keepends=True), b_part.splitlines(keepends=True)
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = max(0, head - 3)
    shift = lead + start
    a_mid, b_mid = a[start : len(a) - max(0, tail - 3)], b[start : len(b) - max(0, tail - 3)]
    out: list[str] = []
    for ln in difflib.unified_diff(a_mid, b_mid, fromfile=f"a/{rel}", tofile=f"b/{rel}"):
        if ln.startswith("@@") and shift:
            ln = _HUNK_HEADER.sub(lambda m: _shift_header(m, shift), ln)
        out.append(_cut(ln.removesuffix("\n")))
        if not ln.endswith("\n"):
            out.append("\\ No newline at end of file")
    return out


def _cut(line: str, limit: int = MAX_DIFF_LINE_CHARS) -> str:
    return line if len(line) <= limit else line[:limit] + f" [... {len(line) - limit} more chars]"


def _capped(lines: list[str], rel: str, max_lines: int, max_chars: int) -> tuple[str, bool]:
    """``lines`` joined, as many as fit ``max_lines`` and ``max_chars`` (a last line says how
    many were left out, and from which line of the file), and whether ``max_chars`` was hit."""
    kept: list[str] = []
    left = max_chars
    for line in lines[:max_lines]:
        left -= len(line) + 1
        if left < 0:
            break
        kept.append(line)
    if len(kept) == len(lines):
        return "\n".join(kept), False
    more = len(lines) - len(kept)
    at = _resume_line(kept)
    where = f", from line {at} of {rel}" if at is not None else ""
    return "\n".join([*kept, f"[... diff truncated: {more} more lines{where}]"]), left < 0


def _resume_line(shown: list[str]) -> int | None:
    """The line of the changed file where the diff after ``shown`` goes on (None before the
    first hunk)."""
    line = None
    for text in shown:
        header = _HUNK_HEADER.match(text)
        if header is not None:
            line = int(header.group(3))
        elif line is not None and text[:1] in (" ", "+"):
            line += 1
    return line


_CONTEXT_CUT = 5
"""Unchanged lines kept on each side of the change (difflib shows three of them)."""
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CHUNK = 1 << 16


def _around_change(a: str, b: str) -> tuple[int, str, str]:
    """(lines before the cut, ``a`` and ``b`` around their change): the common head and tail
    are cut at newlines, keeping ``_CONTEXT_CUT`` unchanged lines on each side."""
    prefix = _common_prefix(a, b)
    suffix = _common_suffix(a, b, min(len(a), len(b)) - prefix)
    cut = prefix
    for _ in range(_CONTEXT_CUT + 1):
        cut = a.rfind("\n", 0, cut) if cut > 0 else -1
        if cut < 0:
            break
    cut = max(0, cut + 1) if cut >= 0 else 0
    tail = a[len(a) - suffix :]
    keep = -1
    for _ in range(_CONTEXT_CUT + 1):
        keep = tail.find("\n", keep + 1)
        if keep < 0:
            break
    drop = suffix - keep - 1 if keep >= 0 else 0
    head_text = a[:cut]
    lead = head_text.count("\n")
    if _OTHER_BREAKS.search(head_text):
        lead = len(head_text.splitlines())
    return lead, a[cut : len(a) - drop], b[cut : len(b) - drop]


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, compared a chunk at a time, then by halving."""
    n = min(len(a), len(b))
    lo = 0
    while lo < n:
        hi = min(n, lo + _CHUNK)
        if a[lo:hi] != b[lo:hi]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[lo:mid] == b[lo:mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo = hi
    return n


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the common suffix (at most ``limit``), compared like ``_common_prefix``."""
    la, lb = len(a), len(b)
    lo = 0
    while lo < limit:
        hi = min(limit, lo + _CHUNK)
        if a[la - hi : la - lo] != b[lb - hi : lb - lo]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo = hi
    return limit


_HUNK_HEADER = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def _shift_header(m: re.Match[str], offset: int) -> str:
    old, new = int(m.group(1)) + offset, int(m.group(3)) + offset
    return f"@@ -{old}{m.group(2)} +{new}{m.group(4)} @@"
