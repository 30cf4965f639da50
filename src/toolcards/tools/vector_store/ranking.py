"""Ranking search hits: best score first, equal scores by label.

Equal scores are common (duplicate texts, a hash embedding, a zero query), and the order numpy
or faiss leaves them in depends on the row layout and the library version. Hits are ordered by
label among equal scores, so a query answers the same before and after a resume (whose rows
are laid out anew) and on every supported numpy and faiss.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any

from toolcards.tools.vector_store.base import require

Hit = tuple[str, float]
SAMPLE = 64
"""Sampled scores per hit asked for, to bound the k-th best before ranking."""


def best_first(hits: Iterable[Hit]) -> list[Hit]:
    """``hits`` by descending score, equal scores by label."""
    return sorted(hits, key=lambda hit: (-hit[1], hit[0]))


def top_hits(scores: Any, k: int, labels: Sequence[str | None], rows: Any = None) -> list[Hit]:
    """The ``k`` best of ``scores`` as ``(label, score)``, best first, equal scores by label;
    ``rows`` maps a score's position to its row in ``labels`` (None: the same); tombstoned
    (None) labels are skipped."""
    np = require("numpy")
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return []
    if k == n:
        better, tied = np.arange(n), np.arange(0)
    else:
        kept = candidates(scores, k)
        pool = scores if kept is None else scores[kept]
        cut = np.partition(pool, len(pool) - k)[len(pool) - k]  # the k-th best score
        better, tied = np.flatnonzero(pool > cut), np.flatnonzero(pool == cut)
        if kept is not None:
            better, tied = kept[better], kept[tied]
    hits = best_first(_labelled(scores, better, labels, rows))
    if len(hits) < k and tied.size:
        # the ties at the cut: the smallest labels (many ties only for a degenerate query)
        score = float(scores[int(tied[0])])
        names = (label for label, _ in _labelled(scores, tied, labels, rows))
        hits += [(name, score) for name in heapq.nsmallest(k - len(hits), names)]
    return hits


def candidates(scores: Any, k: int) -> Any:
    """Positions of ``scores`` that may be among its ``k`` best (every score at least the
    ``k``-th best of a strided sample, itself at most the ``k``-th best of all), or None
    when ``scores`` is too short for a sample to save anything."""
    np = require("numpy")
    stride = scores.shape[0] // (SAMPLE * k)
    if stride < 2:
        return None
    sample = scores[::stride]
    floor = np.partition(sample, len(sample) - k)[len(sample) - k]
    return np.flatnonzero(scores >= floor)


def _labelled(scores: Any, positions: Any, labels: Sequence[str | None], rows: Any) -> list[Hit]:
    found = positions if rows is None else rows[positions]
    return [
        (label, score)
        for r, score in zip(found.tolist(), scores[positions].tolist(), strict=True)
        if (label := labels[r]) is not None
    ]
