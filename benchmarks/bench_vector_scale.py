"""Top-10 vector search at scale: ``index="auto"`` beside an exact numpy scan and faiss HNSW.

Run: .venv/bin/python benchmarks/bench_vector_scale.py [--quick] [--sizes 300000,1000000]
     [--queries 200]

For each size, on one synthetic corpus clustered like sentence embeddings (2,000 topics plus
noise, 384 dimensions, float32; held-out queries drawn the same way):

- the exact scan: ``vectors @ query`` and ``argpartition`` in numpy (also the truth for recall);
- faiss ``IndexHNSWFlat`` as it comes (M=32, efConstruction=40, 2 build threads), its efSearch
  the smallest of 16 ... 512 reaching recall@10 0.95 on the held-out queries (tuned on the very
  answers it is scored against: an advantage the store does not have);
- ``index="auto"`` with the store's defaults: the ``AutoIndex`` each in-memory collection of the
  store is served from, fed in batches of 10,000 as a bulk upsert would; past 50,000 vectors it
  builds its inverted file and then its graph on its own thread (answering exactly meanwhile),
  catches each up with what arrived during the build, calibrates ``nprobe`` and ``ef_search`` on
  sample queries of its own, and serves the one whose queries cost less CPU.

Printed: p50/p95 wall time per query and its CPU time (p50/p95), recall@10, build time (wall and the
process's CPU: the build threads included), the resident memory the index adds after the build
and at its peak, the exact search's p50 while the graph was building, and the ratio of the
largest size's p50 to the smallest's. 1,000,000 vectors take ~15-30 min and ~8 GB on 2 cores.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time

import faiss
import numpy as np
from _results import record, record_scaling
from bench_vector import DIM, corpus, timed

from toolcards.tools.vector_store.indexing import AutoIndex, IndexBuilder
from toolcards.tools.vector_store.models import AUTO_EXACT_BELOW, VectorStoreConfig

BATCH = 10_000
KINDS = ("exact", "ivf", "hnsw")
EFFORT = {"exact": "", "ivf": "nprobe", "hnsw": "ef_search"}
"""The search effort each approximate index was calibrated to."""
PEER_EF = (16, 24, 32, 48, 64, 96, 128, 256, 512)


def rss_mb() -> float:
    """Resident memory of this process in MiB (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def reset_peak() -> None:
    """Start the peak resident memory (VmHWM) from the current one (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def peak_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def recall_at_10(truth: list[set[int]], found: list[set[int]]) -> float:
    return float(np.mean([len(t & f) / 10 for t, f in zip(truth, found, strict=True)]))


def exact_top10(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    scores = vectors @ query
    best = np.argpartition(-scores, 10)[:10]
    top: np.ndarray = best[np.argsort(-scores[best])]
    return top


def bench_exact(vectors: np.ndarray, queries: np.ndarray) -> tuple[dict[str, float], list]:
    truth = [set(exact_top10(vectors, q).tolist()) for q in queries]
    return timed(lambda q: exact_top10(vectors, q), queries), truth


def bench_faiss(
    vectors: np.ndarray, queries: np.ndarray, truth: list[set[int]], threads: int = 2
) -> dict[str, float]:
    faiss.omp_set_num_threads(threads)
    before = rss_mb()
    start, start_cpu = time.perf_counter(), time.process_time()
    graph = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
    graph.add(vectors)
    out = {"build_s": time.perf_counter() - start, "build_cpu_s": time.process_time() - start_cpu}
    out["memory_mb"] = rss_mb() - before
    faiss.omp_set_num_threads(1)  # one query at a time, as the store answers

    def top(query: np.ndarray) -> np.ndarray:
        rows: np.ndarray = graph.search(query[None, :], 10)[1][0]
        return rows

    for ef in PEER_EF:
        graph.hnsw.efSearch = ef
        out["ef"], out["recall"] = ef, recall_at_10(truth, [set(top(q).tolist()) for q in queries])
        if out["recall"] >= 0.95:
            break
    out.update(timed(top, queries))
    return out  # the graph is freed here


def bench_auto(
    vectors: np.ndarray,
    queries: np.ndarray,
    truth: list[set[int]],
    config: VectorStoreConfig,
    poll: float = 0.5,
    samples: int = 50,
) -> dict[str, float]:
    """``poll``: seconds between looks at the build (an exact search each, the first
    ``samples`` of them timed)."""
    builder = IndexBuilder("bench")
    index = AutoIndex(config, DIM, builder, collection="bench")
    n = vectors.shape[0]
    gc.collect()
    before = rss_mb()
    reset_peak()
    start, start_cpu = time.perf_counter(), time.process_time()
    for lo in range(0, n, BATCH):
        index.add([str(i) for i in range(lo, min(n, lo + BATCH))], vectors[lo : lo + BATCH])
    out = {"ingest_s": time.perf_counter() - start}
    meanwhile: list[float] = []
    while index.building:
        if len(meanwhile) < samples:  # the answers while the graph is built (exact)
            began = time.perf_counter()
            index.search(queries[len(meanwhile) % len(queries)], 10)
            meanwhile.append((time.perf_counter() - began) * 1e3)
        time.sleep(poll)
    out["build_s"] = time.perf_counter() - start
    out["build_cpu_s"] = time.process_time() - start_cpu
    out["kind"] = float(KINDS.index(index.kind))
    gc.collect()
    out["memory_mb"] = rss_mb() - before
    out["peak_mb"] = peak_mb() - before
    out["meanwhile_ms"] = statistics.median(meanwhile) if meanwhile else float("nan")
    effort = EFFORT[index.kind]
    out["ef"] = float(getattr(index.served, effort)) if effort else 0.0

    def top(query: np.ndarray) -> set[int]:
        return {int(item) for item, _ in index.search(query, 10)}

    out["recall"] = recall_at_10(truth, [top(q) for q in queries])
    out.update(timed(top, queries))
    out["note"] = float(index.note is not None)
    if index.note:
        print(f"  note: {index.note}")
    builder.stop()
    return out


def bench_size(
    n: int, n_queries: int, config: VectorStoreConfig, quick: bool = False
) -> dict[str, dict[str, float]]:
    """``quick``: faiss built on one thread (two spinning OpenMP threads on a loaded machine
    burn CPU waiting for each other), the store's build looked at every 20 ms (5 timed)."""
    vectors, queries = corpus(n, n_queries, seed=4)
    exact, truth = bench_exact(vectors, queries)
    peer = bench_faiss(vectors, queries, truth, threads=1 if quick else 2)
    auto = bench_auto(vectors, queries, truth, config, *((0.02, 5) if quick else ()))
    return {"exact": exact, "faiss": peer, "auto": auto}


def report(n: int, r: dict[str, dict[str, float]]) -> None:
    e, f, a = r["exact"], r["faiss"], r["auto"]
    kind = KINDS[int(a["kind"])]
    print(f"{n:,} x {DIM}:")
    print(
        f"  exact numpy scan     p50 {e['p50']:7.2f} ms  p95 {e['p95']:7.2f} ms  "
        f"cpu {e['cpu']:.2f}/{e['cpu95']:.2f} ms"
    )
    print(
        f"  faiss HNSW (M=32)    p50 {f['p50']:7.3f} ms  p95 {f['p95']:7.3f} ms  "
        f"cpu {f['cpu']:.3f}/{f['cpu95']:.3f} ms  "
        f"recall@10 {f['recall']:.3f} (efSearch {int(f['ef'])})  "
        f"build {f['build_s']:.0f} s (cpu {f['build_cpu_s']:.0f} s)  "
        f"memory {f['memory_mb']:.0f} MiB"
    )
    print(
        f'  index="auto" ({kind})  p50 {a["p50"]:7.3f} ms  p95 {a["p95"]:7.3f} ms  '
        f"cpu {a['cpu']:.3f}/{a['cpu95']:.3f} ms  "
        f"recall@10 {a['recall']:.3f} ({EFFORT[kind]} {int(a['ef'])})  "
        f"build {a['build_s']:.0f} s (cpu {a['build_cpu_s']:.0f} s, ingest {a['ingest_s']:.1f} s)"
        f"  memory {a['memory_mb']:.0f} MiB (peak {a['peak_mb']:.0f} MiB)  "
        f"exact meanwhile p50 {a['meanwhile_ms']:.1f} ms",
        flush=True,
    )
    size = f"{n // 1000}k x {DIM}"
    record_scaling('top-10 index="auto" p50', n, a["p50"], "ms", size_unit="vectors")
    record_scaling("top-10 exact numpy p50", n, e["p50"], "ms", size_unit="vectors")
    peer = "faiss HNSW M=32 (same run)"
    auto = f'index="auto" ({kind}) over {size}'
    for metric, value, unit, versus, goal in (
        ("top-10 p50", "p50", "ms", "exact", "< 2 ms at recall@10 >= 0.95"),
        ("top-10 p95", "p95", "ms", "faiss", None),
        ("top-10 CPU p50", "cpu", "ms", "faiss", None),
        ("recall@10", "recall", "", "faiss", ">= 0.95"),
        ("build (wall, 2 threads)", "build_s", "s", "faiss", None),
        ("build CPU", "build_cpu_s", "s", "faiss", None),
        ("memory after the build", "memory_mb", "MiB", "faiss", None),
    ):
        record(
            f"{auto}, {metric}",
            a[value],
            unit,
            peer="exact numpy scan (same run)" if versus == "exact" else peer,
            peer_value=r[versus][value],
            goal=goal,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300000,1000000", help="collection sizes, commas")
    parser.add_argument("--queries", type=int, default=200, help="held-out queries per size")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1,000 and 1,200 vectors with the graph threshold lowered to 1,000, 10 queries, "
        "faiss on one thread",
    )
    parser.add_argument("--m", type=int, default=None, help="hnsw_m (default: the store's)")
    parser.add_argument(
        "--ef-construction", type=int, default=None, help="hnsw_ef_construction (the store's)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    above = AUTO_EXACT_BELOW
    if args.quick:
        sizes, args.queries, above = [1_000, 1_200], 10, 1_000  # the smallest threshold
    knobs = {"hnsw_m": args.m, "hnsw_ef_construction": args.ef_construction}
    config = VectorStoreConfig(
        provider="hash",
        dimension=DIM,
        approximate_above=above,
        **{k: v for k, v in knobs.items() if v is not None},
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"cpus={os.cpu_count()} load(1m)={load:.1f} quick={args.quick} faiss={faiss.__version__} "
        f"auto: exact below {above:,}, M={config.hnsw_m}, "
        f"efConstruction={config.hnsw_ef_construction}, target recall "
        f"{config.hnsw_target_recall}"
    )
    results: dict[int, dict[str, dict[str, float]]] = {}
    for n in sizes:  # each size is printed as soon as it is measured
        results[n] = bench_size(n, args.queries, config, args.quick)
        report(n, results[n])
    if len(sizes) > 1:
        small, large = results[sizes[0]], results[sizes[-1]]
        ratio = large["auto"]["p50"] / small["auto"]["p50"]
        print(
            f'{sizes[-1]:,} / {sizes[0]:,} vectors: index="auto" p50 {ratio:.2f}x (goal <= 2x), '
            f"exact {large['exact']['p50'] / small['exact']['p50']:.2f}x, "
            f"faiss {large['faiss']['p50'] / small['faiss']['p50']:.2f}x"
        )
        record(
            f'index="auto" p50, {sizes[-1] // 1000}k / {sizes[0] // 1000}k vectors',
            ratio,
            "x",
            goal="<= 2x",
        )


if __name__ == "__main__":
    main()
