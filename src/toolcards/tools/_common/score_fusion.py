"""Score-aware fusion of a keyword (BM25) ranking and a vector (cosine) ranking.

Reciprocal-rank fusion keeps only the ranks: a keyword hit that matched every word of the
query counts the same as one that matched a single common word, so hybrid search can only
average its two halves. Here both scores are put on the same absolute scale and added:

- a BM25 score is divided by the most this query could score: the sum over its terms of
  ``idf * (k1 + 1)`` (every term matched, term frequency saturated; a term no document holds
  counts with the idf of an unseen term). A hit matching all the rare words of the query
  covers near 1 of it; one matching a single common word of a long query, near 0. The scale
  comes from the query's own statistics, so it means the same for every query and corpus
  size. The coverage counts squared: a hit covering most of the query keeps nearly all of it,
  one covering a part much less (a half counts a quarter). A query worded unlike the entity it
  wants shares a word or two with many entities; counted linearly, such partial matches
  outweighed a better meaning match, and hybrid search fell below vector search alone;
- a cosine similarity is used as it is (it already is absolute, in ``[-1, 1]``).

``fused = keyword_weight * (bm25 / bound) ** 2 + vector_weight * cosine``; a document missing
from a ranking adds nothing from it. Ties rank by document id.
"""

from __future__ import annotations

from collections.abc import Sequence

Ranked = Sequence[tuple[str, float]]


def score_fuse(
    keyword: Ranked,
    vector: Ranked,
    keyword_bound: float,
    weights: Sequence[float] = (1.0, 1.0),
) -> list[tuple[str, float]]:
    """``keyword`` (BM25, as a share of ``keyword_bound``, squared) and ``vector`` (cosine)
    hits fused by score, best first (ties by id); ``weights`` are ``(keyword, vector)``."""
    if len(weights) != 2:
        raise ValueError("one weight per ranking: (keyword, vector)")
    keyword_weight, vector_weight = (float(w) for w in weights)
    fused: dict[str, float] = {}
    if keyword_bound > 0.0:
        for doc_id, score in keyword:
            coverage = min(1.0, max(0.0, float(score) / keyword_bound))
            fused[doc_id] = fused.get(doc_id, 0.0) + keyword_weight * coverage * coverage
    for doc_id, score in vector:
        fused[doc_id] = fused.get(doc_id, 0.0) + vector_weight * float(score)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
