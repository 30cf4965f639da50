"""IvfIndex (the numpy inverted file): recall against exact search, writes, calibration."""

from __future__ import annotations

import numpy as np

from toolcards.tools.vector_store.embeddings import normalize_rows
from toolcards.tools.vector_store.index import InMemoryIndex
from toolcards.tools.vector_store.ivf_index import IvfIndex

DIM = 32


def clustered(n: int, seed: int, centers: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = normalize_rows(np.random.default_rng(seed + 100).standard_normal((centers, DIM)))
    noise = rng.standard_normal((n, DIM)).astype(np.float32) * 0.04
    out: np.ndarray = normalize_rows(base[rng.integers(0, centers, n)] + noise)
    return out.astype(np.float32)


def built(n: int, seed: int) -> tuple[list[str], np.ndarray, IvfIndex]:
    vectors = clustered(n, seed)
    labels = [f"v{i}" for i in range(n)]
    return labels, vectors, IvfIndex.build(list(labels), vectors, seed=seed)


def every_cell_is_exact(index: IvfIndex, queries: np.ndarray) -> None:
    for query in queries:
        probed = index.search_batch(query[None], 10, nprobe=index.cells)[0]
        assert probed == index.search_batch(query[None], 10, exact=True)[0]


def test_calibrated_search_recalls_what_exact_search_finds() -> None:
    points = clustered(5020, seed=5)
    labels = [str(i) for i in range(5000)]
    index = IvfIndex.build(list(labels), points[:5000], seed=1)
    exact = InMemoryIndex(DIM)
    exact.add(labels, points[:5000])
    assert index.calibrate(0.95) >= 0.95 and index.nprobe < index.cells // 4
    queries = points[5000:]
    truth = [{h[0] for h in hits} for hits in exact.search_batch(queries, 10)]
    found = [{h[0] for h in hits} for hits in index.search_batch(queries, 10)]
    assert np.mean([len(a & b) / 10 for a, b in zip(truth, found, strict=True)]) >= 0.9
    every = [[h[0] for h in hits] for hits in index.search_batch(queries, 10, exact=True)]
    assert every == [[h[0] for h in hits] for hits in exact.search_batch(queries, 10)]


def test_adds_replacements_and_removals_stay_consistent() -> None:
    labels, vectors, index = built(3000, seed=6)
    more = clustered(1000, seed=7)
    index.add([f"n{i}" for i in range(1000)], more)
    index.add(labels[:500], more[:500])  # replaced: most move to another cell
    assert index.remove([*labels[500:1500:2], "unknown"]) == 500
    assert index.count() == 3500
    assert "v500" not in index and "v501" in index and "n999" in index
    assert np.array_equal(index.vectors(["v7"])[0], more[7])
    every_cell_is_exact(index, clustered(5, seed=8))
    found = {h[0] for r in index.search_batch(vectors[500:1500:2], 10, exact=True) for h in r}
    assert found and not found & set(labels[500:1500:2])


def test_a_snapshot_tracks_the_changes_made_after_it() -> None:
    labels, vectors, index = built(2000, seed=9)
    snap_labels, matrix = index.snapshot()
    assert sorted(label for label in snap_labels if label) == sorted(labels)
    rows = {label: row for row, label in enumerate(snap_labels)}
    assert np.array_equal(matrix[rows["v42"]], vectors[42])
    index.add(["v1", "new"], clustered(2, seed=10))
    index.remove(["v2"])
    assert index.take_changes() == {"v1", "new", "v2"}
    assert index.take_changes() == set()


def test_a_copy_is_independent_and_answers_the_same() -> None:
    labels, vectors, index = built(2000, seed=11)
    twin = index.copy()
    queries = clustered(10, seed=12)
    assert twin.search_batch(queries, 5) == index.search_batch(queries, 5)
    twin.remove(labels[:1000])
    assert index.count() == 2000 and twin.count() == 1000
    assert index.search(vectors[3], 1)[0][0] == "v3"


def test_it_asks_to_be_trained_again_at_four_times_its_size() -> None:
    *_, index = built(1000, seed=13)
    index.add([f"n{i}" for i in range(2999)], clustered(2999, seed=14))
    assert not index.needs_rebuild() and index.needs_tuning()
    index.add(["last"], clustered(1, seed=15))
    assert index.needs_rebuild()
