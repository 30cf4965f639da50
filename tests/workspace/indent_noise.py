"""Edits taken from the pinned real commits (``data/patch_corpus``), sent with the indentation
noise a model makes, through the edit cascade.

Each hunk of each commit gives edits: the whole hunk, and every run of changed lines with one
line of context on each side and with none. An edit's intended result is the file before the
commit with exactly those lines replaced. A noise model re-indents both ``old_string`` and
``new_string`` (every non-blank line the same way); the edit must then give the intended result
or be refused. An edit whose noisy ``old_string`` names other whole lines of the file verbatim
(trailing whitespace aside) is a different, valid request and is not counted.

Usage: ``python tests/workspace/indent_noise.py`` prints the counts per noise model.
"""

from __future__ import annotations

import re
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "data" / "patch_corpus"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_LEAD = re.compile(r"^[ \t]*")


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (whole lines) starting at 0-based line ``start`` of ``text`` by ``new``."""

    name: str
    text: str
    start: int
    old: list[str]
    new: list[str]

    def intended(self) -> str:
        lines = self.text.split("\n")
        at = self.start
        assert lines[at : at + len(self.old)] == self.old, self.name
        return "\n".join(lines[:at] + self.new + lines[at + len(self.old) :])


def _befores(archive: tarfile.TarFile) -> dict[str, str]:
    out: dict[str, str] = {}
    for member in archive.getmembers():
        if member.name.startswith("before/") and member.isfile():
            data = archive.extractfile(member)
            assert data is not None
            out[member.name.removeprefix("before/")] = data.read().decode("utf-8")
    return out


def _hunks(diff: str) -> Iterator[tuple[str, int, list[str]]]:
    """(path before, 0-based first old line, body lines) of every hunk of a git diff."""
    path = ""
    lines = diff.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- "):
            path = line[6:] if line.startswith("--- a/") else ""
        found = _HUNK.match(line)
        if found is None:
            i += 1
            continue
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
            body.append(lines[i])
            i += 1
        if path and not any(b.startswith("\\") for b in body):
            yield path, max(0, int(found.group(1)) - 1), body


def _pieces(body: list[str]) -> Iterator[tuple[int, list[str]]]:
    """(offset in the hunk's old lines, body) of the whole hunk and of each run of changes with
    one line of context on each side and with none."""
    yield 0, body
    olds = [0]
    for b in body:
        olds.append(olds[-1] + (b[0] != "+"))
    i = 0
    while i < len(body):
        if body[i][0] == " ":
            i += 1
            continue
        j = i
        while j < len(body) and body[j][0] != " ":
            j += 1
        yield olds[i], body[i:j]
        lo, hi = max(0, i - 1), min(len(body), j + 1)
        yield olds[lo], body[lo:hi]
        i = j


def corpus_edits() -> list[Edit]:
    edits: list[Edit] = []
    seen: set[tuple[str, int, int, int]] = set()
    for case in sorted(CORPUS.glob("*.tar.gz")):
        with tarfile.open(case) as archive:
            befores = _befores(archive)
            member = archive.extractfile("patch.diff")
            assert member is not None
            diff = member.read().decode("utf-8")
        for path, first, body in _hunks(diff):
            text = befores.get(path)
            if text is None:
                continue
            for offset, piece in _pieces(body):
                old = [b[1:] for b in piece if b[0] != "+"]
                new = [b[1:] for b in piece if b[0] != "-"]
                key = (path, first + offset, len(old), len(new))
                if not any(o.strip() for o in old) or old == new or key in seen:
                    continue
                seen.add(key)
                name = f"{case.name[:12]}:{path}:{first + offset + 1}+{len(old)}"
                edits.append(Edit(name, text, first + offset, old, new))
    return edits


def _map_lines(lines: list[str], fn: Callable[[str], str]) -> list[str]:
    return [fn(ln) if ln.strip() else ln for ln in lines]


def _to_tabs(line: str) -> str:
    lead = _LEAD.match(line)
    assert lead is not None
    width = len(lead.group().expandtabs(4))
    return "\t" * (width // 4) + " " * (width % 4) + line[lead.end() :]


Noised = tuple[str, str, str, str] | None
"""(file text, old_string, new_string, intended result), or None where the model does not
apply."""


def _request(old: list[str], new: list[str]) -> tuple[str, str]:
    return "".join(o + "\n" for o in old), "".join(n + "\n" for n in new)


def _dedented(by: int) -> Callable[[Edit], Noised]:
    pad = " " * by

    def noise(edit: Edit) -> Noised:
        every = [ln for ln in edit.old + edit.new if ln.strip()]
        if not all(ln.startswith(pad) for ln in every):
            return None
        old = _map_lines(edit.old, lambda s: s[by:])
        new = _map_lines(edit.new, lambda s: s[by:])
        return edit.text, *_request(old, new), edit.intended()

    return noise


def _indented(by: int) -> Callable[[Edit], Noised]:
    pad = " " * by

    def noise(edit: Edit) -> Noised:
        old, new = _map_lines(edit.old, pad.__add__), _map_lines(edit.new, pad.__add__)
        return edit.text, *_request(old, new), edit.intended()

    return noise


def _indented_lines(edit: Edit) -> bool:
    return any(ln.startswith("    ") for ln in edit.old if ln.strip())


def _tabs_sent(edit: Edit) -> Noised:
    """The file is indented with spaces; the model sends tabs."""
    if not _indented_lines(edit):
        return None
    old, new = _request(_map_lines(edit.old, _to_tabs), _map_lines(edit.new, _to_tabs))
    return edit.text, old, new, edit.intended()


def _spaces_sent(edit: Edit) -> Noised:
    """The file is indented with tabs; the model sends spaces."""
    if not _indented_lines(edit):
        return None

    def tabbed(text: str) -> str:
        return "\n".join(_map_lines(text.split("\n"), _to_tabs))

    old, new = _request(edit.old, edit.new)
    return tabbed(edit.text), old, new, tabbed(edit.intended())


def _in_tab_file(shift: Callable[[Edit], Noised]) -> Callable[[Edit], Noised]:
    """The file is indented with tabs; the model sends spaces, re-indented by ``shift``."""

    def noise(edit: Edit) -> Noised:
        shifted, spaced = shift(edit), _spaces_sent(edit)
        if shifted is None or spaced is None:
            return None
        return spaced[0], shifted[1], shifted[2], spaced[3]

    return noise


NOISE: dict[str, Callable[[Edit], Noised]] = {
    "none": lambda e: (e.text, *_request(e.old, e.new), e.intended()),
    "dedented by 4": _dedented(4),
    "dedented by 8": _dedented(8),
    "indented by 4": _indented(4),
    "indented by 8": _indented(8),
    "tabs sent for spaces": _tabs_sent,
    "spaces sent for tabs": _spaces_sent,
    "dedented by 4, spaces sent for tabs": _in_tab_file(_dedented(4)),
    "indented by 4, spaces sent for tabs": _in_tab_file(_indented(4)),
}


def names_other_lines(text: str, old: str, start: int) -> bool:
    """True when ``old``'s lines equal (trailing whitespace aside) whole lines of ``text`` that
    do not start at line ``start``."""
    want = [ln.rstrip() for ln in old.split("\n")[:-1]]
    lines = [ln.rstrip() for ln in text.split("\n")]
    return any(
        lines[i : i + len(want)] == want for i in range(len(lines) - len(want) + 1) if i != start
    )


@dataclass
class Tally:
    applied: int = 0
    refused: int = 0
    other_request: int = 0
    wrong: list[str] = field(default_factory=list)


def run_noise(model: str, edits: list[Edit]) -> Tally:
    """Every edit sent with the noise ``model`` through the cascade."""
    from toolcards.core.errors import RetriableError
    from toolcards.tools.workspace.edits import apply_edit

    tally = Tally()
    for edit in edits:
        noised = NOISE[model](edit)
        if noised is None:
            continue
        text, old, new, want = noised
        if names_other_lines(text, old, edit.start):
            tally.other_request += 1
            continue
        try:
            got = apply_edit(text, old, new).text
        except RetriableError:
            tally.refused += 1
            continue
        if got == want:
            tally.applied += 1
        else:
            tally.wrong.append(edit.name)
    return tally


def render(tallies: dict[str, Tally], edits: int) -> str:
    rows = [f"indentation noise over {edits} corpus edits:"]
    for model, t in tallies.items():
        rows.append(
            f"  {model}: applied {t.applied}, refused {t.refused}, wrong {len(t.wrong)}, "
            f"naming other lines {t.other_request}"
        )
        rows += [f"    WRONG {name}" for name in t.wrong[:20]]
    return "\n".join(rows)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    every = corpus_edits()
    print(render({model: run_noise(model, every) for model in NOISE}, len(every)))
