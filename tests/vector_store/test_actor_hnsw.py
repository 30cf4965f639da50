"""The #VectorStore actor switching large collections to an HNSW graph, on a real team."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faiss")

from toolcards import HostTrust
from toolcards.runtime import Team
from toolcards.tools.vector_store import actor as actor_mod
from toolcards.tools.vector_store import indexing
from toolcards.tools.vector_store.card import VectorStoreTool
from toolcards.tools.vector_store.client import find_store, flush, query

DOCS = [(f"d{i}", f"note {i} about subject {i % 97} and item {i}") for i in range(1010)]
"""A few notes past the smallest ``approximate_above`` (1,000): a graph is built for them, and
for what is left after a removal."""


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch, counting_hash: Any) -> Any:
    monkeypatch.setattr(actor_mod, "provider_for", lambda config: counting_hash)
    return counting_hash


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the graphs built (rows of each)."""
    sizes: list[int] = []
    real = indexing.build_graph

    def counted(matrix: Any, **kw: Any) -> Any:
        sizes.append(int(matrix.shape[0]))
        return real(matrix, **kw)

    monkeypatch.setattr(indexing, "build_graph", counted)
    return sizes


def card(**kw: Any) -> VectorStoreTool:
    kw.setdefault("index", "hnsw")  # the graph's own mechanics (auto compares it with the file)
    return VectorStoreTool(provider="hash", dimension=64, approximate_above=1000, **kw)


def wait_for(handle: Any, kind: str, collection: str = "notes") -> None:
    deadline = time.monotonic() + 60
    while handle.ask("info")["indexes"].get(collection) != kind:
        assert time.monotonic() < deadline, handle.ask("info")
        time.sleep(0.05)


def loaded(team: Team, **kw: Any) -> Any:
    team.bind([card(**kw)], member="alice")
    handle = find_store(team)
    handle.ask("upsert", "notes", DOCS)
    flush(handle)
    return handle


@pytest.mark.timeout(90)
def test_a_large_collection_is_served_by_a_graph_that_keeps_taking_changes(spy: Any) -> None:
    with Team("hnsw-switch") as team:
        handle = loaded(team)
        wait_for(handle, "hnsw")
        assert query(handle, "notes", DOCS[777][1], 1)[0][0] == "d777"
        handle.ask("upsert", "notes", [("late", "a late remark on tulips and volcanoes")])
        handle.ask("remove", "notes", ["d777"])
        flush(handle)
        assert query(handle, "notes", "a late remark on tulips and volcanoes", 1)[0][0] == "late"
        assert "d777" not in [h[0] for h in query(handle, "notes", DOCS[777][1], 10)]
        assert handle.ask("count", "notes") == 1010


@pytest.mark.timeout(90)
def test_writes_during_the_build_reach_the_graph(spy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    gate = threading.Event()
    real = indexing.build_graph

    def slow(matrix: Any, **kw: Any) -> Any:
        gate.wait(30)
        return real(matrix, **kw)

    monkeypatch.setattr(indexing, "build_graph", slow)
    with Team("hnsw-catch-up") as team:
        handle = loaded(team)
        handle.ask("upsert", "notes", [("d5", "rewritten: penguins skating on a frozen lake")])
        handle.ask("remove", "notes", ["d6"])
        flush(handle)
        gate.set()
        wait_for(handle, "hnsw")
        assert query(handle, "notes", "penguins skating on a frozen lake", 1)[0][0] == "d5"
        assert "d6" not in [h[0] for h in query(handle, "notes", DOCS[6][1], 10)]
        assert handle.ask("count", "notes") == 1009


@pytest.mark.timeout(120)
def test_a_resumed_store_reloads_its_vectors_and_rebuilds_the_graph(
    spy: Any, builds: list[int], tmp_path: Path
) -> None:
    db = tmp_path / "team.db"
    with Team("hnsw-resume", db) as team:
        wait_for(loaded(team), "hnsw")
    with Team.resume("hnsw-resume", db) as team:
        handle = find_store(team)
        assert handle.ask("count", "notes") == 1010
        wait_for(handle, "hnsw")
        assert query(handle, "notes", DOCS[42][1], 1)[0][0] == "d42"
    assert len(builds) == 2 and builds[-1] == 1010  # one build per start


@pytest.mark.timeout(120)
def test_a_stale_saved_graph_is_reloaded_and_caught_up_instead_of_rebuilt(
    spy: Any, builds: list[int], tmp_path: Path
) -> None:
    import shutil

    db, saved, old = tmp_path / "team.db", tmp_path / "graphs", tmp_path / "old"
    with Team("hnsw-saved", db) as team:
        wait_for(loaded(team, index_dir=str(saved)), "hnsw")
    shutil.copytree(saved, old)  # the graph as saved by the first run
    trust = HostTrust(paths=[str(saved)])  # a resumed card may write there: the host says so
    with Team.resume("hnsw-saved", db, trust=trust) as team:
        handle = find_store(team)
        handle.ask("upsert", "notes", [("d5", "rewritten: penguins skating on a frozen lake")])
        handle.ask("remove", "notes", ["d6"])
        flush(handle)
    shutil.rmtree(saved)
    shutil.copytree(old, saved)  # as if the second run had died before saving
    before = len(builds)
    with Team.resume("hnsw-saved", db, trust=trust) as team:
        handle = find_store(team)
        wait_for(handle, "hnsw")
        assert len(builds) == before  # reloaded, not rebuilt
        assert query(handle, "notes", "penguins skating on a frozen lake", 1)[0][0] == "d5"
        assert "d6" not in [h[0] for h in query(handle, "notes", DOCS[6][1], 10)]
        assert handle.ask("count", "notes") == 1009


@pytest.mark.timeout(120)
def test_teams_whose_names_differ_in_punctuation_keep_their_own_saved_graphs(
    spy: Any, tmp_path: Path
) -> None:
    """``acme.prod`` and ``acme_prod`` (one slug) saved their graphs into one folder: the
    second overwrote the first's ids. Now each team's folder is its own."""
    saved = tmp_path / "graphs"
    for team_id in ("acme.prod", "acme_prod"):
        with Team(team_id, tmp_path / f"{team_id}.db") as team:
            wait_for(loaded(team, index_dir=str(saved)), "hnsw")
    folders = sorted(p.name for p in saved.iterdir())
    assert len(folders) == 2 and all(f.startswith("acme_prod_VectorStore-") for f in folders)
    names = {
        indexing.storage_name(*parts)
        for parts in [("acme.prod", "VectorStore"), ("acme_prod", "VectorStore"),
                      ("acme", "prod_VectorStore"), ("acme_prod", "VectorStore", "notes")]
    }  # fmt: skip
    assert len(names) == 4


TOPICS = [[f"w{t}x{j}" for j in range(6)] for t in range(24)]
TOPICAL = [(f"t{i}", " ".join([*TOPICS[i % 24], f"item{i}"])) for i in range(1000)]
"""Texts of 24 topics: hashed, their vectors cluster (what an inverted file is good at)."""


@pytest.mark.timeout(90)
def test_the_inverted_file_is_chosen_by_config_or_without_faiss(
    spy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, index in (("ivf-config", "ivf"), ("ivf-fallback", "hnsw")):
        if index == "hnsw":
            monkeypatch.setenv("TOOLCARDS_HNSW", "off")
        with Team(name) as team:
            team.bind([card(index=index)], member="alice")
            handle = find_store(team)
            handle.ask("upsert", "notes", TOPICAL)
            flush(handle)
            wait_for(handle, "ivf")
            assert query(handle, "notes", TOPICAL[777][1], 1)[0][0] == "t777"


def test_exact_search_stays_exact_when_switched_off(spy: Any) -> None:
    with Team("exact-only") as team:
        team.bind([VectorStoreTool(provider="hash", dimension=64, approximate_above=None)], "a")
        handle = find_store(team)
        handle.ask("upsert", "notes", DOCS)
        flush(handle)
        time.sleep(0.2)
        assert handle.ask("info")["indexes"] == {"notes": "exact"}


@pytest.mark.timeout(120)
def test_mass_removals_rebuild_the_graph_without_the_removed(spy: Any, builds: list[int]) -> None:
    docs = [(f"d{i}", f"note {i} about subject {i % 97} and item {i}") for i in range(2200)]
    with Team("hnsw-rebuild") as team:
        team.bind([card()], member="alice")
        handle = find_store(team)
        handle.ask("upsert", "notes", docs)
        flush(handle)
        wait_for(handle, "hnsw")
        first = len(builds)
        handle.ask("remove", "notes", [f"d{i}" for i in range(1100)])  # past 1,000 tombstones
        deadline = time.monotonic() + 60
        while len(builds) == first or team.actor("#VectorStore").ask("info")["pending"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        wait_for(handle, "hnsw")
        assert builds[-1] == 1100
        assert query(handle, "notes", docs[2000][1], 1)[0][0] == "d2000"
        assert "d10" not in [h[0] for h in query(handle, "notes", docs[10][1], 10)]


@pytest.mark.timeout(120)
def test_a_large_backlog_from_the_build_is_added_off_the_actor_thread(
    spy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from toolcards.tools.vector_store.hnsw_index import HnswIndex

    gate = threading.Event()
    real_build, real_add = indexing.build_graph, HnswIndex.add
    adds: list[tuple[str, int]] = []

    def slow(matrix: Any, **kw: Any) -> Any:
        gate.wait(30)
        return real_build(matrix, **kw)

    def add(self: HnswIndex, ids: Any, vectors: Any) -> None:
        adds.append((threading.current_thread().name, len(ids)))
        real_add(self, ids, vectors)

    monkeypatch.setattr(indexing, "build_graph", slow)
    monkeypatch.setattr(HnswIndex, "add", add)
    more = [(f"m{i}", f"more text {i} on topic {i % 13} number {i}") for i in range(600)]
    with Team("hnsw-backlog") as team:  # a backlog past SMALL_DELTA (512) written during the build
        handle = loaded(team)
        handle.ask("upsert", "notes", more)
        flush(handle)
        gate.set()
        wait_for(handle, "hnsw")
        assert handle.ask("count", "notes") == 1610
        assert query(handle, "notes", more[555][1], 1)[0][0] == "m555"
    big = [(thread, n) for thread, n in adds if n >= indexing.SMALL_DELTA]
    assert big and all(thread.endswith("-index") for thread, _ in big)


@pytest.mark.timeout(120)
def test_a_graph_grown_to_twice_its_size_is_calibrated_again(
    spy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolcards.tools.vector_store.hnsw_index import HnswIndex

    sizes: list[int] = []
    real = HnswIndex.calibrate

    def counted(self: HnswIndex, *args: Any, **kw: Any) -> float:
        if "d0" in self:  # this test's graph: an earlier test's may still finish on its thread
            sizes.append(self.count())
        return real(self, *args, **kw)

    monkeypatch.setattr(HnswIndex, "calibrate", counted)
    more = [(f"m{i}", f"more text {i} on topic {i % 13} number {i}") for i in range(1400)]
    with Team("hnsw-grown") as team:
        team.bind([card()], member="alice")
        handle = find_store(team)
        handle.ask("upsert", "notes", DOCS[:1000])
        flush(handle)
        wait_for(handle, "hnsw")
        assert sizes == [1000]  # calibrated when built
        handle.ask("upsert", "notes", more[:900])
        flush(handle)
        assert handle.ask("info")["building"] == [] and sizes == [1000]  # not yet twice
        handle.ask("upsert", "notes", more[900:])
        flush(handle)
        deadline = time.monotonic() + 60
        while len(sizes) < 2 or handle.ask("info")["building"]:
            assert time.monotonic() < deadline, sizes
            time.sleep(0.05)
        assert sizes[1] >= 2000  # calibrated again at its new size
        assert query(handle, "notes", more[1234][1], 1)[0][0] == "m1234"
