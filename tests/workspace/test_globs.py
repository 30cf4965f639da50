"""Glob patterns shared by workspace_glob and the Python grep's include filter."""

from __future__ import annotations

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.globs import expand_braces, glob_matches


def test_braces_expand_including_nested() -> None:
    assert expand_braces("a.{py,{md,txt}}") == ["a.py", "a.md", "a.txt"]


def test_too_many_alternatives_are_refused() -> None:
    with pytest.raises(RetriableError, match="too many"):
        expand_braces("{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b,c,d}")


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("*.py", "src/deep/a.py", True),
        ("*.py", "src/a.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("src/**/*.py", "src/a.py", True),
        ("**/test_?.py", "t/test_a.py", True),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "b.txt", False),
        ("*.{ts,tsx}", "ui/app.tsx", True),
    ],
)
def test_glob_semantics(pattern: str, rel: str, expected: bool) -> None:
    assert glob_matches(pattern, rel) is expected


@pytest.mark.timeout(30)  # a backtracking regex took 18 s on 7 pairs, each pair about 4x more
@pytest.mark.parametrize(
    ("pattern", "rel"),
    [
        ("*a" * 12 + "*b", "a" * 60),
        ("**/" * 12 + "*.py", "/".join(["d"] * 40) + "/x.pyc"),
        ("x/" + "*a" * 12 + "*b", "x/" + "a" * 60),
    ],
)
def test_stars_that_split_a_name_many_ways_are_matched_in_linear_work(
    pattern: str, rel: str
) -> None:
    assert glob_matches(pattern, rel) is False


def test_a_pattern_over_the_step_budget_for_a_path_is_refused() -> None:
    with pytest.raises(RetriableError, match="steps to match one path"):
        glob_matches("?*" + "a" * 200 + "b", "a" * 255)


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("src/**", "src/a/b.py", True),
        ("src/**", "src", False),  # something inside src
        ("**", "a/b", True),
        ("a**b", "a/x/b", False),  # ** inside a name is *, as in gitignore
        ("a**b", "axxb", True),
        ("q/b[!a]x", "q/b/x", False),  # a class never matches the separator
    ],
)
def test_double_stars_and_classes_follow_gitignore(pattern: str, rel: str, expected: bool) -> None:
    assert glob_matches(pattern, rel) is expected
