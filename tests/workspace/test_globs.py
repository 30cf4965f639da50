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
