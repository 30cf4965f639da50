"""workspace_patch on files that are not quite what the diff expects: a diff sent a second
time, a file that moved on since the diff was made (lines moved, context lines edited)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError

from .conftest import Tools

APPEND = "--- a/f.txt\n+++ b/f.txt\n@@ -2,3 +2,4 @@\n b\n c\n d\n+e\n"
PREPEND = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,4 @@\n+# title\n a\n b\n c\n"
CHANGE = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"


@pytest.fixture
def abcd(ws: Path) -> Path:
    (ws / "f.txt").write_text("a\nb\nc\nd\n")
    return ws / "f.txt"


@pytest.mark.parametrize(
    ("patch", "once"),
    [
        (APPEND, "a\nb\nc\nd\ne\n"),
        (PREPEND, "# title\na\nb\nc\nd\n"),
        (CHANGE, "a\nB\nc\nd\n"),
    ],
    ids=["lines added at the end", "lines added at the start", "a line changed"],
)
def test_a_diff_sent_twice_is_applied_once(tools: Tools, abcd: Path, patch: str, once: str) -> None:
    tools["workspace_patch"](patch)
    assert abcd.read_text() == once
    with pytest.raises(RetriableError, match="already applied"):
        tools["workspace_patch"](patch)
    assert abcd.read_text() == once


def test_a_hunk_with_no_context_after_it_belongs_at_the_end(tools: Tools, ws: Path) -> None:
    """Its leading context also stands earlier in the file: the hunk still goes at the end
    (as ``git apply`` places it), not to the first place its context matches."""
    (ws / "f.txt").write_text("b\nc\nd\nx\nb\nc\nd\n")
    tools["workspace_patch"](APPEND)  # the header names line 2, the file has two places
    assert (ws / "f.txt").read_text() == "b\nc\nd\nx\nb\nc\nd\ne\n"


def test_a_hunk_without_trailing_context_in_the_middle_is_applied_once(
    tools: Tools, ws: Path
) -> None:
    """A hand-written hunk with no context after its change, away from the file's end: it
    applies where its context is, and sent again it is refused (its result is already there)."""
    (ws / "f.txt").write_text("a\nb\nc\nd\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,3 @@\n a\n b\n+b2\n"
    tools["workspace_patch"](patch)
    assert (ws / "f.txt").read_text() == "a\nb\nb2\nc\nd\n"
    with pytest.raises(RetriableError, match="already applied"):
        tools["workspace_patch"](patch)
    assert (ws / "f.txt").read_text() == "a\nb\nb2\nc\nd\n"


def test_a_diff_partly_applied_before_changes_no_file(tools: Tools, ws: Path) -> None:
    """Its second file already has the change: refused whole, the first file untouched."""
    (ws / "one.txt").write_text("x\ny\n")
    (ws / "f.txt").write_text("a\nB\nc\nd\n")
    patch = "--- a/one.txt\n+++ b/one.txt\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n" + CHANGE
    with pytest.raises(RetriableError, match="f.txt: hunk 1 is already applied"):
        tools["workspace_patch"](patch)
    assert (ws / "one.txt").read_text() == "x\ny\n"


def test_a_deletion_sent_twice_is_applied_once(tools: Tools, abcd: Path) -> None:
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,3 @@\n a\n b\n-c\n d\n"
    tools["workspace_patch"](patch)
    with pytest.raises(RetriableError, match="already applied"):
        tools["workspace_patch"](patch)
    assert abcd.read_text() == "a\nb\nd\n"


def test_a_last_blank_context_line_of_the_diff_is_kept(tools: Tools, ws: Path) -> None:
    """The diff's last line is a blank context line (`" "`): it is part of the hunk (which
    then matches only before the blank line), not trailing whitespace of the message."""
    (ws / "f.txt").write_text("a\nb\na\n\n")
    tools["workspace_patch"]("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,3 @@\n a\n+x\n \n")
    assert (ws / "f.txt").read_text() == "a\nb\na\nx\n\n"


# ---- a file that moved on ------------------------------------------------------------------


MODULE = """import os

def load(path):
    with open(path) as handle:
        data = handle.read()
    return data.strip()

def save(path, data):
    with open(path, "w") as handle:
        handle.write(data)
"""


def test_a_hunk_whose_context_was_edited_since_applies_and_says_which_lines_differ(
    tools: Tools, ws: Path
) -> None:
    """The removed line still stands as the diff has it; one context line was changed since
    the diff was made: applied, the file's context kept, and the result names that line."""
    (ws / "m.py").write_text(MODULE.replace("handle.read()", "handle.read(4096)"))
    patch = (
        "--- a/m.py\n+++ b/m.py\n@@ -3,4 +3,4 @@ import os\n def load(path):\n"
        "     with open(path) as handle:\n         data = handle.read()\n"
        "-    return data.strip()\n+    return data.strip().lower()\n"
    )
    out = tools["workspace_patch"](patch)
    assert (ws / "m.py").read_text() == MODULE.replace(
        "handle.read()", "handle.read(4096)"
    ).replace("data.strip()", "data.strip().lower()")
    assert "m.py: hunk 1 applied at line 6" in out
    assert "line 5 is '        data = handle.read(4096)', not '        data = handle.read()'" in out


def test_a_hunk_whose_removed_line_was_edited_since_is_refused(tools: Tools, ws: Path) -> None:
    before = MODULE.replace("data.strip()", "data.strip(' ')")
    (ws / "m.py").write_text(before)
    patch = (
        "--- a/m.py\n+++ b/m.py\n@@ -4,3 +4,3 @@\n     with open(path) as handle:\n"
        "         data = handle.read()\n-    return data.strip()\n"
        "+    return data.strip().lower()\n"
    )
    with pytest.raises(RetriableError, match="does not apply"):
        tools["workspace_patch"](patch)
    assert (ws / "m.py").read_text() == before


def test_an_insertion_whose_outer_context_moved_on_applies_between_its_neighbours(
    tools: Tools, ws: Path
) -> None:
    """Lines inserted between two lines that still stand side by side, while the context
    further out was changed: applied between those two lines."""
    (ws / "imports.py").write_text("import faulthandler\nimport os\nimport random\nimport sys\n")
    patch = (
        "--- a/imports.py\n+++ b/imports.py\n@@ -1,5 +1,6 @@\n import atexit\n"
        " import faulthandler\n+import gc\n import os\n import signal\n import sys\n"
    )
    out = tools["workspace_patch"](patch)
    assert (ws / "imports.py").read_text() == (
        "import faulthandler\nimport gc\nimport os\nimport random\nimport sys\n"
    )
    assert "hunk 1 applied at line 2, where 2 of its context lines differ" in out
    assert "'import atexit' would stand before the file's start" in out
    assert "line 3 is 'import random', not 'import signal'" in out


def test_an_exact_copy_far_away_does_not_win_over_an_edited_place_at_the_header_line(
    tools: Tools, ws: Path
) -> None:
    """The hunk's lines stand exactly in another copy 20 lines down, and at the header's line
    with a context line edited: which one is meant is unclear, so nothing is changed."""
    method = "    def update(self):\n        self.entry.set(value)\n        return self\n"
    before = "class A:\n" + method.replace("return self", "return None") + "\n" * 16
    before += "class B:\n" + method
    (ws / "q.py").write_text(before)
    patch = (
        "--- a/q.py\n+++ b/q.py\n@@ -2,3 +2,3 @@\n     def update(self):\n"
        "-        self.entry.set(value)\n+        self.entry = value\n         return self\n"
    )
    with pytest.raises(RetriableError, match="Which one is meant is unclear"):
        tools["workspace_patch"](patch)
    assert (ws / "q.py").read_text() == before


def test_an_insertion_with_no_context_line_left_goes_only_where_its_neighbours_are_unique(
    tools: Tools, ws: Path
) -> None:
    """Every context line differs: the two lines around the insertion are all that is left,
    and they stand in two places, so the nearer one is no better than a guess."""
    before = "x1\na\nb\ny1\n" + "z\n" * 10 + "x2\na\nb\ny2\n"
    (ws / "f.txt").write_text(before)
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,5 @@\n q\n a\n+new\n b\n r\n"
    with pytest.raises(RetriableError, match="several places"):
        tools["workspace_patch"](patch)
    assert (ws / "f.txt").read_text() == before
    (ws / "f.txt").write_text(before.replace("x2\na\nb", "x2\na\nc"))
    tools["workspace_patch"](patch)
    assert (ws / "f.txt").read_text().startswith("x1\na\nnew\nb\ny1\n")
