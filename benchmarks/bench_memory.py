"""Shared-memory costs: knowledge-graph search, planning update and search, summary rendering.

Run: .venv/bin/python benchmarks/bench_memory.py [--quick] [--provider hash|local]
     [--entities N] [--part all|graph|scale|planning|summaries] [--corpus both|zipf|uniform]

Everything goes through a real team (tool actors, SQLite state, the ``#VectorStore`` actor):
``search_graph`` is timed end to end as a member calls it (query embedding, vector top-k,
in-process BM25F keyword index, fusion, rendering). The ``hash`` provider (default) keeps the
loads fast; ``--provider local`` uses the MiniLM model (slower to load, and each distinct query
is embedded once, then cached by the store).

The scale part grows one graph to 1k, 10k and 100k entities (``--quick``: 200 and 1,000) and
times ``search_graph`` hybrid at each size with the query embeddings cached, in CPU time of the
process: p50/p95, the ratio between the largest and the smallest size, the graph actor's
keyword ranking pruned beside scoring every match, the store's top-30 beside an exact numpy
scan of the same vectors, and the cost of embedding one query. It runs on two corpora: Zipf
frequencies over a 20,000-word vocabulary (as in real text), and 50 words drawn evenly (every
word in about 30% of the entities: the worst case for a keyword index).

The summaries part renders the system prompts of ``KnowledgeGraphTool`` and ``PlanningTool``
(a member's own tasks, and every task) at 1k, 10k and 100k entities / tasks and prints the
ratio between the largest and the smallest size: the rendering should not grow with the data.
"""

from __future__ import annotations

import os

# One BLAS thread: the scale part measures CPU time per query, and a second OpenBLAS thread
# spinning while it waits for work shows up as CPU a single small query never needed.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import bisect
import itertools
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy
from _results import record, record_scaling

from toolcards import KnowledgeGraphTool, PlanningTool, VectorStoreTool
from toolcards.runtime import Team
from toolcards.tools.knowledge_graph.actor import KnowledgeGraphActor
from toolcards.tools.knowledge_graph.graph import entity_text
from toolcards.tools.knowledge_graph.models import Entity, EntityCreate
from toolcards.tools.planning.actor import PlanningActor
from toolcards.tools.planning.models import TaskCreate
from toolcards.tools.vector_store.actor import VectorStoreActor, provider_for

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
        building = collection in info.get("building", ())
        declined = collection in info.get("index_notes", {})  # kept exact, and says why
        if kind != "exact" or not big or (declined and not building):
            return kind if kind != "exact" or not declined else "exact (graph declined)"
        if time.monotonic() > deadline:
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


class Corpus:
    """Entity texts and queries. ``zipf``: words of a 20,000-word vocabulary drawn with Zipf
    frequencies, as in real text (a few words in most entities, most words in a few);
    ``uniform``: the 50 words above drawn evenly (every word in about 30% of the entities:
    the worst case for any keyword index, where no exact top-k can skip postings)."""

    SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "di")
    SYLLABLES += ("ga", "fu", "zo", "re", "ba", "ni", "to", "la", "me", "xu")

    def __init__(self, kind: str, seed: int = 7) -> None:
        self.kind = kind
        self.rng = random.Random(seed)
        if kind == "zipf":
            found = {
                "".join(self.rng.choice(self.SYLLABLES) for _ in range(self.rng.randint(2, 4)))
                for _ in range(30_000)
            }
            self.words = sorted(found)[:20_000]
            self.rng.shuffle(self.words)
            weights = (1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words)))
            self.cumulative = list(itertools.accumulate(weights))
        else:
            self.words, self.cumulative = WORDS, []

    def sentence(self, n: int) -> str:
        if not self.cumulative:
            return sentence(self.rng, n)
        top = self.cumulative[-1]
        picks = (bisect.bisect_left(self.cumulative, self.rng.random() * top) for _ in range(n))
        return " ".join(self.words[i] for i in picks)

    def entity(self, i: int) -> dict[str, Any]:
        kind = self.rng.choice(KINDS)
        return {
            "name": f"{kind.lower()}-{i:06d}",
            "entity_type": kind,
            "description": self.sentence(12),
            "observations": [self.sentence(6)],
        }


def cpu_timed(fn: Callable[[], Any], rounds: int) -> list[float]:
    """CPU seconds of the whole process (every thread: caller and actors) per call: on a
    loaded machine wall time measures the other processes."""
    samples = []
    for _ in range(rounds):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return samples


SCALE_ROWS = (
    ("hybrid", "search_graph hybrid, query embedding cached"),
    ("pruned", "  graph actor: keyword (pruned) + fusion"),
    ("linear", "  graph actor: keyword scoring every match + fusion"),
    ("vector", "  #VectorStore top-30, embedding cached"),
    ("exact", "  exact numpy scan of the same vectors, top-30"),
    ("embed", "  embedding one query (not in the figures above)"),
)


class ScaleRun:
    """One team whose graph grows; :meth:`measure` times a search at its current size."""

    def __init__(self, team: Team, provider: str, corpus: Corpus, queries: int) -> None:
        card = VectorStoreTool(provider=provider)
        factory = team.bind([card, KnowledgeGraphTool()], "bench")
        self.search = {fn.__name__: fn for fn in factory.get_tools()}["search_graph"]
        store, graph = team.actor("#VectorStore"), team.actor("#KnowledgeGraphTool")
        assert store is not None and graph is not None
        self.store, self.graph = store, graph
        self.embedder = provider_for(card.config())
        self.corpus = corpus
        self.size = 0
        self.chunks: list[Any] = []
        self.texts = [corpus.sentence(corpus.rng.randint(2, 6)) for _ in range(queries)]

    def grow(self, size: int) -> str:
        """Add entities up to ``size``; the vector index kind once the store caught up."""
        for first in range(self.size, size, 1000):
            batch = [self.corpus.entity(i) for i in range(first, min(size, first + 1000))]
            self.graph.within(600).ask(
                KnowledgeGraphActor.update, create_entities=[EntityCreate(**e) for e in batch]
            )
            self.chunks.append(self.embedder.embed([entity_text(Entity(**e)) for e in batch]))
        self.size = size
        self.store.ask(VectorStoreActor.flush).result(timeout=900)
        return wait_for_index(self.store, "knowledge_graph")

    def measure(self) -> dict[str, tuple[float, float]]:
        texts, rounds = self.texts, len(self.texts)
        for text in texts:  # each query embedded once: the store caches it
            self.search(text, mode="vector")
        hits = {t: self.vector_hits(t) for t in texts}
        matrix = numpy.concatenate(self.chunks)
        vectors = self.embedder.embed(texts)
        calls: dict[str, Callable[[int], Any]] = {
            "hybrid": lambda n: self.search(texts[n], mode="hybrid"),
            "pruned": lambda n: self.graph_half(texts[n], hits[texts[n]], exhaustive=False),
            "linear": lambda n: self.graph_half(texts[n], hits[texts[n]], exhaustive=True),
            "vector": lambda n: self.vector_hits(texts[n]),
            "exact": lambda n: exact_top(matrix, vectors[n], 30),
            "embed": lambda n: self.embedder.embed([texts[n]]),
        }
        figures = {}
        for key, call in calls.items():
            count = iter(range(rounds))
            figures[key] = p50_p95(
                cpu_timed(lambda call=call, count=count: call(next(count)), rounds)
            )
        return figures

    def vector_hits(self, text: str) -> Any:
        return self.store.ask(VectorStoreActor.query, "knowledge_graph", text, 30).result(30)

    def graph_half(self, text: str, hits: Any, exhaustive: bool) -> Any:
        return self.graph.ask(
            KnowledgeGraphActor.search, text, "hybrid", 10, hits, exhaustive=exhaustive
        )


def bench_scale(sizes: list[int], queries: int, provider: str, corpus: Corpus) -> None:
    """``search_graph`` hybrid at growing sizes, query embeddings cached: CPU p50/p95 and the
    largest / smallest ratio, each half beside its baseline from the same run (the graph's
    keyword ranking pruned vs scoring every match; the store's vector top-k vs an exact numpy
    scan of the same vectors), and the cost of embedding a query."""
    label = f"{corpus.kind} vocabulary"
    rows: dict[int, dict[str, tuple[float, float]]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        Team(f"scale-{corpus.kind}", Path(tmp) / "graph.db") as team,
    ):
        run = ScaleRun(team, provider, corpus, queries)
        for size in sizes:
            kind = run.grow(size)
            rows[size] = shown = run.measure()
            print(f"{label}, {size:,} entities (vector index: {kind}), CPU ms p50 / p95:")
            for key, name in SCALE_ROWS:
                p50, p95 = shown[key]
                print(f"  {name:<58} {p50:8.3f} {p95:8.3f}")
            record_scaling(
                f"search_graph hybrid, CPU p50 ({label})",
                size,
                shown["hybrid"][0],
                "ms",
                size_unit="entities",
            )
    small, large = min(rows), max(rows)
    ratio = rows[large]["hybrid"][0] / rows[small]["hybrid"][0]
    p95 = rows[large]["hybrid"][1]
    print(
        f"{label}: search_graph hybrid CPU p50 {large:,} / {small:,} entities = {ratio:.2f}x "
        f"(goal < 5x); p95 at {large:,}: {p95:.2f} ms (goal < 10 ms); query embedding "
        f"({provider}) p50 {rows[large]['embed'][0]:.3f} ms"
    )
    record(
        f"search_graph hybrid at {large:,} entities ({label}), CPU p95",
        p95,
        "ms",
        goal="< 10 ms",
    )
    record(
        f"search_graph hybrid CPU p50, {large:,} / {small:,} entities ({label})",
        ratio,
        "x",
        goal="< 5x",
    )
    record(
        f"graph keyword + fusion at {large:,} entities ({label}), CPU p50",
        rows[large]["pruned"][0],
        "ms",
        peer="scoring every match",
        peer_value=rows[large]["linear"][0],
    )
    record(
        f"#VectorStore top-30 at {large:,} entities ({label}), CPU p50",
        rows[large]["vector"][0],
        "ms",
        peer="exact numpy scan",
        peer_value=rows[large]["exact"][0],
    )


def exact_top(matrix: Any, query: Any, k: int) -> Any:
    scores = matrix @ query
    best = scores.argpartition(len(scores) - k)[len(scores) - k :]
    return best[scores[best].argsort()[::-1]]


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
    parser.add_argument(
        "--part", default="all", choices=("all", "graph", "scale", "planning", "summaries")
    )
    parser.add_argument(
        "--corpus", default="both", choices=("both", "zipf", "uniform"), help="for --part scale"
    )
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
    if args.part in ("all", "scale"):
        sizes = [200, 1_000] if args.quick else [1_000, 10_000, 100_000]
        for kind in ("zipf", "uniform") if args.corpus == "both" else (args.corpus,):
            bench_scale(sizes, 20 if args.quick else 400, args.provider, Corpus(kind))
    if args.part in ("all", "summaries"):
        if args.quick:
            bench_summaries([100, 1_000], budget_s=0.1)
        else:
            bench_summaries([1_000, 10_000, 100_000])


if __name__ == "__main__":
    main()
