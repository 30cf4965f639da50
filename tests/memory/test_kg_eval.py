"""The knowledge-graph retrieval eval: data shape, and hybrid beating both single modes."""

from __future__ import annotations

import importlib.util

import pytest

from .eval import kg_eval, make_kg_eval


def test_eval_data_is_large_enough_and_varied() -> None:
    data = kg_eval.load()
    assert len(data["entities"]) >= 200
    assert len(data["queries"]) >= 50
    assert {q["kind"] for q in data["queries"]} == {"identifier", "paraphrase", "mixed"}


def test_committed_eval_data_matches_its_generator() -> None:
    assert make_kg_eval.build() == kg_eval.load()


def test_keyword_search_finds_exact_identifiers() -> None:
    data = kg_eval.load()
    report = kg_eval.evaluate(data, lambda text, k: [])
    assert report["keyword"]["identifier"] >= 0.9
    assert report["keyword"]["paraphrase"] < report["keyword"]["identifier"]


@pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None, reason="needs the vector extra"
)
def test_hybrid_beats_keyword_and_vector_with_the_local_model() -> None:
    data = kg_eval.load()
    defaults = kg_eval.SearchGraph()
    with kg_eval.team_vector_query(data) as vector_query:
        report = kg_eval.evaluate(
            data,
            vector_query,
            rrf_k=defaults.rrf_k,
            weights=(defaults.keyword_weight, defaults.vector_weight),
            threshold=defaults.score_threshold,
        )
    hybrid = report["hybrid"]["all"]
    assert hybrid > report["keyword"]["all"]
    assert hybrid > report["vector"]["all"]
