"""The BM25F keyword index shared by the planning and graph cards."""

from __future__ import annotations

import pytest

from toolcards.tools._common.keyword_index import KeywordIndex, query_terms, stem, tokens

DOCS = [
    ("a", "Payment gateway", "Handles card payments and refunds"),
    ("b", "Search service", "Indexes product catalog for shoppers"),
    ("c", "svc_payments_v2", "Second generation of the payments service"),
]


@pytest.fixture
def index() -> KeywordIndex:
    idx = KeywordIndex(("title", "body"), weights=(2.0, 1.0))
    for doc_id, title, body in DOCS:
        idx.upsert(doc_id, title, body)
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
def test_query_syntax_characters_never_raise(index: KeywordIndex, query: str) -> None:
    hits = index.search(query)
    assert isinstance(hits, list)


def test_operator_words_are_searched_as_words(index: KeywordIndex) -> None:
    index.upsert("d", "Near field", "NEAR misses happen")
    assert index.search("NEAR(")[0][0] == "d"


def test_query_terms_drop_stopwords_and_stem() -> None:
    assert query_terms("what is the payment flow") == ["payment", "flow"]
    assert query_terms("the") == []


@pytest.mark.parametrize(
    ("word", "root"),
    [
        ("shoppers", "shopper"),
        ("queries", "query"),
        ("boxes", "box"),
        ("running", "run"),
        ("indexed", "index"),
        ("status", "status"),
        ("class", "class"),
        ("2024s", "2024"),
    ],
)
def test_light_stemmer(word: str, root: str) -> None:
    assert stem(word) == root


def test_accents_are_folded(index: KeywordIndex) -> None:
    index.upsert("d", "Café résumé", "")
    assert index.search("cafe resume")[0][0] == "d"


def test_loop_scoring_ranks_like_numpy(index: KeywordIndex) -> None:
    plain = KeywordIndex(("title", "body"), weights=(2.0, 1.0))
    plain._np = None
    for doc_id, title, body in DOCS:
        plain.upsert(doc_id, title, body)
    for query in ("payments", "card refunds", "svc_payments_v2 catalog"):
        fast, slow = index.search(query), plain.search(query)
        assert [d for d, _ in fast] == [d for d, _ in slow]
        assert [round(s, 9) for _, s in fast] == [round(s, 9) for _, s in slow]


def test_loop_scoring_honours_allowed(index: KeywordIndex) -> None:
    plain = KeywordIndex(("title", "body"))
    plain._np = None
    for doc_id, title, body in DOCS:
        plain.upsert(doc_id, title, body)
    assert [d for d, _ in plain.search("payments", allowed={"c"})] == ["c"]


def test_removed_slots_are_reused(index: KeywordIndex) -> None:
    index.remove("a")
    index.upsert("z", "Zebra crossing", "")
    assert index.search("zebra")[0][0] == "z"
    assert index.search("refunds") == []


def test_clear_empties_the_index(index: KeywordIndex) -> None:
    index.clear()
    assert len(index) == 0 and index.search("payments") == []


def test_wrong_number_of_values_is_rejected(index: KeywordIndex) -> None:
    with pytest.raises(ValueError):
        index.upsert("x", "only one")


def _corpus(index: KeywordIndex, size: int, seed: int) -> None:
    import random

    rng = random.Random(seed)
    words = [
        "ledger",
        "payout",
        "fraud",
        "search",
        "index",
        "image",
        "resize",
        "notify",
        "tax",
        "shipping",
        "quote",
        "token",
    ]
    for i in range(size):
        index.upsert(f"d{i}", " ".join(rng.choices(words, k=rng.randint(1, 3))), "")


def test_a_large_index_ranks_like_the_plain_loop_with_ties_by_id() -> None:
    fast, slow = KeywordIndex(("text", "x")), KeywordIndex(("text", "x"))
    slow._np = None
    _corpus(fast, 20_000, 1)
    _corpus(slow, 20_000, 1)
    for query in ("fraud", "ledger payout", "tax shipping quote token", "image"):
        for k in (1, 10, 30):
            got, want = fast.search(query, k), slow.search(query, k)
            assert [d for d, _ in got] == [d for d, _ in want]
            assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in want]


def test_term_weights_follow_changes_in_document_lengths() -> None:
    index, fresh = KeywordIndex(("text", "x")), KeywordIndex(("text", "x"))
    _corpus(index, 5_000, 2)
    _corpus(fresh, 5_000, 2)
    first = index.search("ledger", 5)
    for target in (index, fresh):  # the average length grows; "ledger" postings do not change
        for i in range(3_000):
            target.upsert(f"long{i}", "filler " * 40, "")
    assert index.search("ledger", 5) == fresh.search("ledger", 5) != first


def test_text_that_grows_when_folded_gives_no_more_words_than_plain_text_of_its_length() -> None:
    """U+FDFA folds to 18 characters (four words): 8,000 of them gave 24,000 words to index,
    where a graph's and a board's caps count 8,000 characters (a restart missed its start)."""
    grown = tokens("\ufdfa" * 8000)
    assert 0 < len(grown) <= 4001
    assert len(tokens("b " * 4000)) == 4000


def test_text_that_folds_longer_still_has_every_word_indexed() -> None:
    korean = " ".join(f"한국어{i}" for i in range(200))  # each syllable folds to 2-3 letters
    assert len(tokens(korean)) == 200
    ligatures = " ".join(["\ufb01nal"] * 300)  # ﬁ folds to f, i
    assert tokens(ligatures) == ["final"] * 300


def test_a_folded_document_is_found_by_its_plain_spelling(index: KeywordIndex) -> None:
    index.upsert("k", "한국어 문서", "\ufb01nal draft")
    assert index.search("final")[0][0] == "k"
    assert index.search("한국어")[0][0] == "k"
