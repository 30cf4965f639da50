"""``index="auto"``: exact below the documented size, the HNSW graph above it (recall checked
when it is built), exact plus a one-line hint when faiss is switched off, on a real team."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

pytest.importorskip("faiss")

import numpy as np

from toolcards.runtime import Team
from toolcards.tools.vector_store.base import normalize_rows
from toolcards.tools.vector_store.card import VectorStoreTool
from toolcards.tools.vector_store.client import find_store, flush
from toolcards.tools.vector_store.indexing import checked_graph, planned_kind
from toolcards.tools.vector_store.models import AUTO_EXACT_BELOW, VectorStoreConfig

DOCS = [(f"d{i}", f"note {i} about subject {i % 97} and item {i}") for i in range(1000)]
WORDS = [f"w{i}" for i in range(5000)]


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
    assert planned_kind(config, AUTO_EXACT_BELOW - 1) == "exact"
    assert planned_kind(config, AUTO_EXACT_BELOW) == "hnsw"
    assert planned_kind(config.model_copy(update={"index": "exact"}), 10**7) == "exact"


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
        wait_until(lambda: handle.ask("info")["indexes"]["notes"] == "hnsw", "no graph")
        assert handle.ask("info")["index_notes"] == {}


@pytest.mark.timeout(90)
def test_auto_without_faiss_stays_exact_and_logs_one_hint_line(
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
        info = handle.ask("info")
    hints = [r.getMessage() for r in caplog.records if "toolcards[hnsw]" in r.getMessage()]
    assert len(hints) == 1 and "\n" not in hints[0]
    assert info["indexes"] == {"notes": "exact", "other": "exact"} and info["building"] == []
    assert "toolcards[hnsw]" in info["index_notes"]["notes"]


def test_a_graph_below_the_recall_target_is_refused_at_build() -> None:
    rng = np.random.default_rng(0)
    matrix = normalize_rows(rng.standard_normal((3000, 384)).astype(np.float32))
    labels: list[str | None] = [f"v{i}" for i in range(3000)]
    weak = VectorStoreConfig(provider="hash", dimension=384, hnsw_m=4, hnsw_ef_construction=8)
    built, recall = checked_graph(weak, 384, labels, matrix)
    assert built is None and recall < weak.hnsw_target_recall


def test_an_ef_search_below_the_recall_target_is_raised_at_build() -> None:
    rng = np.random.default_rng(1)
    centres = normalize_rows(rng.standard_normal((50, 64)).astype(np.float32))
    noise = rng.standard_normal((3000, 64)).astype(np.float32) * 0.3
    matrix = normalize_rows(centres[rng.integers(0, 50, 3000)] + noise)
    labels: list[str | None] = [f"v{i}" for i in range(3000)]
    config = VectorStoreConfig(provider="hash", dimension=64, hnsw_ef_search=1)
    built, recall = checked_graph(config, 64, labels, matrix)
    assert built is not None and built.ef_search > 10
    assert recall >= config.hnsw_target_recall


@pytest.mark.timeout(120)
def test_the_store_keeps_exact_search_and_says_why_when_the_graph_misses_recall() -> None:
    weak = VectorStoreTool(
        provider="hash", dimension=384, approximate_above=3000, hnsw_m=4, hnsw_ef_construction=8
    )
    with Team("auto-recall") as team:
        team.bind([weak], "a")
        handle = find_store(team)
        handle.ask("upsert", "notes", random_docs(3000))
        flush(handle)
        wait_until(lambda: "notes" in handle.ask("info")["index_notes"], "no verdict")
        info = handle.ask("info")
        assert info["indexes"] == {"notes": "exact"}
        assert "below the target" in info["index_notes"]["notes"]
        assert "exact search kept" in info["index_notes"]["notes"]
