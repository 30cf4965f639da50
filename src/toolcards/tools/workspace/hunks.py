"""Applying a file's hunks to its text: where each hunk goes, and the lines it writes.

The text is handled as lines as they are on disk: a line keeps the CR of its CR LF ending,
so what a diff says about line endings can be kept. Each hunk is placed by the first rule that
finds a place, and every rule refuses rather than guesses:

1. **Anchored.** A hunk whose old side starts at line 1 belongs at the file's start, and one
   with no context after its last change at the file's end (as ``git apply`` places them);
   elsewhere only when neither its old lines nor its result stand there.
2. **Lines equal**: exactly, then but for a CR before the LF, then but for trailing
   whitespace. Of several places, those in the section the header names first (the text
   after ``@@ ... @@``, the nearest line above starting with a letter), then the one nearest
   the line the header names (shifted as the hunks before it were); refused when another is
   nearly as near (``RIVAL_RATIO``), and when a place found away from that line has, at that
   line, the hunk's changed lines with a few context lines differing (the file moved on
   there; the place found may be another copy).
3. **Already applied.** When the hunk's result (its context and added lines) stands as near
   the header's line as its old lines, or at the anchor, the diff was applied before:
   refused, so a diff sent twice is never applied twice.
4. **Context moved on.** The changed lines still match exactly and only a few context lines
   differ (:mod:`.fuzzy`): the place nearest the header's line, unless another is nearly as
   near, or the hunk's result fits as near with most of its context: applied there, keeping
   the file's context lines; the result says which context lines differed.

Lines written: a hunk found exactly (CRs compared) writes its added lines as the diff has them,
so a line added with CR LF is written CR LF and a diff converting line endings converts them. A
hunk found only with CRs ignored writes each added line without a CR in the ending of the line
it replaces, else of the line before it, else after it (an LF diff applied to a CR LF file keeps
the file CR LF); an added line with a CR in a diff whose old lines have none keeps its CR.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.edits import quote_lines
from toolcards.tools.workspace.fuzzy import SCAN_CHARS, Fuzzy, bare, copy_cost, fuzzy_places
from toolcards.tools.workspace.locate import closest_region
from toolcards.tools.workspace.patch import Hunk
from toolcards.tools.workspace.work_budget import WorkBudget

Key = Callable[[str], str]


_TIERS: tuple[tuple[str, Key], ...] = (("exact", str), ("cr", bare), ("space", str.rstrip))
RIVAL_RATIO = 2.5
"""Another place at most this many times as far from the header's line as the nearest one
leaves it unclear which is meant (how far the file moved is not in the diff): refused."""
MAX_NOTED = 5
"""Differing context lines quoted in the result of one hunk."""
MAX_SECTION_LINES = 5_000
"""Lines looked at above a place for the section line the hunk header names."""
MAX_WORK = 4_000_000
"""Places weighed and lines looked at for one patch's hunks, at most (a patch needs a few per
line of its files; 100 hunks of repeated lines against a file of 50,000 identical lines took
11 s, and the work grew with hunks times lines): past it the patch is refused. One budget for
the whole call: a file named in 200 sections of a patch was weighed with 200 fresh ones."""
SCAN_LINES = 16
"""Lines read in a search for a hunk's first line per step of ``MAX_WORK``: ``list.index``
compares in C, ~16 ns a line (a step weighed in Python takes 50 to 190 ns), and a line as
long as the one looked for character by character, ~16 ns per ``SCAN_CHARS`` characters.
16, not 8: an LF diff of 200 hunks near the top of a 100,000-line CRLF file misses the exact
tier once a hunk and reads on to the end; at 8 it ran out of budget, at 16 it applies (the
worst case still about a second)."""
MOVE_LINES = 128
"""Lines moved per step of ``MAX_WORK`` when a hunk that changes the line count is written:
the lines after it shift in C, ~0.75 ns a line (20,000 one-line insertions into a file of
1,000,000 lines took 15 s, uncharged)."""


@dataclass(frozen=True)
class _Near:
    pos: int
    distance: int
    tie: list[int]
    """Other places less than twice as far (empty when ``pos`` is clearly the nearest)."""


class PatchedText:
    """One file's text while a patch's sections are applied to it, split into lines once for
    all of them and joined once at the end (a patch naming a file of two lines, one of 19 MiB,
    in 300 sections split and joined it at each: 27 s holding the workspace lock): its lines
    (each with the CR of a CR LF ending), whether it ends with a newline, and, in a section,
    where the next hunk may go."""

    def __init__(self, text: str, work: WorkBudget) -> None:
        self.rel = ""
        self.lines = text.split("\n") if text else []
        self.final_nl = text.endswith("\n") or not text
        if text.endswith("\n"):
            self.lines.pop()
        self._crs = text.count("\r\n") + text.endswith("\r")  # the lines ending with a CR
        self.crlf = False
        self.floor = 0
        self.delta = 0
        self.notes: list[str] = []
        self._keyed: dict[str, list[str]] = {}
        self._work = work
        # each line a string split out, and joined at the end, its characters copied each time
        work.spend(len(self.lines) + len(text) // SCAN_CHARS)

    def text(self) -> str:
        return "\n".join(self.lines) + ("\n" if self.final_nl and self.lines else "")

    def apply_all(self, hunks: list[Hunk], rel: str) -> list[str]:
        """Apply one section's hunks, in order, to the text as the sections before left it;
        the notes on hunks whose context differed. RetriableError naming the failing hunk (of
        file ``rel``), or saying the hunk was applied before, or that the work ran out."""
        self._start(rel)
        for number, hunk in enumerate(hunks, 1):
            self.apply(number, hunk)
        return self.notes

    def _start(self, rel: str) -> None:
        """A section's start: its hunks placed from the file's start, their line numbers as the
        text stands. A text a hunk left ending with an empty line and no newline reads as it
        would on disk: ending with a newline (empty: no line and a final newline)."""
        if not self.final_nl and self.lines[-1:] in ([], [""]):
            for lines in (self.lines, *self._keyed.values()):
                del lines[-1:]
            self.final_nl = True
        ended = len(self.lines) - (not self.final_nl)  # the lines ended by an LF
        open_cr = not self.final_nl and self.lines[-1].endswith("\r")
        self.crlf = 2 * (self._crs - open_cr) > ended
        self.rel, self.floor, self.delta, self.notes = rel, 0, 0, []

    # ---- placing a hunk -------------------------------------------------------------------

    def apply(self, number: int, hunk: Hunk) -> None:
        old, new = hunk.old_block(), hunk.new_block()
        if not old:
            self._insert(number, hunk, new)
            return
        placed = self._place(number, hunk, old, new)
        if isinstance(placed, Fuzzy):
            self._note(number, hunk, placed)
            self._write(hunk, placed.start, "fuzzy")
        else:
            self._write(hunk, *placed)

    def _insert(self, number: int, hunk: Hunk, new: list[str]) -> None:
        """A hunk without old lines: inserted after line ``old_start`` (``-U0``, new files)."""
        pos = hunk.old_start + self.delta
        if not self.floor <= pos <= len(self.lines):
            raise RetriableError(
                f"{self.rel}: hunk {number} inserts after line {hunk.old_start}, but the file "
                f"has {len(self.lines)} lines"
            )
        if new and [bare(x) for x in self.lines[pos : pos + len(new)]] == [bare(x) for x in new]:
            raise self._already(number, pos)
        self._write(hunk, pos, "none")

    def _place(
        self, number: int, hunk: Hunk, old: list[str], new: list[str]
    ) -> tuple[int, str] | Fuzzy:
        expected = hunk.old_start - 1 + self.delta
        at_start = hunk.old_start <= 1 and self.floor == 0
        at_end = hunk.old_no_eol or not hunk.lines or hunk.lines[-1][0] != " "
        for tier, key in _TIERS:
            keyed = self._keyed_lines(tier, key)
            want_old, want_new = [key(x) for x in old], [key(x) for x in new]
            if want_new == want_old:
                want_new = []  # a result equal to the old lines is no sign of a diff applied
            if at_start or at_end:
                end = len(keyed)
                if self._hit(keyed, want_new, 0 if at_start else end - len(want_new), want_old):
                    raise self._already(number, 0 if at_start else end - len(want_new))
                if self._hit(keyed, want_old, 0 if at_start else end - len(want_old), want_new):
                    return (0 if at_start else end - len(want_old)), tier
            rings = self._rings(keyed, want_old, expected, want_new)
            near_old = self._nearest(rings, expected, hunk.heading)
            rings = self._rings(keyed, want_new, expected, want_old)
            limit = None if near_old is None else near_old.distance
            near_new = self._nearest(rings, expected, hunk.heading, limit)
            if near_new is not None and (
                near_old is None or near_new.distance <= near_old.distance
            ):
                raise self._already(number, near_new.pos)
            if near_old is None:
                continue
            if near_old.tie:
                where = ", ".join(str(h + 1) for h in sorted([near_old.pos, *near_old.tie])[:20])
                raise RetriableError(
                    f"{self.rel}: hunk {number} context matches several places about as near "
                    f"line {max(expected, 0) + 1}, where the header puts it (lines {where}); add "
                    "context lines or fix the @@ line numbers"
                )
            if near_old.distance:
                self._check_nearer(number, hunk, expected, near_old)
            return near_old.pos, tier
        return self._fuzzy(number, hunk, old, expected)

    def _check_nearer(self, number: int, hunk: Hunk, expected: int, found: _Near) -> None:
        """Refuse a match away from the header's line when at that line (closer than the
        hunk's length) the hunk's changed lines stand with a few context lines differing: the
        file may have moved on there, and the match found be another copy of the same lines."""
        size = len(hunk.lines)
        window = (expected - size, expected + size + 1)
        heading = hunk.heading
        sectioned = bool(heading) and bool(self._in_section([found.pos], heading))
        for place in fuzzy_places(self.lines, hunk.lines, "-", self.floor, self._work, window):
            off = abs(place.start - expected)
            if not place.cost or not place.strong or off > size or 2 * off >= found.distance:
                continue  # an exact place was weighed already; a weak or far one is no rival
            if sectioned and not self._in_section([place.start], heading):
                continue  # outside the section the header names, where the place found is
            raise RetriableError(
                f"{self.rel}: hunk {number} matches line {found.pos + 1}, {found.distance} "
                f"lines from line {max(expected, 0) + 1} where the header puts it; at line "
                f"{max(place.start, 0) + 1} its changed lines stand with {place.cost} context "
                "line(s) differing. Which one is meant is unclear: re-read the file and "
                "regenerate the patch"
            )

    def _fuzzy(self, number: int, hunk: Hunk, old: list[str], expected: int) -> Fuzzy:
        """Where the hunk goes when its context differs (or why it goes nowhere)."""
        work = self._work
        places = fuzzy_places(self.lines, hunk.lines, "-", self.floor, work)
        # the result stands already: only with added lines, and half its context lines or more
        adds = any(op == "+" for op, _ in hunk.lines)
        results = fuzzy_places(self.lines, hunk.lines, "+", self.floor, work) if adds else []
        results = [f for f in results if f.strong]
        place = self._best(places, expected, hunk.heading)
        result = self._best(results, expected, hunk.heading)
        if result is not None and (place is None or result[0] <= place[0]):
            raise self._already(number, max(result[1].start, 0))
        if place is None:
            raise self._not_found(number, old)
        found, rivals = place[1], place[2]
        if found.cost == found.context:  # no context line matches: only the one place will do
            rivals = [f for f in places if f.start != found.start]
        if rivals:
            where = ", ".join(str(max(f.start, 0) + 1) for f in [found, *rivals][:20])
            raise RetriableError(
                f"{self.rel}: hunk {number} does not apply as written, and with some of its "
                f"context lines differing it would fit several places about as well (lines "
                f"{where}); re-read the file and regenerate the patch"
            )
        return found

    def _best(
        self, places: list[Fuzzy], expected: int, heading: str
    ) -> tuple[tuple[int, int], Fuzzy, list[Fuzzy]] | None:
        """The place nearest the header's line (of those with the fewest differing context
        lines, at one start): its rank (distance, differing lines), itself, and its rivals
        (others about as near, with no more differing lines)."""
        if not places:
            return None
        by_start: dict[int, Fuzzy] = {}
        for place in places:  # fewest differing first
            by_start.setdefault(place.start, place)
        ordered = sorted(by_start, key=lambda start: (abs(start - expected), start))
        near = self._nearest([(0, ordered)], expected, heading)
        assert near is not None
        found = by_start[near.pos]
        rivals = [by_start[start] for start in near.tie if by_start[start].cost <= found.cost]
        return (near.distance, found.cost), found, rivals

    def _keyed_lines(self, tier: str, key: Key) -> list[str]:
        if tier == "exact":
            return self.lines
        if tier not in self._keyed:
            self._work.spend(copy_cost(self.lines))
            self._keyed[tier] = [key(x) for x in self.lines]
        return self._keyed[tier]

    def _rings(
        self, keyed: list[str], want: list[str], expected: int, other: list[str]
    ) -> Iterator[tuple[int, list[int]]]:
        """The places at or after the floor where ``want`` stands in ``keyed``, but those the
        other side's match implies (:func:`_offset`), read outward from ``expected`` in rings
        twice as wide each time: each ring's radius and its places, nearest first (the lower
        of two as near). A hunk found near its header's line costs the lines around it (each
        searching the rest of the file, 500 one-line hunks against 2,000,000 lines took 35 s
        under the workspace lock)."""
        low, high = self.floor, len(keyed) - len(want)  # where ``want`` may start
        if not want or low > high:
            return
        offset = _offset(other, want)
        below = above = min(max(expected, low), high + 1)  # read: ``below`` up to ``above``
        radius = 0
        while True:
            first = min(below, max(expected - radius, low))
            last = max(above, min(expected + radius, high) + 1)
            found = self._hits(keyed, want, first, below) + self._hits(keyed, want, above, last)
            below, above = first, last
            if offset is not None:
                found = [p for p in found if not self._stands(keyed, other, p - offset)]
            yield radius, sorted(found, key=lambda p: (abs(p - expected), p))
            if below == low and above == high + 1:
                return
            radius = 2 * radius + 1

    def _hits(self, keyed: list[str], want: list[str], start: int, stop: int) -> list[int]:
        """The places from ``start`` to before ``stop`` where ``want`` stands in ``keyed``
        (each has room for it). Each line read costs ``1 / SCAN_LINES`` step (more for a long
        first line), each place tried the lines compared there, up to the first that differs
        (a hunk of 30,000 equal lines tried at each of a file's 100,000 such lines took a
        minute)."""
        if start >= stop:
            return []
        weight = 1 + len(want[0]) // SCAN_CHARS
        self._work.spend(-(-(stop - start) * weight // SCAN_LINES))
        found: list[int] = []
        first = want[0]
        pos = start
        while pos < stop:
            try:
                pos = keyed.index(first, pos, stop)
            except ValueError:
                break
            if self._stands(keyed, want, pos):
                found.append(pos)
            pos += 1
        return found

    def _hit(self, keyed: list[str], want: list[str], pos: int, other: list[str]) -> bool:
        """Whether ``want`` stands at ``pos`` and the other side's match does not imply it."""
        offset = _offset(other, want)
        if not self._stands(keyed, want, pos):
            return False
        return offset is None or not self._stands(keyed, other, pos - offset)

    def _stands(self, keyed: list[str], want: list[str], pos: int) -> bool:
        """Whether ``want`` stands at ``pos``, at or after the floor; the lines compared, up to
        the first that differs, are charged."""
        size = len(want)
        if not size or pos < self.floor or pos + size > len(keyed):
            return False
        same = 0
        while same < size and keyed[pos + same] == want[same]:
            same += 1
        self._work.spend(same or 1)
        return same == size

    def _nearest(
        self,
        rings: Iterable[tuple[int, list[int]]],
        expected: int,
        heading: str,
        limit: int | None = None,
    ) -> _Near | None:
        """The place nearest ``expected`` (in the header's section when some are) and its
        rivals, from ``rings`` (:meth:`_rings`: places outward from ``expected``, each ring's
        radius and its places, nearest first). Rings are read only as far as the rivals'
        reach, or as ``limit`` when no place stands nearer: None then, as when none stands."""
        best: int | None = None
        reach = 0
        rivals: list[int] = []
        outside: list[int] = []  # places out of the section, while none is in it
        for radius, places in rings:
            if best is not None:
                places = [place for place in places if abs(place - expected) <= reach]
            sectioned = set(self._in_section(places, heading) if heading else places)
            for place in places:
                distance = abs(place - expected)
                if best is not None and distance > reach:
                    break
                inside = place in sectioned
                if best is None and inside:
                    best, reach = place, int(RIVAL_RATIO * distance)
                elif best is None:
                    outside.append(place)
                elif inside:
                    rivals.append(place)
            if best is not None and radius >= reach:
                break
            if best is None and not outside and limit is not None and radius >= limit:
                return None
        if best is None:  # no place in the section, or no section: the nearest of all
            if not outside:
                return None
            best, reach = outside[0], int(RIVAL_RATIO * abs(outside[0] - expected))
            rivals = [place for place in outside[1:] if abs(place - expected) <= reach]
        return _Near(best, abs(best - expected), rivals)

    def _in_section(self, hits: list[int], heading: str) -> list[int]:
        """The places whose section, as ``git diff`` names it (the nearest line above that
        starts with a letter, ``_`` or ``$``, looked for up to ``MAX_SECTION_LINES`` up),
        begins with ``heading``."""
        inside: list[int] = []
        looked = 0
        for hit in hits:
            for index in range(hit - 1, max(hit - MAX_SECTION_LINES, 0) - 1, -1):
                looked += 1
                line = self.lines[index]
                if line[:1].isalpha() or line[:1] in ("_", "$"):
                    if line.startswith(heading):
                        inside.append(hit)
                    break
            if looked > self._work.left:
                break
        self._work.spend(looked + 1)
        return inside

    # ---- writing a hunk -------------------------------------------------------------------

    def _write(self, hunk: Hunk, start: int, tier: str) -> None:
        """Replace the hunk's old lines at ``start`` (where its first line stands) by its new
        lines; when their count changes, the lines after them move, in each list spliced."""
        first, last, out, self.final_nl = self._render(hunk, start, tier)
        if len(out) != last - first:
            moved = (len(self.lines) - last) * (1 + len(self._keyed))
            self._work.spend(moved // MOVE_LINES)
        self._crs += _with_cr(out) - _with_cr(self.lines[first:last])
        self.lines[first:last] = out
        for name, key in _TIERS:
            if name in self._keyed:
                self._keyed[name][first:last] = [key(x) for x in out]
        old_count = sum(op != "+" for op, _ in hunk.lines)
        if old_count:
            self.delta = start + len(hunk.new_block()) - (hunk.old_start - 1 + old_count)
        else:
            self.delta = start + len(out) - hunk.old_start
        self.floor = first + len(out)

    def _render(self, hunk: Hunk, start: int, tier: str) -> tuple[int, int, list[str], bool]:
        """The hunk written at ``start``: the range of file lines it replaces, the lines that
        replace them (context lines as the file has them, added lines with their line
        endings), and whether the file then ends with a newline."""
        lines = self.lines
        old_count = sum(op != "+" for op, _ in hunk.lines)
        reaches_end = start + old_count >= len(lines)
        # the CRs of the old lines were compared (one of them ends with a newline)
        verbatim = tier == "exact" and (old_count > 1 or self.final_nl or not reaches_end)
        explicit = not any(op != "+" and t.endswith("\r") for op, t in hunk.lines)
        out: list[str] = []
        styled = False  # the last line written got a CR from the file's style
        open_line = -1  # where the file's last line, without a newline, went in ``out``
        removed: list[int] = []  # the file lines the current change removes
        kept = -1  # the file index of the last context line
        cursor = start
        for op, text in hunk.lines:
            if op == " ":
                removed = []
                if 0 <= cursor < len(lines):
                    if cursor == len(lines) - 1 and not self.final_nl:
                        open_line = len(out)
                    out.append(lines[cursor])
                    kept, styled = cursor, False
            elif op == "-":
                removed.append(cursor)
            elif verbatim or (explicit and text.endswith("\r")):
                out.append(text)
                styled = False
            else:
                styled = self._style(removed, kept, cursor)
                out.append(bare(text) + ("\r" if styled else ""))
            cursor += op != "+"
        final_nl = self.final_nl
        if reaches_end and hunk.new_no_eol:
            final_nl = False
        elif reaches_end and hunk.old_no_eol:
            final_nl = True
        elif 0 <= open_line < len(out) - 1 and self.crlf and not out[open_line].endswith("\r"):
            out[open_line] += "\r"  # the file's open last line now has lines after it
        if reaches_end and not final_nl and styled:
            out[-1] = out[-1][:-1]  # the last line has no line end to style
        return max(start, 0), min(start + old_count, len(lines)), out, final_nl

    def _style(self, removed: list[int], kept: int, cursor: int) -> bool:
        """Whether a line added without a CR gets one: as the line it replaces, else the line
        before it, else the line after it, else as most of the file's lines."""
        for index in (*removed[:1], kept, cursor):
            cr = self._cr_of(index)
            if cr is not None:
                return cr
        return self.crlf

    def _cr_of(self, index: int) -> bool | None:
        lines = self.lines
        if not 0 <= index < len(lines) or (index == len(lines) - 1 and not self.final_nl):
            return None
        return lines[index].endswith("\r")

    # ---- messages -------------------------------------------------------------------------

    def _note(self, number: int, hunk: Hunk, place: Fuzzy) -> None:
        shown = []
        for index, at in place.differ[:MAX_NOTED]:
            text = bare(hunk.lines[index][1])
            if not 0 <= at < len(self.lines):
                where = "before the file's start" if at < 0 else "past the file's end"
                shown.append(f"{text!r} would stand {where}")
            else:
                shown.append(f"line {at + 1} is {bare(self.lines[at])!r}, not {text!r}")
        if len(place.differ) > MAX_NOTED:
            shown.append(f"{len(place.differ) - MAX_NOTED} more")
        before = 0  # old lines before the first change
        for op, _ in hunk.lines:
            if op != " ":
                break
            before += 1
        self.notes.append(
            f"{self.rel}: hunk {number} applied at line {max(place.start + before, 0) + 1}, where "
            f"{len(place.differ)} of its context lines differ from the file: " + "; ".join(shown)
        )

    def _already(self, number: int, pos: int) -> RetriableError:
        return RetriableError(
            f"{self.rel}: hunk {number} is already applied: the file has its result at line "
            f"{pos + 1} (was the patch sent before?); no file was changed"
        )

    def _not_found(self, number: int, block: list[str]) -> RetriableError:
        region = closest_region(
            "\n".join(bare(x) for x in self.lines), "\n".join(bare(x) for x in block)
        )
        quoted = ""
        if region is not None:
            first, found = region
            quoted = f" Closest region (line {first}):\n" + quote_lines(first, found)
        return RetriableError(
            f"{self.rel}: hunk {number} does not apply; its context/removed lines were not "
            f"found.{quoted}\nRe-read the file and regenerate the patch."
        )


def _with_cr(lines: list[str]) -> int:
    """How many of ``lines`` end with a CR."""
    return sum(line.endswith("\r") for line in lines)


def _offset(block: list[str], part: list[str]) -> int | None:
    """Where ``part`` stands inside ``block`` at its start or end, or None. A place of one
    side inside the other side's place is implied by it, not a match of its own: a hunk that
    only removes lines at its edge has its result inside its old lines (not a sign it was
    applied), and a hunk that only adds lines at its edge has its old lines inside its result
    (a sign it was)."""
    if not part or len(part) >= len(block):
        return None
    if block[: len(part)] == part:
        return 0
    if block[-len(part) :] == part:
        return len(block) - len(part)
    return None


def patch_work() -> WorkBudget:
    """The work one patch call may cost (``MAX_WORK``), over all its files' sections."""
    return WorkBudget(
        MAX_WORK,
        lambda: (
            "the patch's hunks stand in too many places of its files to weigh them all; add "
            "context lines to the hunks, or send fewer hunks at once"
        ),
    )
