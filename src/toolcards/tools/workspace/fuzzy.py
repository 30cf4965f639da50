"""Where a hunk fits when some of its context lines differ from the file.

A hunk side (its old lines, or its result) fits a place when its changed lines, the side's
removed (or added) lines, or for a change that only inserts on that side the two lines around
the insertion, match exactly (but for a CR before the LF), and only a few context lines differ
(compared but for trailing whitespace): at most ``FUZZ_EDGE`` before its first change and after
its last, ``FUZZ_INSIDE`` between its changes. Context lines keep their offsets from the changed
lines: a line inserted or deleted in the context counts as the lines it shifts.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolcards.tools.workspace.work_budget import WorkBudget

FUZZ_EDGE = 2
"""Context lines that may differ before a hunk's first change, and after its last."""
FUZZ_INSIDE = 1
"""Context lines that may differ between a hunk's changes."""
MAX_FUZZY_PLACES = 10_000
"""Places looked at for a hunk whose context differs (those of its rarest changed line)."""
SCAN_CHARS = 256
"""Characters compared or copied per step of work, in C (~16 ns); a line read costs a step
more."""


def bare(line: str) -> str:
    """A line without the CR of a CR LF ending."""
    return line.removesuffix("\r")


def copy_cost(lines: list[str]) -> int:
    """The steps of work of copying ``lines`` one string at a time: a step a line, and one per
    :data:`SCAN_CHARS` characters."""
    return len(lines) + sum(map(len, lines)) // SCAN_CHARS


@dataclass(frozen=True)
class Fuzzy:
    """A place where a hunk's changed lines match exactly and some context lines differ."""

    start: int
    """Where the hunk's first line would stand (may be before the file's start)."""
    cost: int
    differ: list[tuple[int, int]]
    """The differing context lines: (index in the hunk's lines, where it would stand)."""
    context: int
    """The hunk side's context lines."""

    @property
    def strong(self) -> bool:
        """At least half of the context lines match."""
        return 2 * self.cost <= self.context


def fuzzy_places(
    lines: list[str],
    hunk_lines: list[tuple[str, str]],
    change: str,
    floor: int,
    work: WorkBudget,
    around: tuple[int, int] | None = None,
) -> list[Fuzzy]:
    """Every place for one side of a hunk (``change`` ``"-"``: its old lines; ``"+"``: its
    result) where its changed lines match exactly and only a few context lines differ (at
    most ``FUZZ_EDGE`` before its first change and after its last, ``FUZZ_INSIDE`` between
    its changes), fewest differing first.

    The changed lines are the side's removed (or added) lines; for a change that only inserts
    on this side, the lines on either side of the insertion. They are compared but for a CR
    before the LF; context lines but for trailing whitespace. ``around``: only the places
    whose changed lines stand in that range of line indexes (or just after it). The lines read
    cost ``work`` their :func:`copy_cost` (a CR LF line is copied without its CR: 1,000 hunks
    read 200 lines of 64 KiB each, charged a step a line, 15 s), and each place tried the lines
    compared there (a hunk of 5,000 removed lines tried at each of 10,000 places took 42 s under
    the workspace lock, uncharged)."""
    other = "+" if change == "-" else "-"
    side = [(i, op, text) for i, (op, text) in enumerate(hunk_lines) if op != other]
    core = _core(hunk_lines, side, change, other)
    if not core or len(core) == len(side):
        return []
    first, last = min(core), max(core)
    keys = {bare(side[k][2]) for k in core}
    seen: dict[str, list[int]] = {key: [] for key in keys}
    low, high = around if around is not None else (0, len(lines))
    low, high = max(low, floor, 0), min(high + len(side), len(lines))
    work.spend(copy_cost(lines[low:high]))
    for index in range(low, high):
        positions = seen.get(bare(lines[index]))
        if positions is not None:
            positions.append(index)
    anchor = min(core, key=lambda k: len(seen[bare(side[k][2])]))
    # each line as compared: exactly (but for a CR) for a changed line, else but for spaces
    wants = [
        (index, k in core, bare(text) if k in core else text.rstrip())
        for k, (index, _, text) in enumerate(side)
    ]
    results: list[Fuzzy] = []
    for found in seen[bare(side[anchor][2])][:MAX_FUZZY_PLACES]:
        start = found - anchor
        differ: list[tuple[int, int]] = []
        counts = [0, 0, 0]  # before the first change, between changes, after the last
        compared = len(wants)
        for k, (index, exact, want) in enumerate(wants):
            at = start + k
            inside = floor <= at < len(lines)
            if exact:
                if not inside or bare(lines[at]) != want:
                    compared = k + 1
                    break
            elif not inside or lines[at].rstrip() != want:
                region = 0 if k < first else 2 if k > last else 1
                counts[region] += 1
                differ.append((index, at))
                if max(counts[0], counts[2]) > FUZZ_EDGE or counts[1] > FUZZ_INSIDE:
                    compared = k + 1
                    break
        else:
            results.append(Fuzzy(start, len(differ), differ, len(side) - len(core)))
        work.spend(compared)
    return sorted(results, key=lambda f: f.cost)


def _core(
    hunk_lines: list[tuple[str, str]], side: list[tuple[int, str, str]], change: str, other: str
) -> set[int]:
    """Indexes (into ``side``) of the lines that must match exactly."""
    position = {index: k for k, (index, _, _) in enumerate(side)}
    core = {k for k, (_, op, _) in enumerate(side) if op == change}
    i = 0
    while i < len(hunk_lines):
        if hunk_lines[i][0] == " ":
            i += 1
            continue
        j = i
        while j < len(hunk_lines) and hunk_lines[j][0] != " ":
            j += 1
        if all(op == other for op, _ in hunk_lines[i:j]):  # an insertion on this side
            for neighbour in (i - 1, j):
                if neighbour in position:
                    core.add(position[neighbour])
        i = j
    return core
