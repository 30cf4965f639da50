"""``index="auto"``: exact below the documented size; above it the inverted file and the HNSW
graph, each calibrated to the recall target when built, the cheaper one served; a one-line hint
when faiss is switched off. On ``AutoIndex`` itself and on a real team."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faiss")

import numpy as np

from toolcards import HostTrust
from toolcards.runtime import Team
from toolcards.tools.vector_store import indexing
from toolcards.tools.vector_store.base import normalize_rows
from toolcards.tools.vector_store.card import VectorStoreTool
from toolcards.tools.vector_store.client import find_store, flush, query
from toolcards.tools.vector_store.hnsw_index import HnswIndex
from toolcards.tools.vector_store.indexing import (
    AutoIndex,
    IndexBuilder,
    approximate_kinds,
    checked_graph,
)
from toolcards.tools.vector_store.ivf_index import IvfIndex
from toolcards.tools.vector_store.models import AUTO_EXACT_BELOW, VectorStoreConfig

DOCS = [(f"d{i}", f"note {i} about subject {i % 97} and item {i}") for i in range(1000)]
WORDS = np.array([f"w{i}" for i in range(5000)])  # an array: rng.choice converts a list per call


def random_docs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Texts of random rare words: hashed, their vectors are near-orthogonal (hard for HNSW)."""
    rng = np.random.default_rng(seed)
    return [(f"r{i}", " ".join(rng.choice(WORDS, size=12))) for i in range(n)]


def wait_until(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_auto_is_the_default_and_switches_at_the_documented_size() -> None:
    config = VectorStoreConfig(provider="hash", dimension=64)
    assert config.index == "auto"
    assert config.approximate_above == AUTO_EXACT_BELOW == 50_000
    assert approximate_kinds(config) == ("ivf", "hnsw")
    assert approximate_kinds(config.model_copy(update={"index": "hnsw"})) == ("hnsw",)
    assert approximate_kinds(config.model_copy(update={"index": "exact"})) == ()
    assert approximate_kinds(config.model_copy(update={"approximate_above": None})) == ()


@pytest.mark.timeout(90)
def test_a_collection_leaves_exact_search_when_it_reaches_the_threshold() -> None:
    with Team("auto-threshold") as team:
        team.bind([VectorStoreTool(provider="hash", dimension=64, approximate_above=1000)], "a")
        handle = find_store(team)
        handle.ask("upsert", "notes", DOCS[:999])
        flush(handle)
        info = handle.ask("info")
        assert info["indexes"] == {"notes": "exact"} and info["building"] == []
        handle.ask("upsert", "notes", DOCS[999:])
        flush(handle)
        wait_until(lambda: not handle.ask("info")["building"], "no verdict")
        assert handle.ask("info")["indexes"]["notes"] in ("ivf", "hnsw")


@pytest.mark.timeout(90)
def test_auto_without_faiss_serves_no_graph_and_logs_one_hint_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLCARDS_HNSW", "off")
    caplog.set_level(logging.WARNING, logger="toolcards.tools.vector_store.indexing")
    with Team("auto-no-faiss") as team:
        team.bind([VectorStoreTool(provider="hash", dimension=64, approximate_above=1000)], "a")
        handle = find_store(team)
        for start in range(0, 1000, 250):  # the last of four writes reaches the threshold
            handle.ask("upsert", "notes", DOCS[start : start + 250])
            flush(handle)
        handle.ask("upsert", "other", DOCS)
        flush(handle)
        wait_until(lambda: not handle.ask("info")["building"], "no verdict")
        info = handle.ask("info")
    hints = [r.getMessage() for r in caplog.records if "toolcards[hnsw]" in r.getMessage()]
    assert len(hints) == 1 and "\n" not in hints[0]
    assert "hnsw" not in info["indexes"].values() and info["building"] == []
    assert "toolcards[hnsw]" in info["index_notes"]["notes"]


def test_a_graph_below_the_recall_target_is_refused_at_build() -> None:
    rng = np.random.default_rng(0)  # random directions: 2,000 are enough for a weak graph to miss
    matrix = normalize_rows(rng.standard_normal((2000, 384)).astype(np.float32))
    labels: list[str | None] = [f"v{i}" for i in range(2000)]
    weak = VectorStoreConfig(provider="hash", dimension=384, hnsw_m=4, hnsw_ef_construction=8)
    built, recall = checked_graph(weak, 384, labels, matrix)
    assert built is None and recall < weak.hnsw_target_recall


def test_an_ef_search_below_the_recall_target_is_raised_at_build() -> None:
    rng = np.random.default_rng(1)
    centres = normalize_rows(rng.standard_normal((50, 64)).astype(np.float32))
    noise = rng.standard_normal((1000, 64)).astype(np.float32) * 0.3
    matrix = normalize_rows(centres[rng.integers(0, 50, 1000)] + noise)
    labels: list[str | None] = [f"v{i}" for i in range(1000)]
    config = VectorStoreConfig(provider="hash", dimension=64, hnsw_ef_search=1)
    built, recall = checked_graph(config, 64, labels, matrix)
    assert built is not None and built.ef_search > 10
    assert recall >= config.hnsw_target_recall


@pytest.mark.timeout(120)
def test_the_store_keeps_exact_search_and_says_why_when_the_graph_misses_recall() -> None:
    weak = VectorStoreTool(
        provider="hash", dimension=384, approximate_above=1500, hnsw_m=4, hnsw_ef_construction=8
    )
    with Team("auto-recall") as team:
        team.bind([weak], "a")
        handle = find_store(team)
        handle.ask("upsert", "notes", random_docs(1500))
        flush(handle)
        wait_until(lambda: "exact search kept" in notes(handle), "no verdict")
        info = handle.ask("info")
        assert info["indexes"] == {"notes": "exact"} and info["building"] == []
        assert "HNSW graph recall@10" in info["index_notes"]["notes"]
        assert "below the target" in info["index_notes"]["notes"]


def notes(handle: Any) -> str:
    return str(handle.ask("info")["index_notes"].get("notes", ""))


# ---- AutoIndex on its own: the object each in-memory collection of the store is served from --

DIM = 64


def clustered(n: int, seed: int = 0, topics: int = 20) -> np.ndarray:
    """Unit vectors around ``topics`` centres (a seeded stand-in for sentence embeddings; from
    2,000 of them an inverted file of sqrt(n) cells reaches the recall target)."""
    rng = np.random.default_rng(seed)
    centres = normalize_rows(rng.standard_normal((topics, DIM)).astype(np.float32))
    noise = rng.standard_normal((n, DIM)).astype(np.float32) * 0.15
    out: np.ndarray = normalize_rows(centres[rng.integers(0, topics, n)] + noise)
    return out


def exact_top(vectors: np.ndarray, labels: list[str], query: np.ndarray, k: int) -> list[str]:
    """The brute-force answer: best score first, equal scores by label."""
    order = np.lexsort((np.array(labels), -(vectors @ query)))
    return [labels[int(i)] for i in order[:k]]


@pytest.fixture
def builder() -> Iterator[IndexBuilder]:
    found = IndexBuilder("test")
    yield found
    found.stop()  # its thread is waited for by the folder's index_builds_end_with_the_test


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds every build (graph and inverted file) until set (by the test, or at teardown)."""
    opened = threading.Event()
    real_graph, real_file = indexing.build_graph, IvfIndex.build

    def held_graph(matrix: Any, **kw: Any) -> Any:
        assert opened.wait(60), "the test never released the build"
        return real_graph(matrix, **kw)

    def held_file(labels: Any, matrix: Any, **kw: Any) -> IvfIndex:
        assert opened.wait(60), "the test never released the build"
        return real_file(labels, matrix, **kw)

    monkeypatch.setattr(indexing, "build_graph", held_graph)
    monkeypatch.setattr(IvfIndex, "build", held_file)
    yield opened
    opened.set()


def auto_index(builder: IndexBuilder, **kw: Any) -> AutoIndex:
    config = VectorStoreConfig(provider="hash", dimension=DIM, approximate_above=1000, **kw)
    return AutoIndex(config, DIM, builder, collection="c")


def settle(index: AutoIndex) -> None:
    wait_until(lambda: not index.building, "the build did not finish")


def test_below_the_threshold_every_answer_is_exact_and_nothing_is_built(
    builder: IndexBuilder, gate: threading.Event
) -> None:
    vectors = clustered(999)
    vectors[500:510] = vectors[7]  # ten equal scores for the query of row 7
    labels = [f"v{i:04d}" for i in range(999)][::-1]
    index = auto_index(builder)
    index.add(labels, vectors)
    for row in (7, 100, 998):
        hits = index.search(vectors[row], 5)
        assert [h[0] for h in hits] == exact_top(vectors, labels, vectors[row], 5)
    assert index.kind == "exact" and not index.building and index.note is None


KINDS = ["ivf", "hnsw", "auto"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_seeded_corpus_fed_in_batches_reaches_the_recall_floor(
    builder: IndexBuilder, kind: str
) -> None:
    points = clustered(4350, seed=1)
    vectors, queries = points[:4250], points[4250:]  # held-out queries on the same topics
    labels = [f"v{i}" for i in range(4250)]
    index = auto_index(builder, index=kind)
    # the build starts at 1,000 and catches up; past four times that, the file is trained anew
    for start in range(0, 4250, 250):
        index.add(labels[start : start + 250], vectors[start : start + 250])
    settle(index)
    assert index.kind == kind if kind != "auto" else index.kind in ("ivf", "hnsw")
    assert index.count() == 4250
    truth = [set(exact_top(vectors, labels, q, 10)) for q in queries]
    found = [{h[0] for h in index.search(q, 10)} for q in queries]
    assert np.mean([len(t & f) / 10 for t, f in zip(truth, found, strict=True)]) >= 0.95


def test_auto_serves_the_candidate_whose_queries_cost_less(
    builder: IndexBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = HnswIndex.calibrate

    def dear(self: HnswIndex, *args: Any, **kw: Any) -> float:
        recall = real(self, *args, **kw)
        self.cost_ms = 1e6  # as if every graph search cost a thousand seconds
        return recall

    monkeypatch.setattr(HnswIndex, "calibrate", dear)
    vectors = clustered(2000, seed=2)
    index = auto_index(builder)
    index.add([f"v{i}" for i in range(2000)], vectors)
    settle(index)
    assert index.kind == "ivf"
    assert index.note is not None and index.note.startswith("inverted file chosen")


@pytest.mark.parametrize("kind", KINDS)
def test_while_it_builds_answers_are_exact_and_writes_go_on(
    builder: IndexBuilder, gate: threading.Event, kind: str
) -> None:
    vectors = clustered(3000, seed=3)
    labels = [f"v{i}" for i in range(3000)]
    index = auto_index(builder, index=kind)
    index.add(labels[:2000], vectors[:2000])
    assert index.building and index.kind == "exact"
    index.add(labels[2000:], vectors[2000:])  # the owner is not held by the build
    index.remove(labels[:100])
    index.add(["v150"], vectors[2999:3000])  # replaced while the index is built
    live = labels[100:]
    now = vectors[100:].copy()
    now[50] = vectors[2999]
    for row in (0, 120, 1500, 2500):
        answer = [h[0] for h in index.search(vectors[row], 10)]
        assert answer == exact_top(now, live, vectors[row], 10)
    gate.set()
    settle(index)
    assert index.kind != "exact" and index.count() == 2900
    assert not {h[0] for r in index.search_batch(vectors[:100], 10) for h in r} & set(labels[:100])
    assert index.search(vectors[2999], 2)[0][0] in {"v150", "v2999"}
    assert "v150" not in [h[0] for h in index.search(vectors[150], 10)]


@pytest.mark.parametrize("kind", KINDS)
def test_removed_vectors_never_come_back(builder: IndexBuilder, kind: str) -> None:
    vectors = clustered(2000, seed=4)
    labels = [f"v{i}" for i in range(2000)]
    index = auto_index(builder, index=kind)
    index.add(labels, vectors)
    settle(index)
    assert index.kind != "exact"
    gone = labels[::7]
    assert index.remove([*gone, "never-there"]) == len(gone)
    found = {h[0] for r in index.search_batch(vectors[::7], 10) for h in r}
    assert found and not found & set(gone)
    assert index.count() == 2000 - len(gone)


@pytest.mark.timeout(120)
def test_a_resumed_store_answers_exactly_as_before_from_its_saved_graph(tmp_path: Path) -> None:
    db, saved = tmp_path / "team.db", tmp_path / "graphs"
    docs = DOCS + [(f"t{i}", DOCS[i % 50][1]) for i in range(200)]  # equal texts: equal scores
    card = VectorStoreTool(
        provider="hash", dimension=64, approximate_above=1000, index="hnsw", index_dir=str(saved)
    )
    queries = [text for _, text in docs[::37]]
    with Team("auto-resume", db) as team:
        team.bind([card], "a")
        handle = find_store(team)
        handle.ask("upsert", "notes", docs)
        flush(handle)
        wait_until(lambda: handle.ask("info")["indexes"]["notes"] == "hnsw", "no graph")
        before = [query(handle, "notes", text, 10) for text in queries]
    trust = HostTrust(paths=[str(saved)])  # the stored card's folder, granted by the host
    with Team.resume("auto-resume", db, trust=trust) as team:
        handle = find_store(team)
        wait_until(lambda: handle.ask("info")["indexes"].get("notes") == "hnsw", "no graph")
        assert [query(handle, "notes", text, 10) for text in queries] == before


def drained(builder: IndexBuilder) -> None:
    """Wait until the builder ran every job submitted so far (their results not installed)."""
    done = threading.Event()
    builder.submit(done.set)
    assert done.wait(60), "the builder did not finish"


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_a_served_index_whose_rebuild_misses_the_target_waits_until_it_has_doubled(
    builder: IndexBuilder, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A served index due for a rebuild whose rebuild missed the recall target started a full
    rebuild again at every call of the owner: ten searches, ten more builds."""
    check = "checked_file" if kind == "ivf" else "checked_graph"
    real = getattr(indexing, check)
    builds: list[int] = []

    def first_only(config: Any, *args: Any) -> Any:
        builds.append(len(args[-1]))
        return real(config, *args) if len(builds) == 1 else (None, 0.5)  # rebuilds miss

    monkeypatch.setattr(indexing, check, first_only)
    vectors = clustered(16000, seed=6)
    labels = [f"v{i}" for i in range(16000)]
    index = auto_index(builder, index=kind)
    index.add(labels[:2000], vectors[:2000])
    settle(index)
    assert index.kind == kind and len(builds) == 1

    def wear(rounds: int) -> None:  # an inverted file grows four times, a graph is rewritten
        if kind == "ivf":
            index.add(labels[2000 : 8000 * rounds], vectors[2000 : 8000 * rounds])
        else:
            index.add(labels[:1100], vectors[1100 * rounds + 2000 : 1100 * rounds + 3100])

    wear(1)  # due for a rebuild: 8,000 vectors, or 1,100 tombstones
    for _ in range(5):
        drained(builder)
        index.search(vectors[0], 5)  # installs what the builder handed back
    drained(builder)
    assert len(builds) == 2
    assert index.kind == kind and index.note is not None
    assert "the served one kept (next rebuild at " in index.note
    wear(2)  # doubled: 16,000 vectors, or 2,200 tombstones
    settle(index)
    assert len(builds) == 3 and index.kind == kind
