"""``ProbeSet``: sample queries near an index's own vectors, with their exact top-10.

An approximate index (the HNSW graph, the inverted file) is tuned on them: its search effort
(``ef_search``, ``nprobe``) is raised step by step until its recall@10 against the exact answer
reaches a target, and the CPU time a query then costs is what ``index="auto"`` compares to
choose between them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from toolcards.tools.vector_store.base import normalize_rows, require

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix
    from toolcards.tools.vector_store.ranking import Hit

Exact = Callable[["Matrix", int], "list[list[Hit]]"]
"""``exact(queries, k)``: the exact top-k of each query row."""
Search = Callable[["Matrix"], "list[list[Hit]]"]
"""The approximate top-10 of each query row, at one effort."""

CHUNK = 32
"""Queries answered exactly at a time (their scores against every vector are held at once)."""


class ProbeSet:
    """Queries near the stored vectors and their exact top-10.

    Each query is a stored vector moved, in a random direction, as far as its 10th nearest
    neighbour: a new point where the data is, as near to the stored ones as they are to each
    other (so sparse data gets hard queries, clustered data in-cluster ones).
    """

    def __init__(self, queries: Matrix, truth: list[set[str]]) -> None:
        self.queries = queries
        self.truth = truth

    @classmethod
    def near(cls, base: Matrix, exact: Exact, *, seed: int = 0) -> ProbeSet | None:
        """Probes around the rows of ``base`` (stored vectors picked at random); None when
        the index holds too few vectors for a top-10 to mean anything."""
        np = require("numpy")
        if base.shape[0] == 0:
            return None
        rng = np.random.default_rng(seed)
        tenth_hits = _chunked(exact, base, 11)
        if min(len(hits) for hits in tenth_hits) < 11:
            return None
        tenth = np.array([hits[-1][1] for hits in tenth_hits], dtype=np.float32)
        reach = np.sqrt(np.maximum(0.0, 2.0 - 2.0 * tenth))[:, None]
        queries = normalize_rows(base + normalize_rows(rng.standard_normal(base.shape)) * reach)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        return cls(queries, [{h[0] for h in hits} for hits in _chunked(exact, queries, 10)])

    def recall(self, search: Search) -> float:
        """Mean recall@10 of ``search`` against the exact answers."""
        found = search(self.queries)
        pairs = zip(found, self.truth, strict=True)
        return statistics.fmean(len({h[0] for h in f} & t) / 10 for f, t in pairs)

    def calibrate(
        self,
        steps: Sequence[int],
        search_at: Callable[[int], Search],
        target: float,
        *,
        saturates: bool = True,
    ) -> tuple[int, float]:
        """The smallest of ``steps`` (increasing efforts) whose recall reaches ``target``, and
        that recall (else the last step tried). With ``saturates``, when a step gains less
        than 0.002 over the one before (from the sixth step on), the index's quality, not the
        effort, limits recall: the step before is kept rather than paying for nothing."""
        best = (steps[0], 0.0)
        for n, step in enumerate(steps):
            recall = self.recall(search_at(step))
            if saturates and n >= 5 and recall < best[1] + 0.002:
                break  # saturated: keep the step before
            best = (step, recall)
            if recall >= target:
                break
        return best

    def cost_ms(self, search_one: Callable[[Matrix], Any]) -> float:
        """Median CPU milliseconds of this thread per query (other processes and threads
        competing for the cores do not count)."""
        spent = []
        for query in self.queries:
            start = time.thread_time()
            search_one(query)
            spent.append((time.thread_time() - start) * 1e3)
        return statistics.median(spent)


def _chunked(exact: Exact, queries: Matrix, k: int) -> list[list[Hit]]:
    found: list[list[Hit]] = []
    for start in range(0, queries.shape[0], CHUNK):
        found += exact(queries[start : start + CHUNK], k)
    return found
