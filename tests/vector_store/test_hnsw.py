"""HnswIndex (faiss HNSW): recall against exact search, deletions, replacement, persistence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("faiss")

from toolcards.tools.vector_store.base import normalize_rows
from toolcards.tools.vector_store.hnsw_index import HnswIndex, build_graph

DIM = 48


def unit(rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return normalize_rows(rng.standard_normal((rows, DIM)).astype(np.float32))


def recall(index: HnswIndex, queries: np.ndarray) -> float:
    exact = index.search_batch(queries, 10, exact=True)
    found = index.search_batch(queries, 10)
    pairs = zip(found, exact, strict=True)
    return float(np.mean([len({h[0] for h in a} & {h[0] for h in e}) / 10 for a, e in pairs]))


@pytest.fixture(scope="module")
def built() -> tuple[list[str], np.ndarray, HnswIndex]:
    vectors = unit(1500, 1)
    ids = [f"v{i}" for i in range(len(vectors))]
    index = HnswIndex(DIM, graph=build_graph(vectors), labels=ids)
    index.calibrate()
    return ids, vectors, index


def test_calibrated_search_finds_what_exact_search_finds(built: tuple) -> None:
    _, _, index = built
    assert recall(index, unit(100, 2)) >= 0.95


def test_exact_search_of_a_stored_vector_returns_it_first(built: tuple) -> None:
    ids, vectors, index = built
    (best, score), *_ = index.search(vectors[123], 3)
    assert best == ids[123] and score == pytest.approx(1.0, abs=1e-5)


def test_a_graph_grown_by_adds_equals_a_bulk_built_one_in_recall() -> None:
    vectors = unit(1000, 3)
    index = HnswIndex(DIM, ef_search=128)
    for start in range(0, 1000, 250):
        index.add([f"v{i}" for i in range(start, start + 250)], vectors[start : start + 250])
    assert index.count() == 1000
    assert recall(index, unit(50, 4)) >= 0.95


def test_removed_ids_never_come_back() -> None:
    vectors = unit(600, 5)
    index = HnswIndex(DIM, graph=build_graph(vectors), labels=[f"v{i}" for i in range(600)])
    gone = [f"v{i}" for i in range(0, 600, 3)]
    assert index.remove([*gone, "unknown"]) == len(gone)
    assert index.count() == 400 and "v0" not in index
    hits = index.search_batch(vectors[:60], 10) + index.search_batch(vectors[:60], 10, exact=True)
    found = {item for row in hits for item, _ in row}
    assert found and not found & set(gone)
    assert index.search(vectors[0], 1)[0][0] != "v0"


def test_a_replaced_vector_is_found_by_its_new_value_only() -> None:
    vectors = unit(800, 6)
    index = HnswIndex(DIM, graph=build_graph(vectors), labels=[f"v{i}" for i in range(800)])
    index.add(["v5"], vectors[700:701])
    assert index.count() == 800 and index.dead == 1
    assert [h[0] for h in index.search(vectors[700], 2)] == sorted(["v5", "v700"])
    assert "v5" not in [h[0] for h in index.search(vectors[5], 5)]
    assert np.allclose(index.vectors(["v5"])[0], vectors[700])


def test_tombstones_past_a_quarter_ask_for_a_rebuild() -> None:
    vectors = unit(5000, 7)
    graph = build_graph(vectors, m=4, ef_construction=8)  # counting tombstones: any graph will do
    index = HnswIndex(DIM, graph=graph, labels=[f"v{i}" for i in range(5000)])
    index.remove([f"v{i}" for i in range(900)])
    assert not index.needs_rebuild()
    index.remove([f"v{i}" for i in range(900, 1100)])
    assert index.needs_rebuild()
    labels, matrix = index.snapshot()
    assert len(labels) == 3900 and matrix.shape == (3900, DIM)


def test_changes_after_a_snapshot_are_reported_once() -> None:
    index = HnswIndex(DIM)
    index.add(["a", "b"], unit(2, 8))
    index.snapshot()
    index.add(["c"], unit(1, 9))
    index.remove(["a"])
    assert index.take_changes() == {"a", "c"}
    assert index.take_changes() == set()


def test_saved_index_reloads_with_its_tombstones(tmp_path: Path) -> None:
    vectors = unit(1000, 10)
    index = HnswIndex(DIM, graph=build_graph(vectors), labels=[f"v{i}" for i in range(1000)])
    index.remove(["v1", "v2"])
    index.ef_search = 96
    path = tmp_path / "sub" / "c.faiss"
    index.save(path)
    again = HnswIndex.load(path, DIM)
    assert again.count() == 998 and "v1" not in again and again.ef_search == 96
    queries = unit(20, 11)
    assert again.search_batch(queries, 5) == index.search_batch(queries, 5)
    with pytest.raises(ValueError, match="dimension"):
        HnswIndex.load(path, DIM + 1)


def test_differences_name_changed_missing_and_extra_ids() -> None:
    vectors = unit(100, 12)
    index = HnswIndex(DIM, graph=build_graph(vectors), labels=[f"v{i}" for i in range(100)])
    labels: list[str | None] = [f"v{i}" for i in range(100)]
    changed = vectors.copy()
    changed[7] = unit(1, 13)[0]
    labels[9] = None  # v9 gone from the records
    labels[10] = "new"  # a row the index has never seen
    assert index.differences(labels, changed) == {"v7", "v9", "v10", "new"}


def test_a_wrong_dimension_is_refused() -> None:
    index = HnswIndex(DIM)
    with pytest.raises(ValueError, match="dimension"):
        index.add(["x"], np.ones((1, DIM + 1), dtype=np.float32))


@pytest.mark.parametrize("seed", range(4))
def test_equal_scores_at_the_cut_keep_the_smallest_labels(seed: int) -> None:
    vectors = unit(1000, 20 + seed)
    twins = [5, *range(100, 112)]
    vectors[twins] = vectors[5]  # thirteen labels on one vector: thirteen equal scores
    labels = [f"v{i:04d}" for i in np.random.default_rng(seed).permutation(1000)]
    index = HnswIndex(DIM, graph=build_graph(vectors), labels=labels, ef_search=64)
    expected = sorted(labels[row] for row in twins)
    for k in (1, 4, 13):
        assert [h[0] for h in index.search(vectors[5], k)] == expected[:k]
