"""The FTS5 keyword index shared by the planning and graph cards."""

from __future__ import annotations

import pytest

from toolcards.tools._common.keyword_index import KeywordIndex, query_terms


@pytest.fixture
def index() -> KeywordIndex:
    idx = KeywordIndex(("title", "body"), weights=(2.0, 1.0))
    idx.upsert("a", "Payment gateway", "Handles card payments and refunds")
    idx.upsert("b", "Search service", "Indexes product catalog for shoppers")
    idx.upsert("c", "svc_payments_v2", "Second generation of the payments service")
    return idx


def test_matching_document_ranks_first(index: KeywordIndex) -> None:
    hits = index.search("refunds for card payments")
    assert hits[0][0] == "a"


def test_scores_decrease_down_the_ranking(index: KeywordIndex) -> None:
    scores = [score for _, score in index.search("payments")]
    assert scores == sorted(scores, reverse=True)


def test_stemming_matches_plural_forms(index: KeywordIndex) -> None:
    assert [doc for doc, _ in index.search("shopper")] == ["b"]


def test_identifier_with_underscores_matches_as_phrase(index: KeywordIndex) -> None:
    assert index.search("svc_payments_v2")[0][0] == "c"


def test_upsert_replaces_previous_text(index: KeywordIndex) -> None:
    index.upsert("b", "Search service", "Now about weather forecasts")
    assert index.search("catalog") == []
    assert index.search("weather")[0][0] == "b"
    assert len(index) == 3


def test_remove_drops_document(index: KeywordIndex) -> None:
    index.remove("a")
    index.remove("missing")
    assert "a" not in index
    assert all(doc != "a" for doc, _ in index.search("payments"))


def test_allowed_restricts_hits(index: KeywordIndex) -> None:
    hits = index.search("payments", allowed={"c"})
    assert [doc for doc, _ in hits] == ["c"]


@pytest.mark.parametrize(
    "query",
    ['"', 'pay"ments', "NEAR(payments gateway)", "pay*", "title:payments", "AND OR NOT", "^(", ""],
)
def test_fts5_syntax_in_queries_never_raises(index: KeywordIndex, query: str) -> None:
    hits = index.search(query)
    assert isinstance(hits, list)


def test_fts5_operators_are_searched_as_words(index: KeywordIndex) -> None:
    index.upsert("d", "Near field", "NEAR misses happen")
    assert index.search("NEAR(")[0][0] == "d"


def test_query_terms_drop_stopwords_but_keep_stopword_only_queries() -> None:
    assert query_terms("what is the payment flow") == ["payment", "flow"]
    assert query_terms("the") == ["the"]


def test_wrong_number_of_values_is_rejected(index: KeywordIndex) -> None:
    with pytest.raises(ValueError):
        index.upsert("x", "only one")
