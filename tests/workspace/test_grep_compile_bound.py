"""workspace_grep: a short pattern whose counted repeats compile to millions of steps is a retry
before anything compiles it, on every engine; ripgrep checks its own patterns with capped
sizes, and Python compiles only what its engine runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.grep import GrepOptions, RgPatternError

from .conftest import grep_tool

BOMB = "(?:a{1000}){6000}"
"""20 characters; the ``regex`` package compiled it for 4-11 s holding the interpreter lock."""
BOUND = pytest.mark.timeout(3 * GrepOptions().timeout_s)
"""A generous bound a compile of the bomb would pass on a loaded machine; the test does not
time anything, it only stops a hang."""


@pytest.fixture
def text(ws: Path) -> Path:
    (ws / "a.txt").write_text("a" * 2000 + "\nxxyy\n" + "é" * 120 + "\n", encoding="utf-8")
    return ws


@BOUND
@pytest.mark.parametrize("engine", ["python", "rg", "auto"])
def test_repeat_bomb_pattern_is_a_retry_naming_the_size(text: Path, engine: str) -> None:
    with pytest.raises(RetriableError, match="too large") as caught:
        grep_tool(engine)(BOMB)
    assert "\n" not in str(caught.value)


@BOUND
@pytest.mark.parametrize("engine", ["python", "rg", "auto"])
def test_counted_repeats_within_the_caps_still_search(text: Path, engine: str) -> None:
    assert grep_tool(engine)(r"x{2}y{1,3}") == "a.txt:2:xxyy"


@BOUND
def test_pattern_over_ripgreps_cap_is_answered_by_the_python_engine_in_auto(text: Path) -> None:
    """``\\w{100}`` (Unicode classes) is over ripgrep's compiled-size cap but small for Python:
    ripgrep says so at once; "auto" then searches with the bounded Python engine."""
    assert grep_tool("auto")(r"\w{100}") == grep_tool("python")(r"\w{100}")
    assert grep_tool("python")(r"\w{100}").startswith("a.txt:1:aaa")
    with pytest.raises(RgPatternError, match="too large for ripgrep"):
        grep_tool("rg")(r"\w{100}")


@BOUND
@pytest.mark.parametrize(
    "pattern",
    [
        "(?x)(?:a{1000}) {6000}",  # verbose mode: the count repeats the group, not a space
        "(?x)(?:a{1000}){ 6000 }",  # verbose mode: spaces inside the count
        "(?:a{1000}(?#[)){6000}",  # a comment holding a bracket
        "(?V1)(?:a{1000}[[b](]){6000}",  # a version-1 nested set holding a parenthesis
    ],
)
def test_a_repeat_bomb_the_syntax_hides_is_a_retry(text: Path, pattern: str) -> None:
    with pytest.raises(RetriableError, match="too large"):
        grep_tool("python")(pattern)


@BOUND
@pytest.mark.parametrize("pattern", [r"[[:alpha:]]{3}\d{4}", r"\p{L}{3}", r"(?x) x{2} y"])
def test_sets_properties_and_verbose_patterns_with_small_counts_still_search(
    text: Path, pattern: str
) -> None:
    assert "too large" not in grep_tool("python")(pattern)
