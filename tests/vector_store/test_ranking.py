"""Equal scores rank by label, whatever the row layout: a query answers the same before and
after its rows are laid out anew (a resume) and on every numpy and faiss."""

from __future__ import annotations

import numpy as np
import pytest

from toolcards.tools.vector_store.embeddings import normalize_rows
from toolcards.tools.vector_store.index import InMemoryIndex
from toolcards.tools.vector_store.ranking import top_hits

DIM = 8


def _twins() -> tuple[list[str], np.ndarray]:
    """Twelve labels on four distinct vectors: three labels share each vector."""
    rng = np.random.default_rng(3)
    distinct = normalize_rows(rng.standard_normal((4, DIM)).astype(np.float32))
    labels = [f"doc{i}" for i in range(12)]
    return labels, np.repeat(distinct, 3, axis=0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 2, 3, 4, 7, 12])
def test_a_query_ranks_the_same_whatever_order_the_rows_were_added_in(seed: int, k: int) -> None:
    labels, vectors = _twins()
    order = np.random.default_rng(seed).permutation(len(labels))
    shuffled = InMemoryIndex(DIM)
    shuffled.add([labels[i] for i in order], vectors[order])
    ordered = InMemoryIndex(DIM)
    ordered.add(labels, vectors)
    for query in vectors[::3]:
        hits = shuffled.search(query, k)
        assert hits == ordered.search(query, k)
        assert hits == sorted(hits, key=lambda h: (-h[1], h[0]))  # equal scores: by label
        assert len(hits) == k


def test_ties_at_the_cut_keep_the_smallest_labels() -> None:
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.5])
    labels = ["e", "z", "c", "a", "y", "b"]
    assert top_hits(scores, 3, labels) == [("z", 0.9), ("a", 0.5), ("b", 0.5)]
    assert top_hits(scores, 6, labels)[-1] == ("y", 0.1)


def test_tombstones_are_skipped_among_the_ties() -> None:
    scores = np.array([0.5, 0.5, 0.5, 0.2], dtype=np.float32)
    labels: list[str | None] = [None, "b", "a", "c"]
    assert top_hits(scores, 2, labels) == [("a", 0.5), ("b", 0.5)]
    assert top_hits(scores, 1, [None, None, None, "c"]) == []


def test_a_degenerate_query_still_answers_k_hits_by_label() -> None:
    scores = np.zeros(50_000, dtype=np.float32)
    labels = [f"id{i:05d}" for i in range(50_000)][::-1]
    assert [h[0] for h in top_hits(scores, 3, labels)] == ["id00000", "id00001", "id00002"]


@pytest.mark.parametrize("k", [1, 10, 30])
def test_long_score_lists_rank_as_a_full_sort(k: int) -> None:
    # past 128 scores per hit asked for, a strided sample bounds the k-th best first: the
    # answer stays that of sorting every score (heavy ties at the cut, tombstones among them)
    rng = np.random.default_rng(k)
    scores = rng.integers(0, 4_000, 40_000).astype(np.float32) / 4_000  # ~10 per score
    labels: list[str | None] = [f"id{i:05d}" for i in rng.permutation(40_000)]
    for position in rng.choice(40_000, 2_000, replace=False):
        labels[int(position)] = None
    ordered = sorted(range(40_000), key=lambda p: (-scores[p], str(labels[p])))
    cut = float(scores[ordered[k - 1]])
    expected = [(labels[p], float(scores[p])) for p in ordered if labels[p] is not None]
    expected = [hit for hit in expected if hit[1] > cut] + [
        hit for hit in expected if hit[1] == cut
    ]
    assert top_hits(scores, k, labels) == expected[:k]
