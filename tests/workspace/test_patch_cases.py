"""workspace_patch on pinned cases from CPython's history and this repository's commits
(``patch_cases.py``): never a wrong file and never a partial write, and in every category at
least as many diffs applied correctly as the better of ``git apply`` and GNU ``patch``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from .patch_cases import TOOLS, available, load_cases, render, run_tool

CATEGORIES = (
    "real diffs",
    "one-sided re-sent",
    "CRLF/mixed endings",
    "endings conversion",
    "no final newline",
    "Latin-1",
    "repeated context drift",
    "moved lines",
    "edited nearby context",
    "pinned commits",
)


def test_the_cases_cover_every_category() -> None:
    sizes = Counter(case.category for case in load_cases())
    assert set(sizes) == set(CATEGORIES)
    assert all(sizes[c] >= 10 for c in CATEGORIES), sizes
    assert sum(sizes.values()) >= 600


def test_the_cases_are_real_history_and_one_sided_resends_must_be_refused() -> None:
    cases = load_cases()
    assert all(c.source.startswith(("CPython 3.", "toolcards commit")) for c in cases)
    resent = [c for c in cases if c.category == "one-sided re-sent"]
    assert resent and all(c.after is None for c in resent)
    assert all(c.after is not None for c in cases if c not in resent)
    latin = [c for c in cases if c.category == "Latin-1"]
    assert any(b"iso-8859-1" in data for c in latin for data in c.before.values())


def test_no_case_is_patched_wrongly_or_partly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_tool("toolcards", load_cases(), tmp=tmp_path)
    with capsys.disabled():
        print("\n" + render([report], load_cases()))
    assert report.failures == []
    assert report.count("WRONG") == report.count("partial") == 0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_category_is_applied_at_least_as_well_as_by_git_apply_and_gnu_patch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    peers = [tool for tool in TOOLS[1:] if available(tool)]
    if not peers:
        pytest.skip("neither git nor GNU patch is installed")
    cases = load_cases()
    reports = [
        run_tool(tool, cases, tmp=tmp_path) for tool in TOOLS if tool == TOOLS[0] or tool in peers
    ]
    with capsys.disabled():
        print("\n" + render(reports, cases))
    ours, *others = reports
    behind = {
        category: (
            ours.count("correct", category),
            max(r.count("correct", category) for r in others),
        )
        for category in CATEGORIES
        if ours.count("correct", category) < max(r.count("correct", category) for r in others)
    }
    assert behind == {}
