"""Edit matching: a cascade of conservative levels, each of which must match uniquely.

Levels, in order: exact substring (at a line start or after code; see ``indentation`` for
one found inside a line's indentation); line-trimmed (trailing whitespace ignored); whitespace-
collapsed (runs of inner whitespace equal); indentation-relative (the block is shifted as a
whole, the new text is shifted the same way); escape-normalised (over-escaped ``\\n``/``\\"``,
typographic quotes, ``read`` line-number prefixes undone, then the levels again). A level with
several matches stops the cascade with an error listing their lines; no level matching gives an
error quoting the closest region. There is never a fuzzy-similarity guess. The line levels of one
edit compare at most :data:`MAX_WORK` lines: past it the edit is refused; so is an edit of more
than :data:`~.indentation.MAX_MATCHES` places, or one whose old_string stands in more than
:data:`~.indentation.MAX_OCCURRENCES`, as they are found. A result longer than the
workspace's text-file cap is refused before it is built. The diff an edit answers with is
made from the places it changed (:func:`unified_diffs`).
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.indentation import (
    Match,
    add_match,
    exact_matches,
    indent_of,
    width,
)
from toolcards.tools.workspace.limits import ReadCaps
from toolcards.tools.workspace.locate import (
    candidate_windows,
    closest_region,
    line_count,
    shift_lines,
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


Span = tuple[int, int, int, int]
"""``(a, b, c, d)``: ``before[a:b]`` became ``after[c:d]``; the texts between two spans (and
before the first, after the last) are the same."""
MAX_SPANS = 10_000
"""Spans kept for one file's diff; the places past them are kept as one span (a diff shows far
fewer places: the rest are only counted)."""


@dataclass(frozen=True, slots=True)
class EditResult:
    text: str
    count: int
    level: str
    spans: list[Span]
    """The places changed, for the answer's diff (difflib never sees the rest of the file)."""


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
        result, spans = _splice(text, matches, cap)
        return EditResult(result, len(matches), level, spans)
    raise RetriableError(not_found_message(text, old))


def _splice(text: str, matches: list[Match], cap: int) -> tuple[str, list[Span]]:
    """``text`` with ``matches`` replaced, and the spans replaced; refused before it is built
    when longer than ``cap``: a replacement moved to the depth of its place can be far longer
    than new_string (each occurrence of " " in a line of 20,000 spaces made 200 MB)."""
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
    spans: list[Span] = []
    pos = made = 0
    for m in matches:
        out.append(text[pos : m.start])
        made += m.start - pos
        replacement = m.replacement
        out.append(replacement)
        _add_span(spans, (m.start, m.end, made, made + len(replacement)))
        made += len(replacement)
        pos = m.end
    out.append(text[pos:])
    return "".join(out), spans


def compose_spans(first: list[Span], then: list[Span]) -> list[Span]:
    """The spans of two edits made one after the other (``then``'s in the text ``first``
    made), those that overlap or touch merged: what a multi-edit changed in one file. Only the
    spans of ``first`` that ``then``'s reach are merged; those after them are moved by what
    ``then`` grew the text (merging every span of the file at each edit made a multi-edit of
    5,000 one-word edits hold the workspace lock 58 s)."""
    if not first or not then:
        return first or then
    lo = bisect.bisect_left(first, then[0][0], key=lambda span: span[3])
    hi = bisect.bisect_right(first, then[-1][1], key=lambda span: span[2])
    grown = first[lo - 1][3] - first[lo - 1][1] if lo else 0  # by first's spans before lo
    grew = then[-1][3] - then[-1][1]
    out = first[:lo] + _merged(first[lo:hi], then, grown)
    out += [(a, b, c + grew, d + grew) for a, b, c, d in first[hi:]]
    if len(out) > MAX_SPANS:
        a, _, c, _ = out[MAX_SPANS - 1]
        out[MAX_SPANS - 1 :] = [(a, out[-1][1], c, out[-1][3])]
    return out


def _merged(first: list[Span], then: list[Span], moved_first: int) -> list[Span]:
    """:func:`compose_spans` of spans that reach each other, ``moved_first`` the text grown by
    the spans of the first edit before them."""
    # each span as its range of the middle text, with how much longer each edit made it
    ranges = sorted(
        [(c, d, (d - c) - (b - a), 0) for a, b, c, d in first]
        + [(a, b, 0, (d - c) - (b - a)) for a, b, c, d in then]
    )
    out: list[Span] = []
    moved_then = 0  # by the ranges before the current group
    group: list[int] = []
    for lo, hi, grew_first, grew_then in ranges:
        if group and lo <= group[1]:
            group[1] = max(group[1], hi)
            group[2] += grew_first
            group[3] += grew_then
            continue
        if group:
            _add_span(out, _unmiddle(group, moved_first, moved_then))
            moved_first, moved_then = moved_first + group[2], moved_then + group[3]
        group = [lo, hi, grew_first, grew_then]
    if group:
        _add_span(out, _unmiddle(group, moved_first, moved_then))
    return out


def _add_span(spans: list[Span], span: Span) -> None:
    """``span`` added after the last of ``spans``, or past :data:`MAX_SPANS` merged into it."""
    if len(spans) < MAX_SPANS:
        spans.append(span)
    else:
        a, _, c, _ = spans[-1]
        spans[-1] = (a, span[1], c, span[3])


def _unmiddle(group: list[int], moved_first: int, moved_then: int) -> Span:
    """A merged range of the middle text, as the span from the first text to the last."""
    lo, hi, grew_first, grew_then = group
    return (
        lo - moved_first,
        hi - moved_first - grew_first,
        lo + moved_then,
        hi + moved_then + grew_then,
    )


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
        add_match(found, _line_match(text, new, window, old_lines, offset, i, trailing_nl))
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
MAX_DIFF_WORK = 5_000
"""Lines handed to difflib for one answer, at most; past them a changed place is written as its
removed lines then its added lines. difflib once saw every line between the first and the last
change (an edit of 200 places spread over 2,000,000 lines took 165 s and 684 MiB, holding the
workspace lock), and its time grows faster than the lines it sees (2,500 lines a side of few
distinct lines: 0.4 s; 10,000: 25 s)."""
_CONTEXT = 3
"""Unchanged lines shown on each side of a change (difflib's default)."""


def unified_diffs(
    changes: list[tuple[str, str, str, list[Span]]], max_chars: int = MAX_DIFF_CHARS
) -> str:
    """Unified diffs of one operation's changed files, ``(before, after, rel, spans)`` each
    (``spans``: the places the edits changed, see :func:`compose_spans`): at most
    :data:`MAX_DIFF_LINES` lines a file, each cut at :data:`MAX_DIFF_LINE_CHARS`, and
    ``max_chars`` for them all; once that is reached, the files after it are counted, not
    diffed."""
    out: list[str] = []
    left = max_chars
    work = WorkBudget(MAX_DIFF_WORK, str)  # spent only where it suffices: never refuses
    for k, (before, after, rel, spans) in enumerate(changes):
        if left <= 0:
            more = len(changes) - k
            files = f"{more} more changed file{'s' if more > 1 else ''}"
            out.append(
                f"[... {files} not shown, from {rel} on: diffs are capped at {max_chars} chars]"
            )
            break
        hunks = _hunks(before, after, rel, spans, work)
        diff, full = _capped(hunks, rel, MAX_DIFF_LINES, left)
        out.append(diff)
        left = 0 if full else left - len(diff) - 1
    return "\n".join(out)


Hunk = tuple[int, Iterable[str]]
"""A piece of a diff: its number of lines, and its lines (made as they are shown)."""


def _hunks(
    before: str, after: str, rel: str, spans: list[Span], work: WorkBudget
) -> Iterator[Hunk]:
    """The diff's lines (without line ends, each cut at :data:`MAX_DIFF_LINE_CHARS`), a place
    at a time: only the lines of the places ``spans`` changed, with their context, are split
    and handed to difflib (so a small edit in a large file costs little), while ``work`` lasts;
    past it a place is written directly, and its lines are counted, not made, unless shown."""
    a_lines, b_lines = _LinesBefore(before), _LinesBefore(after)
    started = False
    for a, b, c, d in _places(before, after, spans):
        lo = shift_lines(before, a, -_CONTEXT, clamp=True)
        hi = shift_lines(before, b, _CONTEXT, clamp=True)
        size = _count_lines(before, lo, hi) + _count_lines(after, c - (a - lo), d + hi - b)
        if size <= work.left:
            work.spend(size)
            lines = _difflib_lines(
                before[lo:hi], after[c - (a - lo) : d + hi - b],
                a_lines.at(lo), b_lines.at(c - (a - lo)),
            )  # fmt: skip
            hunk: Hunk = (len(lines), lines)
        else:
            hunk = _written(before, after, (a, b, c, d), a_lines.at(a), b_lines.at(c))
        if hunk[0] and not started:
            started = True
            yield 2, [_cut(f"--- a/{rel}"), _cut(f"+++ b/{rel}")]
        yield hunk


def _difflib_lines(a_text: str, b_text: str, a_lead: int, b_lead: int) -> list[str]:
    """The hunks of one place (whole lines of both texts, ``a_lead`` and ``b_lead`` lines
    before them), by difflib, with the unchanged head and tail cut to the context shown."""
    a, b = a_text.splitlines(keepends=True), b_text.splitlines(keepends=True)
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = max(0, head - _CONTEXT)
    a_mid = a[start : len(a) - max(0, tail - _CONTEXT)]
    b_mid = b[start : len(b) - max(0, tail - _CONTEXT)]
    out: list[str] = []
    for ln in itertools.islice(difflib.unified_diff(a_mid, b_mid, n=_CONTEXT), 2, None):
        if ln.startswith("@@"):
            ln = _HUNK_HEADER.sub(lambda m: _shift_header(m, a_lead + start, b_lead + start), ln)
        out.append(_cut(ln.removesuffix("\n")))
        if not ln.endswith("\n"):
            out.append(_NO_NEWLINE)
    return out


def _written(before: str, after: str, place: Span, a_lead: int, b_lead: int) -> Hunk:
    """One place as a hunk of its removed lines then its added lines: its size is counted,
    its lines are made only as they are shown."""
    a, b, c, d = place
    n_a, n_b = _count_lines(before, a, b), _count_lines(after, c, d)
    # a line not ending with "\n" is followed by a marker, as in difflib's hunks
    marks = n_a - before.count("\n", a, b) + n_b - after.count("\n", c, d)
    header = f"@@ -{_range(a_lead, n_a)} +{_range(b_lead, n_b)} @@"

    def lines() -> Iterator[str]:
        yield header
        for sign, text, lo, hi in (("-", before, a, b), ("+", after, c, d)):
            for line in _split(text, lo, hi):
                yield _cut(sign + line.removesuffix("\n"))
                if not line.endswith("\n"):
                    yield _NO_NEWLINE

    return 1 + n_a + n_b + marks, lines()


_NO_NEWLINE = "\\ No newline at end of file"


def _range(lead: int, count: int) -> str:
    """A hunk header's range, as difflib writes it."""
    if count == 1:
        return str(lead + 1)
    return f"{lead if count == 0 else lead + 1},{count}"


def _places(before: str, after: str, spans: list[Span]) -> Iterator[Span]:
    """``spans`` widened to whole lines of both texts, those with at most twice the context
    between them merged (difflib would show them in one hunk)."""
    place: list[int] | None = None
    for a, b, c, d in spans:
        if place is not None and before.count("\n", place[1], a) <= 2 * _CONTEXT:
            place[1], place[3] = _line_end(before, after, b, d)
            continue
        if place is not None:
            yield place[0], place[1], place[2], place[3]
        lo = before.rfind("\n", 0, a) + 1
        end_b, end_d = _line_end(before, after, b, d)
        place = [lo, end_b, c - (a - lo), end_d]
    if place is not None:
        yield place[0], place[1], place[2], place[3]


def _line_end(before: str, after: str, b: int, d: int) -> tuple[int, int]:
    """``(b, d)``, the ends of a span, moved on to the end of the line ``b`` stands in (the text
    after them is the same up to the next span), unless both stand at a line start."""
    if (b == 0 or before[b - 1] == "\n") and (d == 0 or after[d - 1] == "\n"):
        return b, d
    end = before.find("\n", b)
    end = len(before) if end < 0 else end + 1
    return end, d + end - b


_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""What ``str.splitlines`` (and so difflib's lines and numbers) breaks lines at."""
_OTHER_BREAKS = re.compile(f"[{_BREAKS[1:]}]")


def _count_lines(text: str, lo: int, hi: int) -> int:
    """``len(text[lo:hi].splitlines())`` (``lo`` a line start), without making the lines."""
    if hi <= lo:
        return 0
    n = text.count("\n", lo, hi)
    if _OTHER_BREAKS.search(text, lo, hi):
        n += sum(text.count(ch, lo, hi) for ch in _BREAKS[1:]) - text.count("\r\n", lo, hi)
    return n + (text[hi - 1] not in _BREAKS)


def _split(text: str, lo: int, hi: int) -> Iterator[str]:
    """``text[lo:hi].splitlines(keepends=True)``, a line at a time."""
    while lo < hi:
        end = text.find("\n", lo, hi)
        end = hi if end < 0 else end + 1
        yield from text[lo:end].splitlines(keepends=True)
        lo = end


class _LinesBefore:
    """The number of lines of ``text`` before a line start, counted on from the last one asked
    (the places of a diff are asked in order)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.lines = text, 0, 0

    def at(self, pos: int) -> int:
        self.lines += _count_lines(self.text, self.pos, pos)
        self.pos = pos
        return self.lines


def _cut(line: str, limit: int = MAX_DIFF_LINE_CHARS) -> str:
    return line if len(line) <= limit else line[:limit] + f" [... {len(line) - limit} more chars]"


def _capped(hunks: Iterator[Hunk], rel: str, max_lines: int, max_chars: int) -> tuple[str, bool]:
    """The diff of ``hunks``, as many lines as fit ``max_lines`` and ``max_chars`` (a last line
    says how many were left out, and from which line of the file), and whether ``max_chars``
    was hit. The hunks after the last line shown are counted, not made."""
    kept: list[str] = []
    left = max_chars
    more = 0
    for size, lines in hunks:
        shown = 0
        if not more:
            for line in itertools.islice(lines, max_lines - len(kept)):
                left -= len(line) + 1
                if left < 0:
                    break
                kept.append(line)
                shown += 1
        more += size - shown
    if not more:
        return "\n".join(kept), False
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


_HUNK_HEADER = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def _shift_header(m: re.Match[str], old_by: int, new_by: int) -> str:
    old, new = int(m.group(1)) + old_by, int(m.group(3)) + new_by
    return f"@@ -{old}{m.group(2)} +{new}{m.group(4)} @@"
