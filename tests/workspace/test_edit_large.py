"""Edits in large files: the closest region of a miss points at the right place, matches
found through candidate lines are the ones a line-by-line scan finds, the work of both is
bounded (for a patch's miss too), and the diff an edit answers with is bounded in lines, in
characters a line and in characters in all, and made from the places changed (difflib sees a
bounded number of lines)."""

from __future__ import annotations

import difflib
import random
import re
import sysconfig
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, SupportsIndex

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import WorkspaceTool
from toolcards.tools.workspace.edits import (
    MAX_DIFF_CHARS,
    MAX_DIFF_LINE_CHARS,
    MAX_DIFF_WORK,
    Span,
    apply_edit,
    compose_spans,
)
from toolcards.tools.workspace.indentation import MAX_MATCHES, MAX_OCCURRENCES
from toolcards.tools.workspace.locate import MAX_RATIO_WORK, closest_region
from toolcards.tools.workspace.models import EditItem

from .conftest import Tools, tools_of

_WORD = re.compile(r"[A-Za-z_]\w{2,}")


def _perturbed(rng: random.Random, block: list[str]) -> list[str] | None:
    """The block as a model might misremember it: a renamed word, a rewritten or lost line,
    or lost indentation."""
    lines = list(block)
    k = rng.randrange(len(lines))
    kind = rng.choice(["rename", "rewrite", "drop", "indent"])
    if kind == "rename":
        words = _WORD.findall(lines[k])
        if not words:
            return None
        word = rng.choice(words)
        lines[k] = lines[k].replace(word, word + "_x", 1)
    elif kind == "rewrite":
        lines[k] = "    something_else = compute(other)"
    elif kind == "drop" and len(lines) > 2:
        del lines[k]
    else:
        lines = [ln.strip() for ln in lines]
        lines[k] += "  # changed"
    return lines


def test_closest_region_points_at_the_misremembered_place_in_real_files() -> None:
    rng = random.Random(7)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = [p for p in sorted(stdlib.glob("*.py")) if 8_000 < p.stat().st_size < 150_000]
    rng.shuffle(sources)
    hits = total = 0
    for source in sources[:40]:
        text = source.read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        for _ in range(5):
            size = rng.randint(2, 10)
            start = rng.randrange(0, len(lines) - size)
            block = lines[start : start + size]
            old = _perturbed(rng, block)
            if old is None or sum(1 for b in block if b.strip()) < 2 or "\n".join(old) in text:
                continue
            found = closest_region(text, "\n".join(old))
            total += 1
            hits += found is not None and abs(found[0] - 1 - start) <= 1
    assert total >= 100
    assert hits / total >= 0.85  # the earlier exhaustive scorer reached 0.91 on such cases


@pytest.fixture
def big(ws: Path) -> Path:
    path = ws / "big.py"
    path.write_text("".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(50_000)))
    return path


def test_miss_in_a_large_file_quotes_the_place_meant(tools: Tools, big: Path) -> None:
    with pytest.raises(RetriableError, match=r"Closest region \(line 80001\)") as info:
        tools["workspace_edit"]("big.py", "def f40000(y):\n    return x + 40000", "x")
    assert "def f40000(x):" in str(info.value)


def test_indentation_drift_deep_in_a_large_file_applies(tools: Tools, big: Path) -> None:
    tools["workspace_edit"](
        "big.py", "  def f45000(x):\n      return x + 45000", "  def f45000(x):\n      return -x"
    )
    lines = big.read_text().split("\n")
    assert lines[90_000:90_002] == ["def f45000(x):", "    return -x"]


def test_frequent_line_is_still_reported_as_ambiguous(tools: Tools, ws: Path) -> None:
    (ws / "rep.py").write_text("  x = 1\n  y = 2\n" * 3000)
    with pytest.raises(RetriableError, match="3000 places"):
        tools["workspace_edit"]("rep.py", "x = 1\ny = 2", "x = 3\ny = 4")


@pytest.mark.timeout(60)  # 100 s before
def test_old_string_of_one_frequent_word_is_refused_within_a_bound(tools: Tools, ws: Path) -> None:
    """Attack: 2,000 lines of one word (the last one matching nowhere) against a file of 20,000
    lines of it: every place of the word was weighed as the start of every old line, 100 s
    holding the workspace lock."""
    before = "x\n" * 20_000
    (ws / "f.txt").write_text(before)
    with pytest.raises(RetriableError, match="^old_string matches too many places to weigh: add"):
        tools["workspace_edit"]("f.txt", "x\n" * 1_999 + "x x\n", "z\n")
    assert (ws / "f.txt").read_text() == before


_Bound = SupportsIndex | None


class _Scanning(str):
    """A text counting the characters its searches look at (the C-level scans the edit levels
    and the closest region are made of): a search stops at its hit."""

    scanned = 0

    def _span(self, start: _Bound, end: _Bound) -> tuple[int, int]:
        lo, hi, _ = slice(start, end).indices(len(self))
        return lo, hi

    def find(self, sub: str, start: _Bound = None, end: _Bound = None, /) -> int:
        lo, hi = self._span(start, end)
        hit = super().find(sub, lo, hi)
        self.scanned += (hi if hit < 0 else hit + len(sub)) - lo
        return hit

    def rfind(self, sub: str, start: _Bound = None, end: _Bound = None, /) -> int:
        lo, hi = self._span(start, end)
        hit = super().rfind(sub, lo, hi)
        self.scanned += hi - (lo if hit < 0 else hit)
        return hit

    def count(self, sub: str, start: _Bound = None, end: _Bound = None, /) -> int:
        lo, hi = self._span(start, end)
        self.scanned += hi - lo
        return super().count(sub, lo, hi)


@pytest.mark.parametrize(
    ("text", "old", "refusal"),
    [
        ("a " * 200_000, "a  a", "old_string was not found"),
        ("a " * 200_000, "a a", f"old_string matches more than {MAX_MATCHES} places"),
        ("p q " * 200 + "r " * 200_000, "p q\nzzz", "old_string was not found"),
    ],
    ids=["line-levels-and-closest-region", "exact-level", "closest-region-whole-line-key"],
)
def test_an_edit_of_a_one_line_file_scans_it_a_bounded_number_of_times(
    text: str, old: str, refusal: str
) -> None:
    """Attack: a one-line file (a minified bundle) and an old_string whose word is everywhere:
    each occurrence looked back for its line start to the file's start, 114 s for 3.8 MiB,
    holding the workspace lock (a 5-byte write to another file waited as long)."""
    scanning = _Scanning(text)
    with pytest.raises(RetriableError, match=refusal):
        apply_edit(scanning, old, "b")
    assert scanning.scanned / len(text) <= 30  # before: 100,000, 50,000 and 216


@pytest.mark.parametrize(
    ("text", "old", "new", "replace_all", "refusal"),
    [
        (" " * 20_000 + "x\n", " ", "y", False, f"matches more than {MAX_MATCHES} places"),
        ((" " * 20_000 + "x\n") * 2, " x", "y\n" * 1_000, True, "40002002 characters long, over"),
        ("\t" * 100_000 + "x\n", "\tx", "y\n" * 1_000, False, "over the text-file cap"),
    ],
    ids=["ambiguous", "replace-all", "one-match-moved-deep"],
)
def test_an_edit_inside_a_long_indentation_is_refused_within_a_memory_bound(
    text: str, old: str, new: str, replace_all: bool, refusal: str
) -> None:
    """Attack: an old_string starting with whitespace, found in a long run of indentation: each
    occurrence got its replacement padded to its depth, all built before the edit was found
    ambiguous (193 MiB for a line of 20,000 spaces, 384 MiB and a 200 MB result with
    replace_all, 20 GB for a line of 200,000); one match moved 100,000 tabs deep took 100 MB."""
    tracemalloc.start()
    try:
        with pytest.raises(RetriableError, match=refusal):
            apply_edit(text, old, new, replace_all=replace_all)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 1024 * 1024


@pytest.mark.parametrize(
    ("line", "places", "old", "new"),
    [
        ("a", 200_000, "a", "b"),
        ("    x = 1\n", 200_000, "  x = 1", "  y = 1"),
        ("x\n", 12_000, "x \n", "y\n"),  # fewer: each line a window kept before compared
    ],
    ids=["exact", "inside-indentation", "line-trimmed"],
)
def test_a_replace_all_of_more_places_than_one_edit_may_change_is_refused_as_they_are_found(
    line: str, places: int, old: str, new: str
) -> None:
    """Attack: replace_all of "a" in a 19 MiB file of it kept a match per place before any cap,
    and two strings more each to splice them: 3.3 GiB and 4 minutes holding the workspace lock.
    Each level stops at the first place past the cap; as many places as the cap are changed."""
    tracemalloc.start()
    try:
        with pytest.raises(RetriableError, match=f"^old_string matches more than {MAX_MATCHES} "):
            apply_edit(line * places, old, new, replace_all=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * 1024 * 1024  # before: no refusal (33, 70 and 4.9 MiB)
    assert apply_edit(line * MAX_MATCHES, old, new, replace_all=True).count == MAX_MATCHES


def test_occurrences_that_are_no_match_count_against_a_bound_as_they_are_found() -> None:
    """Attack: occurrences of old_string that are no match were looked at one by one, none
    counted: a multi-line one starting with a space, inside the indentation of 3,000,000 lines
    (one edit: 12 s; a multi-edit of 500 edits: 49 min holding the workspace lock). Every
    occurrence looked at counts: past the bound the edit is refused; with the bound's number of
    occurrences, the one match is changed."""
    text, old, new = (lambda n: "\t \nx\n" * n + " \nx\n"), " \nx", " \nxx"
    with pytest.raises(RetriableError, match=f"^old_string stands in more than {MAX_OCCURRENCES} "):
        apply_edit(text(MAX_OCCURRENCES), old, new)  # before: applied
    result = apply_edit(text(MAX_OCCURRENCES - 1), old, new)
    assert result.count == 1 and new in result.text


def test_a_line_head_is_found_however_often_its_code_stands_after_other_code() -> None:
    """The code of a one-line old_string found only inside deeper indentation is looked for at
    the heads of lines alone: after the code of 3,000,000 lines it was looked at each time
    (3 s), and counting those looks refused a unique edit past 20,000 of them."""
    text = "    x\n" + "yx\n" * (2 * MAX_OCCURRENCES)
    result = apply_edit(text, "  x", "  z")
    assert result.count == 1 and result.text.startswith("    z\n")
    assert result.text.count("yx\n") == 2 * MAX_OCCURRENCES


def _spliced(text: str, places: list[tuple[int, int, str]]) -> tuple[str, list[Span]]:
    """``text`` with each ``(start, end, replacement)`` of ``places`` (in order) made, and the
    spans of them."""
    out, spans, pos = "", [], 0
    for start, end, replacement in places:
        out += text[pos:start]
        spans.append((start, end, len(out), len(out) + len(replacement)))
        out += replacement
        pos = end
    return out + text[pos:], spans


def test_composed_spans_are_the_places_changed_between_the_first_and_the_last_text() -> None:
    """Spans are merged only where the later edit reaches them; those after it are moved: the
    text between two composed spans is the same before the first edit and after the last."""
    rng = random.Random(11)
    for _ in range(3_000):
        first = before = "".join(rng.choice("ab\n") for _ in range(rng.randrange(1, 30)))
        spans: list[Span] = []
        for _ in range(rng.randrange(1, 6)):
            cuts = sorted(rng.sample(range(len(before) + 1), min(len(before) + 1, 4)))
            places = [
                (lo, hi, rng.choice(["", "x", "yy\n"]))
                for lo, hi in zip(cuts[::2], cuts[1::2], strict=False)
            ]
            before, then = _spliced(before, places)
            spans = compose_spans(spans, then)
        pos_a = pos_c = 0
        for a, b, c, d in spans:
            assert pos_a <= a <= b and pos_c <= c <= d
            assert first[pos_a:a] == before[pos_c:c]
            pos_a, pos_c = b, d
        assert first[pos_a:] == before[pos_c:]


def test_an_edit_result_over_the_cards_text_cap_is_refused(ws: Path) -> None:
    tools = tools_of(WorkspaceTool(max_text_bytes=4096))
    before = "x = 1\n" * 100
    (ws / "f.py").write_text(before)
    with pytest.raises(RetriableError, match=r"over the text-file cap \(4096 bytes\)"):
        tools["workspace_edit"]("f.py", "x = 1", "x = " + "1" * 60, replace_all=True)
    assert (ws / "f.py").read_text() == before


@pytest.fixture
def ratio_work(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes (products of the lengths compared) of the difflib ratios computed; one over
    the bound is recorded, not computed (those took minutes)."""
    sizes: list[int] = []
    real = difflib.SequenceMatcher.ratio

    def ratio(self: difflib.SequenceMatcher[str]) -> float:
        sizes.append(len(vars(self)["a"]) * len(vars(self)["b"]))  # untyped in typeshed
        return 1.0 if sizes[-1] > MAX_RATIO_WORK else real(self)

    monkeypatch.setattr(difflib.SequenceMatcher, "ratio", ratio)
    return sizes


def test_closest_region_of_a_long_old_string_is_weighed_within_a_bound(
    tools: Tools, ws: Path, ratio_work: list[int]
) -> None:
    """Attack: a 40,000-character old_string missing by its last character: difflib compared
    it whole with a window as long, 88 s holding the workspace lock."""
    (ws / "f.txt").write_text("a b " * 10_000 + "c\n")
    with pytest.raises(RetriableError, match=r"Closest region \(line 1\):\n     1\ta b a b"):
        tools["workspace_edit"]("f.txt", "a b " * 10_000 + "d", "e")
    assert ratio_work and sum(ratio_work) <= MAX_RATIO_WORK


def test_closest_region_of_a_long_patch_hunk_is_weighed_within_a_bound(
    tools: Tools, ws: Path, ratio_work: list[int]
) -> None:
    """Attack: a hunk removing a 40,000-character line the file has but for its last
    character: the closest region compared it whole, as a long old_string was."""
    (ws / "f.txt").write_text("a b " * 10_000 + "c\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-" + "a b " * 10_000 + "d\n+e\n"
    with pytest.raises(RetriableError, match=r"hunk 1 does not apply.*Closest region \(line 1\)"):
        tools["workspace_patch"](patch)
    assert ratio_work and sum(ratio_work) <= MAX_RATIO_WORK
    assert (ws / "f.txt").read_text() == "a b " * 10_000 + "c\n"


def test_diff_of_a_one_word_edit_in_one_long_line_cuts_the_line(tools: Tools, ws: Path) -> None:
    """A minified file of one 5 MiB line: the diff once held that line twice."""
    body = "var needle=1;" + "x=1;" * (5 * 1024 * 1024 // 4)
    (ws / "bundle.min.js").write_text(body + "\n")
    out = tools["workspace_edit"]("bundle.min.js", "needle", "NEEDLE")
    more = len(body) + 1 - MAX_DIFF_LINE_CHARS
    assert out.splitlines() == [
        "--- a/bundle.min.js",
        "+++ b/bundle.min.js",
        "@@ -1 +1 @@",
        ("-" + body)[:MAX_DIFF_LINE_CHARS] + f" [... {more} more chars]",
        ("+" + body.replace("needle", "NEEDLE"))[:MAX_DIFF_LINE_CHARS]
        + f" [... {more} more chars]",
    ]


def _wide(path: Path, lines: int) -> None:
    """``lines`` lines of 1,000 characters, each with one ``old`` to replace."""
    path.write_text("".join(f"old {i:05d} " + "y" * 989 + "\n" for i in range(lines)))


def test_diff_is_capped_in_characters_and_says_where(tools: Tools, ws: Path) -> None:
    # 120 diff lines of about 1,000 characters: under the line caps, over the character cap
    _wide(ws / "wide.txt", 60)
    out = tools["workspace_edit"]("wide.txt", "old", "new", True)
    assert len(out) <= MAX_DIFF_CHARS + 100
    shown = out.splitlines()
    assert shown[2] == "@@ -1,60 +1,60 @@"
    added = sum(line.startswith("+new") for line in shown)
    assert 0 < added < 60
    assert (
        shown[-1]
        == f"[... diff truncated: {60 - added} more lines, from line {added + 1} of wide.txt]"
    )


def test_multi_edit_diffs_share_one_character_cap(tools: Tools, ws: Path) -> None:
    for name in "abcd":
        _wide(ws / f"{name}.txt", 30)  # a diff of about 60,000 characters each
    edits = [EditItem(path=f"{n}.txt", old_string="old", new_string="new", replace_all=True)
             for n in "abcd"]  # fmt: skip
    out = tools["workspace_multi_edit"](edits)
    assert len(out) <= MAX_DIFF_CHARS + 200
    assert out.count("--- a/a.txt") == out.count("--- a/b.txt") == 1
    assert "--- a/c.txt" not in out and "--- a/d.txt" not in out
    assert "[... diff truncated: " in out
    cap = MAX_DIFF_CHARS
    assert out.endswith(f"[... 2 more changed files not shown, from c.txt on: diffs are capped "
                        f"at {cap} chars]")  # fmt: skip
    assert all((ws / f"{name}.txt").read_text().startswith("new 00000") for name in "abcd")


def test_a_diff_cut_at_its_line_cap_leaves_the_next_files_shown(tools: Tools, ws: Path) -> None:
    (ws / "long.txt").write_text("old\n" * 500)
    (ws / "b.txt").write_text("old\n")
    edits = [EditItem(path=p, old_string="old", new_string="new", replace_all=True)
             for p in ("long.txt", "b.txt")]  # fmt: skip
    out = tools["workspace_multi_edit"](edits)
    assert "[... diff truncated: 603 more lines, from line 1 of long.txt]" in out
    assert out.endswith("--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-old\n+new")


@pytest.fixture
def diffed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of lines handed to difflib (both sides) for each diff it made."""
    sizes: list[int] = []
    real = difflib.unified_diff

    def counting(a: Sequence[str], b: Sequence[str], *args: Any, **kwargs: Any) -> Iterator[str]:
        sizes.append(len(a) + len(b))
        return real(a, b, *args, **kwargs)

    monkeypatch.setattr(difflib, "unified_diff", counting)
    return sizes


def _marked(path: Path) -> None:
    """200,000 distinct lines, 200 of them (one in 1,000, from the first) with a MARK."""
    lines = [f"L{i:07d}\n" for i in range(200_000)]
    for j in range(200):
        lines[j * 1000] = f"MARK {j}\n"
    path.write_text("".join(lines))


@pytest.mark.parametrize("how", ["replace-all", "multi-edit"])
def test_diff_of_places_spread_over_a_large_file_sees_only_the_places(
    tools: Tools, ws: Path, diffed: list[int], how: str
) -> None:
    """Attack: replace_all of a word on 200 lines spread over a file of 2,000,000 lines: the
    answer's diff handed difflib every line between the first and the last change, 165 s and
    +684 MiB holding the workspace lock (a 5-byte write of another agent waited 184 s); a
    multi-edit of 100 such places took 79 s."""
    _marked(ws / "big.txt")
    if how == "replace-all":
        out = tools["workspace_edit"]("big.txt", "MARK", "DONE", replace_all=True)
    else:
        edits = [EditItem(path="big.txt", old_string=f"MARK {j}\n", new_string=f"DONE {j}\n")
                 for j in range(200)]  # fmt: skip
        out = tools["workspace_multi_edit"](edits)
    shown = out.splitlines()
    assert shown[:8] == [
        "--- a/big.txt", "+++ b/big.txt", "@@ -1,4 +1,4 @@", "-MARK 0", "+DONE 0",
        " L0000001", " L0000002", " L0000003",
    ]  # fmt: skip
    assert shown[8:12] == ["@@ -998,7 +998,7 @@", " L0000997", " L0000998", " L0000999"]
    assert shown[-1] == "[... diff truncated: 1399 more lines, from line 44001 of big.txt]"
    assert sum(diffed) < 20_000  # before: 400,000 (the span between the first and last MARK)


def test_diff_of_a_place_past_the_difflib_bound_is_written_out(
    tools: Tools, ws: Path, diffed: list[int]
) -> None:
    """Attack: replace_all of a word on every line: the place changed is the whole file, and
    difflib saw all of it twice (time growing faster than the lines: 25 s for 10,000 lines a
    side of few distinct lines); it is now its removed lines then its added lines, as difflib
    showed them."""
    (ws / "f.txt").write_text("old\n" * MAX_MATCHES)
    out = tools["workspace_edit"]("f.txt", "old", "new", replace_all=True)
    shown = out.splitlines()
    assert shown[:4] == ["--- a/f.txt", "+++ b/f.txt", "@@ -1,10000 +1,10000 @@", "-old"]
    assert shown[-2:] == ["-old", "[... diff truncated: 19603 more lines, from line 1 of f.txt]"]
    assert sum(diffed) <= MAX_DIFF_WORK  # before: 20,000
    assert (ws / "f.txt").read_text() == "new\n" * MAX_MATCHES


@pytest.mark.parametrize(
    "edits",
    [
        [("L05", "X\nY"), ("Y", "Z"), ("L25", "W")],  # the second edit changes the first's text
        [("L05\nL06", "A"), ("A\nL07", "B\nC\n")],  # and takes a line more
        [("L10", "M"), ("L17", "N"), ("L03", "")],  # out of order, seven lines apart
        [("L10", "M"), ("L16", "N"), ("M\nL11", "M")],  # six lines apart: one hunk
        [("L00\n", ""), ("L29", "end")],  # the first and last lines
    ],
)
def test_multi_edit_diff_is_difflibs_diff_of_the_whole_file(
    tools: Tools, ws: Path, edits: list[tuple[str, str]]
) -> None:
    """The places of several edits of one file, composed, give the diff difflib gives for the
    whole file."""
    before = "".join(f"L{i:02d}\n" for i in range(30))
    (ws / "f.txt").write_text(before)
    items = [EditItem(path="f.txt", old_string=o, new_string=n) for o, n in edits]
    out = tools["workspace_multi_edit"](items)
    after = (ws / "f.txt").read_text()
    whole = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), "a/f.txt", "b/f.txt"
    )
    assert out == "".join(whole).removesuffix("\n")
