"""Finding lines of old text in a large file without splitting the file into lines.

A line-level match needs every whitespace-separated token of each old line inside the file
line it is compared with, so only the lines holding the rarest such token are candidates
(``candidate_windows``). The closest region quoted when nothing matches is found the same way:
occurrences of the rarest words and whole lines of the old text vote for the line where the old
text would start, and the best-voted windows are compared with difflib (``closest_region``).
Only the first lines and characters of the old text are compared (difflib's cost grows with the
square of what it compares, and worse), within a bound on the comparisons' sizes.
Every scan over the whole file is one C-level ``str`` call, so the cost grows with the number
of candidates, not with the number of lines, and the interpreter lock is never held long.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict

from toolcards.tools.workspace.work_budget import WorkBudget

_WORD = re.compile(r"\w+")
_BLANK = re.compile(r"[^\S\n]*")
MAX_COUNTED = 24
"""Tokens whose frequency is measured (one scan each), longest first."""
RARE_ENOUGH = 8
"""A token seen at most this often ends the search for the rarest one."""
MAX_VOTES = 1000
"""Occurrences looked at when voting for the closest region."""
SAMPLE = 200
"""Occurrences of a key looked at when even the rarest key is more frequent than that budget
(it then says little about where the old text is)."""
TOP_WINDOWS = 50
"""Best-voted windows compared with difflib."""
MIN_RATIO = 0.3
MAX_COMPARED_LINES = 40
"""Lines of the old text the closest region is looked for with (as many as a miss quotes)."""
MAX_COMPARED_CHARS = 2_000
"""Characters of the old text, and of each window, difflib compares: one comparison of 2,000
characters can take a second, of 40,000 took 88 s."""
MAX_RATIO_WORK = 12_000_000
"""Sum of the products of the compared lengths over one search's difflib ratios (a few of the
largest, hundreds of a usual miss): past it, the best window so far is quoted."""


def line_count(text: str) -> int:
    """The number of lines, as ``text.split("\\n")`` with a final empty piece dropped."""
    n = text.count("\n") + 1
    return n - 1 if text.endswith("\n") else n


def lines_at(text: str, offset: int, count: int) -> list[str]:
    """Up to ``count`` lines of ``text`` starting at ``offset`` (a line start)."""
    out: list[str] = []
    pos = offset
    while len(out) < count and pos <= len(text):
        end = text.find("\n", pos)
        if end == -1:
            out.append(text[pos:])
            break
        out.append(text[pos:end])
        pos = end + 1
    return out


def shift_lines(text: str, offset: int, lines: int, *, clamp: bool = False) -> int:
    """The start of the line ``lines`` away (negative: before) from the line at ``offset``;
    -1 when that is outside the text, or with ``clamp`` the text's start or end."""
    pos = offset
    for _ in range(-lines):
        if pos == 0:
            return 0 if clamp else -1
        pos = text.rfind("\n", 0, pos - 1) + 1
    for _ in range(lines):
        end = text.find("\n", pos)
        if end == -1:
            return len(text) if clamp else -1
        pos = end + 1
    return pos


class Lines:
    """1-based line numbers and line starts of ascending positions of ``text``, found
    incrementally: looking back from each position to the file's start was quadratic on a
    one-line file."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line = 1
        self.at = 0
        self.start = 0
        self._code = -1

    def of(self, pos: int) -> int:
        crossed = self.text.count("\n", self.at, pos)
        if crossed:
            self.line += crossed
            self.start = self.text.rfind("\n", self.at, pos) + 1
            self._code = -1
        self.at = pos
        return self.line

    def code(self) -> int:
        """Where the indentation of the current line ends (found once a line)."""
        if self._code < 0:
            blank = _BLANK.match(self.text, self.start)
            self._code = blank.end() if blank else self.start
        return self._code


_PROBE = 1 << 16


def _count(text: str, key: str, cap: int) -> int:
    """How often ``key`` occurs: exact up to ``cap``; above it, an estimate from the first
    64 Ki characters (counting a frequent short key over a large text is the slow case)."""
    head = text.count(key, 0, _PROBE)
    if len(text) <= _PROBE:
        return head
    if head > cap:
        return head * (len(text) // _PROBE)
    return text.count(key)


def _occurrences(text: str, token: str, limit: int | None = None) -> list[int]:
    found: list[int] = []
    pos = text.find(token)
    while pos != -1 and (limit is None or len(found) < limit):
        found.append(pos)
        pos = text.find(token, pos + 1)
    return found


def _located(text: str, positions: list[int]) -> list[tuple[int, int, int]]:
    """For ascending ``positions``: (position, 0-based line number, offset of that line)."""
    lines = Lines(text)
    return [(pos, lines.of(pos) - 1, lines.start) for pos in positions]


def candidate_windows(text: str, old_lines: list[str], budget: WorkBudget) -> list[tuple[int, int]]:
    """Ascending (first line, its offset) of the windows where ``old_lines`` could match at a
    line level: those whose lines hold the rarest whitespace token of the old lines. Each
    occurrence of that token costs ``budget`` one step per old line holding it, and each window
    one per line walked back to its start, spent before the work (a token on every line of both
    texts would otherwise cost file lines times old lines)."""
    where: dict[str, list[int]] = defaultdict(list)
    for j, old_line in enumerate(old_lines):
        for token in dict.fromkeys(old_line.split()):
            where[token].append(j)
    if not where:
        return []
    best, best_count = "", -1
    for token in sorted(where, key=len, reverse=True)[:MAX_COUNTED]:
        count = _count(text, token, best_count if best_count >= 0 else MAX_VOTES)
        if best_count < 0 or count < best_count:
            best, best_count = token, count
        if count <= RARE_ENOUGH:
            break
    windows: dict[int, int] = {}
    rows = where[best]
    for _, line, offset in _located(text, _occurrences(text, best, budget.left // len(rows) + 1)):
        budget.spend(len(rows))
        for j in rows:
            if line - j >= 0 and line - j not in windows:
                budget.spend(j)
                start = shift_lines(text, offset, -j)
                if start >= 0:
                    windows[line - j] = start
    return sorted(windows.items())


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class _Keys:
    """What the old text is looked up by: its words and its whole (stripped) lines."""

    def __init__(self, want: list[str]) -> None:
        self.rows: dict[str, list[int]] = defaultdict(list)
        self.weight: dict[str, int] = {}
        self.whole: set[str] = set()
        for j, line in enumerate(want):
            words = set(_WORD.findall(line))
            for word in words:
                self.rows[word].append(j)
                self.weight[word] = 1
            if len(line) >= 3 and line not in words:
                self.rows[line].append(j)
                self.weight[line] = max(1, len(words))
                self.whole.add(line)
        self._lines: dict[int, str | None] = {}

    def chosen(self, text: str, lines: int) -> list[tuple[str, int]]:
        """The keys to vote with, rarest first, within the occurrence budget. A key found on
        more than an eighth of the lines says little about where the old text is: it is used
        (sampled) only when no rarer key exists."""
        counted = sorted(self.rows, key=len, reverse=True)[:MAX_COUNTED]
        counts = sorted(((_count(text, k, MAX_VOTES), k) for k in counted), key=lambda c: c[0])
        common = max(SAMPLE, lines // 8)
        out: list[tuple[str, int]] = []
        budget = MAX_VOTES
        for count, key in counts:
            if count == 0:
                continue
            if count > min(budget, common):
                if not out:
                    out.append((key, SAMPLE))
                break
            out.append((key, count))
            budget -= count
        return out

    def hit(self, text: str, key: str, pos: int, offset: int) -> bool:
        """True when the occurrence at ``pos`` is the key itself (a whole word or line)."""
        if key in self.whole:
            return self._whole_line(text, offset) == key
        end = pos + len(key)
        before = pos > 0 and _is_word(text[pos - 1])
        return not before and not (end < len(text) and _is_word(text[end]))

    def _whole_line(self, text: str, offset: int) -> str | None:
        """The line at ``offset``, stripped, when it is a whole-line key: cut once a line (each
        occurrence on one long line cut it whole again)."""
        if offset not in self._lines:
            end = text.find("\n", offset)
            line = text[offset : len(text) if end == -1 else end].strip()
            self._lines[offset] = line if line in self.whole else None
        return self._lines[offset]


def closest_region(text: str, old: str) -> tuple[int, list[str]] | None:
    """The 1-based first line and lines of the window of ``text`` most similar to ``old``,
    looked for with the first :data:`MAX_COMPARED_LINES` lines of ``old``."""
    old = old.strip("\n")
    size = old.count("\n") + 1
    want = [ln.strip() for ln in old.split("\n", MAX_COMPARED_LINES)[:MAX_COMPARED_LINES]]
    target = "\n".join(want)[:MAX_COMPARED_CHARS]
    if not text.strip() or not target:
        return None
    votes, anchors = _votes(text, want, size)
    start = _most_similar(text, target, votes, anchors, len(want))
    if start is None:
        return None
    line, offset = anchors[start]
    return start + 1, lines_at(text, shift_lines(text, offset, start - line), size)


def _votes(
    text: str, want: list[str], size: int
) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """Votes for the line where ``want`` (the first of ``size`` lines) would start, and for
    each voted line an anchor (the line and offset of an occurrence that voted for it)."""
    lines = text.count("\n") + 1
    last_start = max(0, lines - size)
    keys = _Keys(want)
    found: list[tuple[int, str]] = []
    for key, limit in keys.chosen(text, lines):
        found.extend((pos, key) for pos in _occurrences(text, key, limit))
    found.sort()
    votes: dict[int, int] = defaultdict(int)
    anchors: dict[int, tuple[int, int]] = {}
    for (pos, key), (_, line, offset) in zip(
        found, _located(text, [p for p, _ in found]), strict=True
    ):
        if not keys.hit(text, key, pos, offset):
            continue
        for j in keys.rows[key]:
            start = min(max(0, line - j), last_start)
            votes[start] += keys.weight[key]
            anchors.setdefault(start, (line, offset))
    return votes, anchors


def _most_similar(
    text: str,
    target: str,
    votes: dict[int, int],
    anchors: dict[int, tuple[int, int]],
    size: int,
) -> int | None:
    """Of the best-voted windows of ``size`` lines, the start of the one most similar to
    ``target`` (difflib's ratio, at least :data:`MIN_RATIO`); the ratios computed cost at most
    :data:`MAX_RATIO_WORK` (each the product of the lengths compared)."""
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)
    work = MAX_RATIO_WORK
    best: tuple[float, int] | None = None
    for start in sorted(votes, key=lambda s: (-votes[s], s))[:TOP_WINDOWS]:
        line, offset = anchors[start]
        block = lines_at(text, shift_lines(text, offset, start - line), size)
        window = "\n".join(ln.strip() for ln in block)[:MAX_COMPARED_CHARS]
        matcher.set_seq1(window)
        # real_quick_ratio() and quick_ratio() are upper bounds of ratio(), found cheaply
        if best is None:
            if matcher.real_quick_ratio() < MIN_RATIO or matcher.quick_ratio() < MIN_RATIO:
                continue  # this window cannot reach the minimum
        elif matcher.real_quick_ratio() <= best[0] or matcher.quick_ratio() <= best[0]:
            continue  # cannot beat the best so far
        work -= len(window) * len(target)
        if work < 0:
            break
        ratio = matcher.ratio()
        if ratio >= MIN_RATIO and (best is None or ratio > best[0]):
            best = (ratio, start)
    return None if best is None else best[1]
