"""The edit corpus: realistic model edit requests with expected outcomes; no wrong apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import load_cases, run_corpus


def test_corpus_has_at_least_a_hundred_requests() -> None:
    assert len(load_cases()) >= 100


def test_corpus_covers_drift_and_refusal_categories() -> None:
    categories = {case["category"] for case in load_cases()}
    for needed in (
        "trailing whitespace drift",
        "indentation dropped",
        "tabs sent as spaces",
        "CRLF in request",
        "over-escaped quotes",
        "typographic quotes",
        "ambiguous anchor",
        "stale file",
        "text not in file",
    ):
        assert needed in categories


def test_corpus_outcomes_match_and_nothing_is_applied_wrongly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path))
    report = run_corpus(tmp_path)
    with capsys.disabled():
        print("\n" + report.render())
    assert report.wrong_applies == []
    assert report.missed == []
    assert report.applied_correctly + report.refused_correctly == len(load_cases())
