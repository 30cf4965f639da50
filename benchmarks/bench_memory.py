"""Shared-memory costs: knowledge-graph search over 10k entities, planning update and search.

Run: .venv/bin/python benchmarks/bench_memory.py [--quick] [--provider hash|local]

Everything goes through a real team (tool actors, SQLite state, the ``#VectorStore`` actor):
``search_graph`` is timed end to end as a member calls it (query embedding, vector top-k,
in-process BM25F keyword index, reciprocal-rank fusion, rendering). The ``hash`` provider
(default) keeps the 10k-entity load fast; ``--provider local`` uses the MiniLM model (slower
to load, and each distinct query is embedded once, then cached by the store).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import record

from toolcards import KnowledgeGraphTool, PlanningTool, VectorStoreTool
from toolcards.runtime import Team
from toolcards.tools.knowledge_graph.actor import KnowledgeGraphActor
from toolcards.tools.vector_store.actor import VectorStoreActor

_VOCABULARY = (
    "ledger payout fraud search index image resize notify tax shipping quote identity token "
    "review spam stock currency rate recommend dispute seller onboarding flag audit cart "
    "checkout return auction ingest pricing translate latency error certificate queue kafka "
    "postgres cache replica region deploy rollback timeout retry batch schema migration"
)
WORDS = _VOCABULARY.split(" ")
KINDS = ("Service", "Person", "Incident", "Runbook", "Table", "Host", "FeatureFlag", "Team")


def p50_p95(samples: list[float]) -> tuple[float, float]:
    """Median and 95th percentile of ``samples`` (seconds) in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return statistics.median(ordered) * 1000, p95 * 1000


def percentiles(samples: list[float]) -> str:
    p50, p95 = p50_p95(samples)
    return f"p50 {p50:7.2f} ms   p95 {p95:7.2f} ms   (n={len(samples)})"


def timed(fn: Callable[[], Any], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def bench_graph(team: Team, entities: int, queries: int, provider: str) -> None:
    rng = random.Random(7)
    factory = team.bind([VectorStoreTool(provider=provider), KnowledgeGraphTool()], "bench")
    tools = {fn.__name__: fn for fn in factory.get_tools()}
    start = time.perf_counter()
    for first in range(0, entities, 200):
        batch = [
            {
                "name": f"{rng.choice(KINDS).lower()}-{i:05d}",
                "entity_type": rng.choice(KINDS),
                "description": sentence(rng, 12),
                "observations": [sentence(rng, 6)],
            }
            for i in range(first, min(entities, first + 200))
        ]
        tools["update_graph"](create_entities=batch)
    load = time.perf_counter() - start
    store = team.actor("#VectorStore")
    assert store is not None
    store.ask(VectorStoreActor.flush).result(timeout=600)
    embedded = time.perf_counter() - start
    print(f"graph load: {entities} entities in {load:.1f} s (embedded after {embedded:.1f} s)")
    texts = [sentence(rng, rng.randint(2, 6)) for _ in range(queries)]
    search = tools["search_graph"]
    for mode in ("keyword", "vector", "hybrid"):
        it = iter(texts * 2)
        samples = timed(lambda mode=mode, it=it: search(next(it), mode=mode), queries)
        print(f"search_graph {mode:<8} over {entities} entities: {percentiles(samples)}")
        record(
            f"search_graph {mode}, {entities} entities, p95",
            p50_p95(samples)[1],
            "ms",
            goal="< 20 ms" if mode == "hybrid" else None,
        )
    it = iter(texts * 2)
    samples = timed(lambda: search(next(it), include_neighbors=True, find_paths=True), queries)
    print(f"search_graph hybrid + neighbors + paths:      {percentiles(samples)}")
    # Attribution: the store's query (embedding + top-k) vs. the graph actor's own share.
    vectors = {
        t: store.ask(VectorStoreActor.query, "knowledge_graph", t, 30).result(timeout=30)
        for t in texts
    }
    it = iter(texts)
    samples = timed(
        lambda: store.ask(VectorStoreActor.query, "knowledge_graph", next(it), 30).result(), queries
    )
    print(f"  #VectorStore query, embedding cached:       {percentiles(samples)}")
    graph = team.actor("#KnowledgeGraphTool")
    assert graph is not None
    it = iter(texts)

    def fused() -> None:
        text = next(it)
        graph.ask(KnowledgeGraphActor.search, text, "hybrid", 10, vectors[text])

    print(f"  graph actor BM25 + fusion, given vectors:   {percentiles(timed(fused, queries))}")


def bench_planning(team: Team, tasks: int, rounds: int) -> None:
    rng = random.Random(11)
    factory = team.bind([PlanningTool(vector_store=False)], "planner")
    tools = {fn.__name__: fn for fn in factory.get_tools()}
    update = tools["update_planning"]
    samples = timed(lambda: update(create=[{"description": sentence(rng, 10)}]), tasks)
    print(f"update_planning create (1 task, {tasks} total):    {percentiles(samples)}")
    versions = {i: 1 for i in range(1, tasks + 1)}

    def change() -> None:
        task_id = rng.randint(1, tasks)
        update(update=[{"id": task_id, "version": versions[task_id], "status": "started"}])
        versions[task_id] += 1

    print(f"update_planning update (versioned):            {percentiles(timed(change, rounds))}")
    search = tools["search_planning"]
    samples = timed(lambda: search(query=sentence(rng, 3)), rounds)
    print(f"search_planning query over {tasks} tasks:      {percentiles(samples)}")
    record(f"search_planning query over {tasks} tasks, p50", p50_p95(samples)[0], "ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (under 60 s)")
    parser.add_argument("--provider", default="hash", choices=("hash", "local"))
    parser.add_argument("--entities", type=int, default=10_000)
    args = parser.parse_args()
    queries = 100 if args.quick else 1_000
    with tempfile.TemporaryDirectory() as tmp:
        with Team("bench-graph", Path(tmp) / "graph.db") as team:
            bench_graph(team, args.entities, queries, args.provider)
        with Team("bench-plan", Path(tmp) / "plan.db") as team:
            bench_planning(team, 300 if args.quick else 2_000, 100 if args.quick else 1_000)


if __name__ == "__main__":
    main()
