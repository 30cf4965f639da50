"""Vector store costs: top-10 over 100k x 384 (exact, batched, inverted file), adds,
embeddings, qdrant's local mode.

Run: .venv/bin/python benchmarks/bench_vector.py [--quick]

``index="auto"`` at 300,000 and 1,000,000 vectors is measured by ``bench_vector_scale.py``.
The corpus is synthetic but clustered like sentence embeddings (2,000 topics plus noise), so
recall figures of the approximate search mean something. ``run(quick)`` returns the figures
as a dict for other benchmark scripts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _results import record

from toolcards.tools.vector_store.embeddings import LocalMiniLMProvider, normalize_rows
from toolcards.tools.vector_store.index import InMemoryIndex
from toolcards.tools.vector_store.ivf_index import IvfIndex
from toolcards.tools.vector_store.records import MemoryState
from toolcards.tools.vector_store.store import VectorStore

DIM = 384


def corpus(n: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    topics = normalize_rows(rng.standard_normal((2000, DIM)).astype(np.float32))
    noise = rng.standard_normal((n + queries, DIM)).astype(np.float32) * 0.035
    points = normalize_rows(topics[rng.integers(0, 2000, n + queries)] + noise)
    return points[:n], points[n:]


def timed(search: Callable[[np.ndarray], Any], queries: np.ndarray) -> dict[str, float]:
    """p50 and p95 wall milliseconds per query, and the p50 and p95 CPU milliseconds (what a
    query costs when other processes compete for the cores)."""
    search(queries[0])
    wall, cpu = [], []
    for query in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        search(query)
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    wall.sort()
    cpu.sort()
    at95 = min(len(wall) - 1, int(len(wall) * 0.95))
    return {
        "p50": statistics.median(wall),
        "p95": wall[at95],
        "cpu": statistics.median(cpu),
        "cpu95": cpu[at95],
    }


def bench_search(n: int, n_queries: int) -> dict[str, float]:
    vecs, queries = corpus(n, n_queries)
    index = InMemoryIndex(DIM, capacity=n)
    start = time.perf_counter()
    index.add([f"doc-{i}" for i in range(n)], vecs)
    add_s = time.perf_counter() - start
    out: dict[str, float] = {"n": n, "bulk_add_per_s": n / add_s}
    exact = [{h[0] for h in index.search(q, 10)} for q in queries]
    t = timed(lambda q: index.search(q, 10), queries)
    out["exact_ms"], out["exact_p95_ms"], out["exact_cpu_ms"] = t["p50"], t["p95"], t["cpu"]
    start = time.perf_counter()
    index.search_batch(queries, 10)
    out["batched_ms_per_query"] = (time.perf_counter() - start) * 1e3 / len(queries)
    start = time.perf_counter()
    ivf_index = IvfIndex.build(*index.snapshot())
    ivf_index.calibrate(0.95)
    out["train_s"] = time.perf_counter() - start
    out["cells"], out["nprobe"] = ivf_index.cells, ivf_index.nprobe
    ivf = timed(lambda q: ivf_index.search(q, 10), queries)
    out["ivf_ms"], out["ivf_p95_ms"], out["ivf_cpu_ms"] = ivf["p50"], ivf["p95"], ivf["cpu"]
    found = [{h[0] for h in ivf_index.search(q, 10)} for q in queries]
    out["ivf_recall_at_10"] = float(
        np.mean([len(a & b) / 10 for a, b in zip(exact, found, strict=True)])
    )
    return out


def bench_adds(n: int) -> dict[str, float]:
    """Incremental adds through the durable store: rows written and time per added text."""
    vecs, _ = corpus(n + 200, 1, seed=1)
    state = MemoryState()
    store = VectorStore(model="bench", dimension=DIM, state=state)
    store.restore()
    for start in range(0, n, 1000):
        batch = [(f"d{i}", f"text {i}") for i in range(start, min(n, start + 1000))]
        todo = store.plan_upsert("c", batch)
        store.apply("c", todo, vecs[start : start + len(todo)])
    writes = state.writes
    start = time.perf_counter()
    for i in range(200):
        todo = store.plan_upsert("c", [(f"new{i}", f"new text {i}")])
        store.apply("c", todo, vecs[n + i : n + i + 1])
    elapsed = time.perf_counter() - start
    start = time.perf_counter()
    again = VectorStore(model="bench", dimension=DIM, state=state)
    again.restore()
    restore_s = time.perf_counter() - start
    return {
        "existing": n,
        "rows_per_add": (state.writes - writes) / 200,
        "add_us": elapsed * 5e3,
        "restore_s": restore_s,
        "restored": again.count("c"),
    }


def bench_embedding(sentences: int) -> dict[str, float]:
    provider = LocalMiniLMProvider()
    words = ["plan", "task", "review", "graph", "memory", "team", "report", "search"]
    rng = np.random.default_rng(2)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(6, 16)))) for _ in range(sentences)]
    provider.embed(texts[:8])  # load the model once
    start = time.perf_counter()
    provider.embed(texts)
    per_s = sentences / (time.perf_counter() - start)
    single = []
    for text in texts[:20]:
        start = time.perf_counter()
        provider.embed([text])
        single.append((time.perf_counter() - start) * 1e3)
    return {"sentences_per_s": per_s, "single_query_ms": statistics.median(single)}


def bench_qdrant(n: int) -> dict[str, float]:
    from toolcards.tools.vector_store.qdrant_index import QdrantIndex, make_client

    vecs, queries = corpus(n, 20, seed=3)
    ours = InMemoryIndex(DIM)
    ours.add([f"d{i}" for i in range(n)], vecs)
    ours_ms = timed(lambda q: ours.search(q, 10), queries)["p50"]
    index = QdrantIndex(make_client(), "bench", DIM)
    start = time.perf_counter()
    for lo in range(0, n, 1000):
        index.add([f"d{i}" for i in range(lo, min(n, lo + 1000))], vecs[lo : lo + 1000])
    add_s = time.perf_counter() - start
    median = timed(lambda q: index.search(q, 10), queries)["p50"]
    return {"n": n, "add_per_s": n / add_s, "search_ms": median, "inmemory_ms": ours_ms}


def run(quick: bool = False) -> dict[str, dict[str, float]]:
    return {
        "search": bench_search(1_000 if quick else 100_000, 20 if quick else 100),
        "adds": bench_adds(1_000 if quick else 50_000),
        "embedding": bench_embedding(8 if quick else 512),
        "qdrant_local": bench_qdrant(200 if quick else 10_000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, every section once")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cpus={os.cpu_count()} load(1m)={load:.1f} quick={args.quick}")
    figures = run(args.quick)
    s, a, e, q = (figures[k] for k in ("search", "adds", "embedding", "qdrant_local"))
    n = int(s["n"])
    print(f"inmemory {n} x {DIM}: bulk add {s['bulk_add_per_s']:,.0f} vectors/s")
    print(
        f"  exact top-10:   median {s['exact_ms']:.2f} ms  p95 {s['exact_p95_ms']:.2f} ms  "
        f"cpu {s['exact_cpu_ms']:.2f} ms"
    )
    print(f"  batched top-10: {s['batched_ms_per_query']:.2f} ms per query")
    print(
        f"  inverted file ({int(s['cells'])} cells, nprobe {int(s['nprobe'])}, "
        f"built and calibrated in {s['train_s']:.1f} s): median {s['ivf_ms']:.2f} ms  "
        f"p95 {s['ivf_p95_ms']:.2f} ms  "
        f"cpu {s['ivf_cpu_ms']:.2f} ms  recall@10 {s['ivf_recall_at_10']:.3f}"
    )
    print(
        f"durable add into {int(a['existing'])}: {a['rows_per_add']:.0f} row(s) written, "
        f"{a['add_us']:.0f} us per add; restore of {int(a['restored'])} vectors "
        f"{a['restore_s']:.2f} s (no embedding)"
    )
    print(
        f"local MiniLM int8: {e['sentences_per_s']:.0f} sentences/s batched, "
        f"{e['single_query_ms']:.1f} ms per single query"
    )
    print(
        f"qdrant local mode {int(q['n'])}: add {q['add_per_s']:,.0f}/s, "
        f"top-10 {q['search_ms']:.2f} ms (inmemory on the same data {q['inmemory_ms']:.2f} ms)"
    )
    size = f"{n // 1000}k x {DIM}"
    record(f"top-10 over {size}, exact, p50", s["exact_ms"], "ms", goal="< 5 ms")
    record(f"top-10 over {size}, inverted file, p50", s["ivf_ms"], "ms", goal="< 5 ms")
    record(f"top-10 over {size}, inverted file, recall@10", s["ivf_recall_at_10"], "")
    record(f"top-10 over {size}, batched, per query", s["batched_ms_per_query"], "ms")
    record("durable add: rows written", a["rows_per_add"], "rows", goal="1 (O(delta))")
    record("MiniLM int8 embedding, batched", e["sentences_per_s"], "sentences/s")
    record(
        f"top-10 over {int(q['n']) // 1000}k x {DIM}, exact, p50",
        q["inmemory_ms"],
        "ms",
        peer="qdrant-client local mode",
        peer_value=q["search_ms"],
    )


if __name__ == "__main__":
    main()
