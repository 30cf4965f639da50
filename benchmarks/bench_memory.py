"""Shared-memory costs: knowledge-graph search, planning update and search, summary rendering.

Run: .venv/bin/python benchmarks/bench_memory.py [--quick] [--provider hash|local]
     [--entities N] [--part all|graph|planning|summaries]

Everything goes through a real team (tool actors, SQLite state, the ``#VectorStore`` actor):
``search_graph`` is timed end to end as a member calls it (query embedding, vector top-k,
in-process BM25F keyword index, reciprocal-rank fusion, rendering). The ``hash`` provider
(default) keeps the 10k-entity load fast; ``--provider local`` uses the MiniLM model (slower
to load, and each distinct query is embedded once, then cached by the store).

The summaries part renders the system prompts of ``KnowledgeGraphTool`` and ``PlanningTool``
(a member's own tasks, and every task) at 1k, 10k and 100k entities / tasks and prints the
ratio between the largest and the smallest size: the rendering should not grow with the data.
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

from _results import record, record_scaling

from toolcards import KnowledgeGraphTool, PlanningTool, VectorStoreTool
from toolcards.runtime import Team
from toolcards.tools.knowledge_graph.actor import KnowledgeGraphActor
from toolcards.tools.knowledge_graph.models import EntityCreate
from toolcards.tools.planning.actor import PlanningActor
from toolcards.tools.planning.models import TaskCreate
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


def wait_for_index(store: Any, collection: str, timeout: float = 900.0) -> str:
    """The collection's index kind once any approximate index the store builds is in place."""
    deadline = time.monotonic() + timeout
    while True:
        info = store.ask(VectorStoreActor.info)
        kind = str(info.get("indexes", {}).get(collection, "exact"))
        limit = info.get("approximate_above")
        big = limit is not None and info["collections"].get(collection, 0) >= limit
        if kind != "exact" or not big or time.monotonic() > deadline:
            return kind
        time.sleep(0.5)


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
    kind = wait_for_index(store, "knowledge_graph")
    print(f"  vector index: {kind} (ready after {time.perf_counter() - start:.1f} s)")
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


def render_ms(render: Callable[[], str], budget_s: float) -> float:
    """Median milliseconds of one rendering, over as many as fit in ``budget_s`` (5 to 500)."""
    render()
    samples: list[float] = []
    spent = 0.0
    while len(samples) < 5 or (spent < budget_s and len(samples) < 500):
        start = time.perf_counter()
        render()
        samples.append(time.perf_counter() - start)
        spent += samples[-1]
    return statistics.median(samples) * 1000


def grow_graph(team: Team, first: int, last: int) -> None:
    rng = random.Random(first)
    graph = team.actor("#KnowledgeGraphTool")
    assert graph is not None
    for lo in range(first, last, 1000):
        batch = [
            {
                "name": f"entity-{i:06d}",
                "entity_type": rng.choice(KINDS),
                "description": sentence(rng, 8),
                "is_root": i % 25 == 0,
            }
            for i in range(lo, min(last, lo + 1000))
        ]
        graph.within(600).ask(
            KnowledgeGraphActor.update, create_entities=[EntityCreate(**e) for e in batch]
        )


def grow_plan(team: Team, first: int, last: int) -> None:
    rng = random.Random(first)
    plan = team.actor("#PlanningTool")
    assert plan is not None
    owners = [None, "alice", "bob", "carol", "dave", "erin", "frank", "grace"]
    for lo in range(first, last, 1000):
        creates = [
            TaskCreate(description=sentence(rng, 8), owner=rng.choice(owners))
            for _ in range(lo, min(last, lo + 1000))
        ]
        plan.within(600).ask(PlanningActor.apply, rng.choice(owners[1:]), creates, [], [])


def bench_summaries(sizes: list[int], budget_s: float = 2.0) -> None:
    """System-prompt renderings (actor ask + text) of the graph and the plan, by size (each
    timed over ``budget_s`` seconds at most)."""
    with Team("bench-summaries", ":memory:") as team:
        alice = team.bind([KnowledgeGraphTool(vector_store=False)], "alice")
        (graph_prompt,) = alice.get_system_prompts()
        mine = team.bind([PlanningTool(vector_store=False)], "alice").get_system_prompts()[0]
        every = team.bind(
            [PlanningTool(vector_store=False, get_planning={"filter_by_agent": False})], "bob"
        ).get_system_prompts()[0]
        for prompt in (graph_prompt, mine, every):
            prompt()  # binds the card's actor
        rows: list[tuple[int, float, float, float]] = []
        done = 0
        for size in sizes:
            grow_graph(team, done, size)
            grow_plan(team, done, size)
            done = size
            rows.append((size, *(render_ms(p, budget_s) for p in (graph_prompt, mine, every))))
    print("system prompt rendering (ask + render), median ms:")
    print(f"  {'size':>8}  {'graph':>8}  {'plan (own)':>10}  {'plan (all)':>10}")
    for size, graph_ms, mine_ms, every_ms in rows:
        print(f"  {size:>8}  {graph_ms:8.3f}  {mine_ms:10.3f}  {every_ms:10.3f}")
        record_scaling("graph summary render", size, graph_ms, "ms", size_unit="entities")
        record_scaling("plan summary render (own tasks)", size, mine_ms, "ms", size_unit="tasks")
    small, large = rows[0], rows[-1]
    names = ("graph summary", "plan summary (own tasks)", "plan summary (all tasks)")
    for n, name in enumerate(names, start=1):
        ratio = large[n] / small[n]
        print(f"  {name}: {large[0]} / {small[0]} = {ratio:.2f}x")
        record(f"{name} render, {large[0]} items", large[n], "ms")
        record(f"{name} render, {large[0]} / {small[0]} items", ratio, "x", goal="<= 1.5x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every part once at tiny sizes (500 entities, 20 queries, 50 tasks, summaries at "
        "100 and 1,000)",
    )
    parser.add_argument("--provider", default="hash", choices=("hash", "local"))
    parser.add_argument("--entities", type=int, default=None, help="default 10,000 (500 quick)")
    parser.add_argument("--part", default="all", choices=("all", "graph", "planning", "summaries"))
    args = parser.parse_args()
    queries = 20 if args.quick else 1_000
    entities = args.entities or (500 if args.quick else 10_000)
    with tempfile.TemporaryDirectory() as tmp:
        if args.part in ("all", "graph"):
            with Team("bench-graph", Path(tmp) / "graph.db") as team:
                bench_graph(team, entities, queries, args.provider)
        if args.part in ("all", "planning"):
            with Team("bench-plan", Path(tmp) / "plan.db") as team:
                bench_planning(team, 50 if args.quick else 2_000, 20 if args.quick else 1_000)
    if args.part in ("all", "summaries"):
        if args.quick:
            bench_summaries([100, 1_000], budget_s=0.1)
        else:
            bench_summaries([1_000, 10_000, 100_000])


if __name__ == "__main__":
    main()
