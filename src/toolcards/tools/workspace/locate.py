"""Finding lines of old text in a large file without splitting the file into lines.

A line-level match needs every whitespace-separated token of each old line inside the file
line it is compared with, so only the lines holding the rarest such token are candidates
(``candidate_windows``). The closest region quoted when nothing matches is found the same way:
occurrences of the rarest words and whole lines of the old text vote for the line where the old
text would start, and the best-voted windows are compared with difflib (``closest_region``).
Every scan over the whole file is one C-level ``str`` call, so the cost grows with the number
of candidates, not with the number of lines, and the interpreter lock is never held long.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict

_WORD = re.compile(r"\w+")
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


def shift_lines(text: str, offset: int, lines: int) -> int:
    """The start of the line ``lines`` away (negative: before) from the line at ``offset``;
    -1 when that is outside the text."""
    pos = offset
    for _ in range(-lines):
        if pos == 0:
            return -1
        pos = text.rfind("\n", 0, pos - 1) + 1
    for _ in range(lines):
        end = text.find("\n", pos)
        if end == -1:
            return -1
        pos = end + 1
    return pos


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
    out: list[tuple[int, int, int]] = []
    line, at = 0, 0
    for pos in positions:
        line += text.count("\n", at, pos)
        at = pos
        out.append((pos, line, text.rfind("\n", 0, pos) + 1))
    return out


def candidate_windows(text: str, old_lines: list[str]) -> list[tuple[int, int]]:
    """Ascending (first line, its offset) of the windows where ``old_lines`` could match at a
    line level: those whose lines hold the rarest whitespace token of the old lines."""
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
    for _, line, offset in _located(text, _occurrences(text, best)):
        for j in where[best]:
            if line - j >= 0 and line - j not in windows:
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
            end = text.find("\n", pos)
            return text[offset : len(text) if end == -1 else end].strip() == key
        end = pos + len(key)
        before = pos > 0 and _is_word(text[pos - 1])
        return not before and not (end < len(text) and _is_word(text[end]))


def closest_region(text: str, old: str) -> tuple[int, list[str]] | None:
    """The 1-based first line and lines of the window of ``text`` most similar to ``old``."""
    want = [ln.strip() for ln in old.strip("\n").split("\n")]
    size = max(1, len(want))
    target = "\n".join(want)
    if not text.strip() or not target:
        return None
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
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)
    best: tuple[float, int, list[str]] | None = None
    for start in sorted(votes, key=lambda s: (-votes[s], s))[:TOP_WINDOWS]:
        line, offset = anchors[start]
        block = lines_at(text, shift_lines(text, offset, start - line), size)
        matcher.set_seq1("\n".join(ln.strip() for ln in block))
        if best is None:
            if matcher.real_quick_ratio() < MIN_RATIO or matcher.quick_ratio() < MIN_RATIO:
                continue  # upper bounds of ratio(): this window cannot reach the minimum
            ratio = matcher.ratio()
            if ratio >= MIN_RATIO:
                best = (ratio, start, block)
            continue
        if matcher.real_quick_ratio() <= best[0] or matcher.quick_ratio() <= best[0]:
            continue  # cannot beat the best so far
        ratio = matcher.ratio()
        if ratio > best[0]:
            best = (ratio, start, block)
    if best is None:
        return None
    return best[1] + 1, best[2]
