"""workspace_edit when old_string carries another indentation than the file: the replacement is
shifted as a whole or the edit is refused, never a file whose later lines are shifted
differently from the first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.edits import apply_edit

from .conftest import Tools
from .indent_noise import NOISE, corpus_edits, run_noise

WAITER = (
    "class Waiter:\n"
    "    def start(self):\n"
    "        self.thread.start()\n"
    "        self.ready_event.wait(5)\n"
    "        return self\n"
)
HOLDER = "class Holder:\n    def clear(self):\n        self.content = None\n        self.size = 0\n"


def test_a_line_sent_one_level_short_is_reindented_as_a_whole(tools: Tools, ws: Path) -> None:
    (ws / "w.py").write_text(WAITER)
    tools["workspace_edit"](
        "w.py",
        "    self.ready_event.wait(5)\n",
        "    if not self.ready_event.wait(5):\n        raise RuntimeError('timeout')\n",
    )
    result = (ws / "w.py").read_text()
    ast.parse(result)
    assert result == WAITER.replace(
        "        self.ready_event.wait(5)\n",
        "        if not self.ready_event.wait(5):\n            raise RuntimeError('timeout')\n",
    )


def test_deleting_a_line_sent_one_level_short_removes_the_whole_line(
    tools: Tools, ws: Path
) -> None:
    (ws / "h.py").write_text(HOLDER)
    tools["workspace_edit"]("h.py", "    self.content = None\n", "")
    assert (ws / "h.py").read_text() == HOLDER.replace("        self.content = None\n", "")


def test_a_line_sent_one_level_deep_is_not_matched_inside_a_deeper_line(
    tools: Tools, ws: Path
) -> None:
    text = "def f():\n    go()\n    if x:\n        if y:\n            go()\n"
    (ws / "f.py").write_text(text)
    with pytest.raises(RetriableError, match="2 places"):
        tools["workspace_edit"]("f.py", "        go()\n", "        go()\n        stop()\n")
    assert (ws / "f.py").read_text() == text


def test_a_code_start_line_whose_replacement_adds_lines_is_refused(tools: Tools, ws: Path) -> None:
    text = "def f():\n    if ready:\n        go()\n"
    (ws / "f.py").write_text(text)
    with pytest.raises(RetriableError, match="whole lines"):
        tools["workspace_edit"]("f.py", "if ready:", "if ready:\n    log()")
    assert (ws / "f.py").read_text() == text


def test_replace_all_shifts_each_deeper_occurrence_as_a_whole(tools: Tools, ws: Path) -> None:
    (ws / "r.py").write_text("def f():\n    x = 1\n    if y:\n        x = 1\n")
    tools["workspace_edit"]("r.py", "    x = 1\n", "    x = 1\n    z = 2\n", True)
    assert (ws / "r.py").read_text() == (
        "def f():\n    x = 1\n    z = 2\n    if y:\n        x = 1\n        z = 2\n"
    )


def test_a_block_whose_relative_indentation_differs_is_not_an_occurrence(
    tools: Tools, ws: Path
) -> None:
    text = "def f():\n    a()\n    if y:\n        b()\n    c()\n"
    (ws / "b.py").write_text(text)
    with pytest.raises(RetriableError, match="not found"):
        tools["workspace_edit"]("b.py", "    b()\n    c()\n", "    b()\n    d()\n")
    assert (ws / "b.py").read_text() == text


def test_part_of_a_line_sent_one_level_short_is_shifted(tools: Tools, ws: Path) -> None:
    (ws / "w.py").write_text(WAITER)
    tools["workspace_edit"]("w.py", "    self.ready_event.wait(", "    self.ready.wait(")
    assert (ws / "w.py").read_text() == WAITER.replace("ready_event.wait(", "ready.wait(")


@pytest.mark.parametrize(
    ("text", "old"),
    [("        x\n", "  "), ("\t\t\tx\n", "\t"), ("\t\t  x\n", "\t")],
)
def test_replace_all_of_indentation_replaces_each_occurrence_once(text: str, old: str) -> None:
    result = apply_edit(text, old, "y", replace_all=True)
    assert (result.text, result.count) == (text.replace(old, "y"), text.count(old))


def test_a_shifted_match_ending_in_the_indentation_of_the_next_is_refused() -> None:
    text = "   x\n   x\n  "
    with pytest.raises(RetriableError, match="overlap"):
        apply_edit(text, "  x\n  ", "  y\n  ", replace_all=True)


EDITS = corpus_edits()


def test_the_noise_corpus_holds_hundreds_of_real_edits() -> None:
    assert len(EDITS) >= 500


@pytest.mark.parametrize("model", sorted(NOISE))
def test_indentation_noise_on_real_edits_gives_the_intended_file_or_a_refusal(
    model: str,
) -> None:
    tally = run_noise(model, EDITS)
    assert tally.wrong == []
    assert tally.applied >= 70
