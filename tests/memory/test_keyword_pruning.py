"""The keyword index's pruned top-k against an exhaustive scoring written out here: the same
documents, in the same order, with the same scores, on random corpora, through updates,
deletes, slot renumbering and a team's resume."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from toolcards import KnowledgeGraphTool
from toolcards.runtime import Team
from toolcards.tools._common import keyword_index
from toolcards.tools._common.keyword_index import KeywordIndex, query_terms, tokens

COLUMNS = ("name", "body")


@pytest.fixture(autouse=True)
def prune_as_far_as_it_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prune at any size, keep the top postings of terms apart from 64 postings on, and go on
    pruning whatever share of the postings is left to read: the corpora here are small enough
    to check quickly, and every query they make takes the pruned path as far as it goes."""
    monkeypatch.setattr(keyword_index, "PRUNE_FROM", 0)
    monkeypatch.setattr(keyword_index, "TOP_FROM", 64)
    monkeypatch.setattr(keyword_index, "READ_SHARE", 1)


WEIGHTS = (3.0, 1.0)
K1, B = 1.2, 0.75

Doc = tuple[str, str]


class Oracle:
    """BM25F over ``docs`` scored document by document, ranked by score then id (the
    documents' terms are counted once, when it is made: make another after a change)."""

    def __init__(self, docs: dict[str, Doc]) -> None:
        self.freqs: dict[str, dict[str, float]] = {}
        self.lengths: dict[str, float] = {}
        for doc_id, values in docs.items():
            freq: dict[str, float] = {}
            for weight, value in zip(WEIGHTS, values, strict=True):
                for term in tokens(value):
                    freq[term] = freq.get(term, 0.0) + weight
            self.freqs[doc_id] = freq
            self.lengths[doc_id] = sum(freq.values())

    def rank(self, query: str, top_k: int, allowed: set[str] | None = None):
        freqs, lengths = self.freqs, self.lengths
        count = len(freqs)
        avg = sum(lengths.values()) / count or 1.0
        c1, c2 = K1 * (1.0 - B), K1 * B / avg
        terms = [t for t in query_terms(query) if any(t in f for f in freqs.values())]
        idf = {}
        for term in terms:
            df = sum(term in f for f in freqs.values())
            idf[term] = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
        scored = []
        for doc_id, freq in freqs.items():
            if allowed is not None and doc_id not in allowed:
                continue
            score, matched = 0.0, False
            for term in terms:
                tf = freq.get(term)
                if tf:
                    matched = True
                    score += idf[term] * (tf * (K1 + 1.0) / (tf + c1 + c2 * lengths[doc_id]))
            if matched:
                scored.append((-score, doc_id))
        return [(doc_id, -negated) for negated, doc_id in sorted(scored)[:top_k]]


class Corpus:
    """Random documents over a Zipf-like vocabulary: a few words in most documents, most words
    in a few (what makes pruning pay), with duplicated texts for ties."""

    def __init__(self, seed: int, vocabulary: int = 400) -> None:
        self.rng = random.Random(seed)
        self.words = [f"w{n:03d}x" for n in range(vocabulary)]
        self.cum = list(_accumulate(1.0 / (rank + 1) for rank in range(vocabulary)))

    def word(self) -> str:
        point = self.rng.random() * self.cum[-1]
        lo, hi = 0, len(self.cum) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.cum[mid] < point:
                lo = mid + 1
            else:
                hi = mid
        return self.words[lo]

    def text(self, low: int, high: int) -> str:
        return " ".join(self.word() for _ in range(self.rng.randint(low, high)))

    def doc(self) -> Doc:
        return self.text(1, 2), self.text(3, 14)

    def query(self) -> str:
        return self.text(1, 5)


def _accumulate(values: Any) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += value
        out.append(total)
    return out


def numpy_or_skip() -> Any:
    return pytest.importorskip("numpy")


def checked(index: KeywordIndex, docs: dict[str, Doc], corpus: Corpus, queries: int) -> None:
    """Every query ranks as the oracle does, pruned and exhaustive, at several k."""
    exact = Oracle(docs)
    for _ in range(queries):
        query = corpus.query()
        for top_k in (1, 5, 30):
            want = exact.rank(query, top_k)
            assert index.search(query, top_k) == want, (query, top_k)
            assert index.search(query, top_k, exhaustive=True) == want, (query, top_k)


def filled(corpus: Corpus, size: int) -> tuple[KeywordIndex, dict[str, Doc]]:
    index = KeywordIndex(COLUMNS, weights=WEIGHTS, k1=K1, b=B)
    docs: dict[str, Doc] = {}
    for n in range(size):
        docs[f"d{n:05d}"] = corpus.doc()
    for n in corpus.rng.sample(range(size), size // 20):  # copies of texts: tied scores
        docs[f"copy{n:05d}"] = docs[f"d{n:05d}"]
    for doc_id, values in docs.items():
        index.upsert(doc_id, *values)
    return index, docs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pruned_top_k_equals_exhaustive_scoring_on_random_corpora(seed: int) -> None:
    numpy_or_skip()
    corpus = Corpus(seed)
    index, docs = filled(corpus, 2500)
    checked(index, docs, corpus, queries=25)


def test_plain_loop_ranks_as_the_oracle() -> None:
    corpus = Corpus(4)
    index, docs = filled(corpus, 600)
    index._np = None
    exact = Oracle(docs)
    for _ in range(15):
        query = corpus.query()
        assert index.search(query, 10) == exact.rank(query, 10)


def test_pruned_search_scores_fewer_postings_than_there_are_matches(monkeypatch) -> None:
    numpy = numpy_or_skip()
    corpus = Corpus(5)
    index, docs = filled(corpus, 5000)
    scored: list[int] = []
    weights = keyword_index.term_weights

    def counting(tfs: Any, *args: Any) -> Any:
        scored.append(numpy.size(tfs))
        return weights(tfs, *args)

    monkeypatch.setattr(keyword_index, "term_weights", counting)
    rare = corpus.words[-1]
    common = " ".join(corpus.words[:3])
    index.search(f"{common} {rare}", 10, exhaustive=True)
    every = sum(scored)
    scored.clear()
    got = index.search(f"{common} {rare}", 10)
    assert got == Oracle(docs).rank(f"{common} {rare}", 10)
    assert 0 < sum(scored) < every / 4


def test_updates_and_deletes_keep_the_ranking_exact_through_renumbering() -> None:
    numpy_or_skip()
    corpus = Corpus(6)
    index, docs = filled(corpus, 1500)
    rng = corpus.rng
    for round_ in range(3):
        for _ in range(1200):  # enough freed slots to renumber them (more than are live)
            doc_id = rng.choice(sorted(docs))
            if rng.random() < 0.5:
                del docs[doc_id]
                index.remove(doc_id)
            else:
                docs[doc_id] = corpus.doc()
                index.upsert(doc_id, *docs[doc_id])
        for n in range(200):
            doc_id = f"new{round_}-{n}"
            docs[doc_id] = corpus.doc()
            index.upsert(doc_id, *docs[doc_id])
        assert len(index) == len(docs)
        checked(index, docs, corpus, queries=10)


def test_allowed_ids_are_honoured_before_the_cut() -> None:
    numpy_or_skip()
    corpus = Corpus(7)
    index, docs = filled(corpus, 3000)
    allowed = set(corpus.rng.sample(sorted(docs), 300))
    exact = Oracle(docs)
    for _ in range(10):
        query = corpus.query()
        want = exact.rank(query, 10, allowed)
        assert index.search(query, 10, allowed=allowed) == want
        assert index.search(query, 10, allowed=allowed, exhaustive=True) == want


def test_equal_scores_rank_by_id_whatever_the_insertion_order() -> None:
    forward, backward = KeywordIndex(COLUMNS), KeywordIndex(COLUMNS)
    names = [f"n{i}" for i in range(40)]
    for name in names:
        forward.upsert(name, "same words", "here")
    for name in reversed(names):
        backward.upsert(name, "same words", "here")
    want = sorted(names)[:10]
    assert [d for d, _ in forward.search("words", 10)] == want
    assert [d for d, _ in backward.search("words", 10)] == want


def test_search_after_resume_equals_search_before(tmp_path: Path) -> None:
    db = tmp_path / "kg.db"
    queries = ["ledger payments", "refund", "fraud ledger audit", "audit"]
    with Team("kg-pruned", db) as team:
        tools = {
            t.__name__: t for t in team.bind([KnowledgeGraphTool(vector_store=False)]).get_tools()
        }
        rng = random.Random(8)
        words = ["ledger", "payments", "refund", "fraud", "audit", "card", "shop", "tax"]
        names = [f"item-{n:03d}" for n in range(120)]
        rng.shuffle(names)  # created out of name order, so slots differ from a reload's
        tools["update_graph"](
            create_entities=[
                {
                    "name": name,
                    "entity_type": "Thing",
                    "description": " ".join(rng.choice(words) for _ in range(n % 3 + 1)),
                }
                for n, name in enumerate(names)
            ]
        )
        tools["update_graph"](
            delete_entities=names[:20],
            update_entities=[{"name": n, "description": "ledger refund"} for n in names[20:40]],
        )
        before = [tools["search_graph"](q, mode="keyword", top_k=15) for q in queries]
    with Team.resume("kg-pruned", db) as team:
        tools = {
            t.__name__: t for t in team.bind([KnowledgeGraphTool(vector_store=False)]).get_tools()
        }
        after = [tools["search_graph"](q, mode="keyword", top_k=15) for q in queries]
    assert after == before


def test_queries_of_common_words_only_rank_as_scoring_every_match(monkeypatch) -> None:
    """Queries of the most common words only (no rare word to anchor the top-k), common words
    with one rarer word, and single words, on a seeded Zipf corpus: the pruned ranking is the
    exhaustive one, and most queries are answered without scoring every posting (the pruning
    is exercised, not bypassed)."""
    numpy_or_skip()
    corpus = Corpus(11, vocabulary=300)
    index, docs = filled(corpus, 4000)
    common, rarer = corpus.words[:8], corpus.words[8:60]
    rng = random.Random(12)
    queries = [" ".join(rng.sample(common, rng.randint(1, 5))) for _ in range(40)]
    queries += [" ".join([*rng.sample(common, 2), rng.choice(rarer)]) for _ in range(20)]
    queries += corpus.words[:20]
    every_posting: list[int] = []
    search_all = KeywordIndex._search_all

    def counted(self: KeywordIndex, *args: Any) -> Any:
        every_posting.append(1)
        return search_all(self, *args)

    monkeypatch.setattr(KeywordIndex, "_search_all", counted)
    pruned_alone = 0
    exact = Oracle(docs)
    for query in queries:
        want = exact.rank(query, 30)
        for top_k in (1, 10, 30):
            every_posting.clear()
            pruned = index.search(query, top_k)
            pruned_alone += not every_posting
            assert pruned == index.search(query, top_k, exhaustive=True), (query, top_k)
            assert pruned == want[:top_k], (query, top_k)
    assert pruned_alone > len(queries) * 3 // 2


def test_a_tie_across_the_kth_place_keeps_the_smallest_ids() -> None:
    """Hundreds of documents tie for the best score of a common word: the pruned top-k takes
    the smallest ids among all of them, as scoring every posting does."""
    numpy_or_skip()
    corpus = Corpus(13)
    index, docs = filled(corpus, 3000)
    word = corpus.words[0]
    names = [f"tie{n:04d}" for n in range(400)]
    random.Random(14).shuffle(names)  # slots in another order than ids
    for name in names:
        docs[name] = ("", " ".join([word] * 6))
        index.upsert(name, *docs[name])
    exact = Oracle(docs)
    for query in (word, f"{word} {corpus.words[1]}", f"{word} {corpus.words[-1]}"):
        want = exact.rank(query, 30)
        for top_k in (1, 10, 30):
            assert index.search(query, top_k) == want[:top_k], (query, top_k)
            assert index.search(query, top_k, exhaustive=True) == want[:top_k], (query, top_k)
