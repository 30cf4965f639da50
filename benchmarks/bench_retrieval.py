"""Retrieval quality of the knowledge graph: a known-item eval built from Python's standard
library docstrings, recall@1/5/10 and MRR for keyword, vector and hybrid search beside a plain
BM25 baseline.

Run: .venv/bin/python benchmarks/bench_retrieval.py [--quick] [--docs 2000] [--queries 400]

Every function and class of the standard library (read with ``ast``, nothing imported) whose
docstring has a one-line summary and a body is a candidate: the entity holds the body (name,
type, description), the query is the summary line, and the one relevant entity is the one it
came from. The summary says in a few words what the body says at length, mostly in other
words: a known-item task neither exact words nor meaning alone solves. Vectors come from the
local MiniLM model (offline, the ``vector`` extra), embedded from the same texts the
``#VectorStore`` receives; vector hits below the card's ``score_threshold`` are dropped, as in
``search_graph``. ``hybrid (rrf)`` is the former plain reciprocal-rank fusion, ``hybrid`` the
score-aware fusion ``search_graph`` uses now. MRR counts the first 10 hits.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import random
import re
import sysconfig
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _results import record

from toolcards.tools.knowledge_graph.card import SearchGraph
from toolcards.tools.knowledge_graph.graph import ENTITY, Graph, entity_text
from toolcards.tools.knowledge_graph.models import Entity

SKIP = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo"}
KS = (1, 5, 10)
Ranked = list[tuple[str, float]]


def docstrings(root: Path) -> Iterator[tuple[str, str, str]]:
    """``(qualified name, kind, docstring)`` of every documented function and class under
    ``root``, in a stable order."""
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP.intersection(rel.parts) or any(p.startswith("test") for p in rel.parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                doc = ast.get_docstring(node)
                if doc:
                    kind = "class" if isinstance(node, ast.ClassDef) else "function"
                    yield f"{module}.{node.name}", kind, doc


def split(doc: str) -> tuple[str, str] | None:
    """The summary line and the body of a docstring, when both are worth an eval item."""
    head, _, body = doc.strip().partition("\n\n")
    query = " ".join(head.split())
    body = " ".join(body.split())
    words = query.split()
    if not 4 <= len(words) <= 30 or len(body.split()) < 15 or ">>>" in body[:80]:
        return None
    if query.lower() in body.lower():
        return None
    return query, body[:600]


def build_eval(
    n_docs: int, n_queries: int, seed: int = 0, scan: int | None = None
) -> tuple[list[Entity], Ranked]:
    """Entities (one per docstring body) and ``(query, expected entity name)`` pairs; with
    ``scan``, the stdlib walk stops after that many candidates (the first modules only)."""
    items: dict[str, tuple[str, str, str]] = {}
    seen_queries: Counter[str] = Counter()
    for name, kind, doc in docstrings(Path(sysconfig.get_paths()["stdlib"])):
        if scan is not None and len(items) >= scan:
            break
        parts = split(doc)
        if parts is None or name in items:
            continue
        items[name] = (kind, *parts)
        seen_queries[parts[0].lower()] += 1
    unique = [n for n, (_, q, _) in sorted(items.items()) if seen_queries[q.lower()] == 1]
    rng = random.Random(seed)
    chosen = sorted(rng.sample(unique, min(n_docs, len(unique))))
    entities = [
        Entity(name=name, entity_type=items[name][0], description=items[name][2]) for name in chosen
    ]
    asked = rng.sample(chosen, min(n_queries, len(chosen)))
    return entities, [(items[name][1], name) for name in asked]


_WORD = re.compile(r"\w+")


class PlainBM25:
    """Okapi BM25 (k1 1.2, b 0.75) over lower-cased words: no stemming, stopwords or fields."""

    def __init__(self, docs: dict[str, str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.terms = {d: Counter(_WORD.findall(t.lower())) for d, t in docs.items()}
        self.lengths = {d: sum(c.values()) for d, c in self.terms.items()}
        self.avg = sum(self.lengths.values()) / max(1, len(self.lengths))
        df: Counter[str] = Counter()
        for counts in self.terms.values():
            df.update(counts.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def search(self, query: str, top_k: int) -> Ranked:
        words = set(_WORD.findall(query.lower()))
        scores: dict[str, float] = {}
        for doc, counts in self.terms.items():
            norm = self.k1 * (1 - self.b + self.b * self.lengths[doc] / self.avg)
            s = sum(
                self.idf[w] * counts[w] * (self.k1 + 1) / (counts[w] + norm)
                for w in words
                if w in counts
            )
            if s > 0:
                scores[doc] = s
        return sorted(scores.items(), key=lambda kv: -kv[1])[:top_k]


def measure(rankings: list[list[str]], expected: list[str]) -> dict[str, float]:
    """recall@1/5/10 and MRR@10 of one ranking per query."""
    out = {f"r@{k}": 0.0 for k in KS}
    out["mrr"] = 0.0
    for found, want in zip(rankings, expected, strict=True):
        rank = found.index(want) + 1 if want in found[:10] else None
        for k in KS:
            out[f"r@{k}"] += rank is not None and rank <= k
        out["mrr"] += 1.0 / rank if rank else 0.0
    return {key: value / len(expected) for key, value in out.items()}


def embedder() -> Callable[[list[str]], Any]:
    from toolcards.tools.vector_store.embeddings import LocalMiniLMProvider

    provider = LocalMiniLMProvider()
    return lambda texts: provider.embed(texts)


def run(n_docs: int, n_queries: int, scan: int | None = None) -> dict[str, dict[str, float]]:
    entities, queries = build_eval(n_docs, n_queries, scan=scan)
    graph = Graph(entities)
    ids = [ENTITY + e.name for e in entities]
    embed = embedder()
    start = time.perf_counter()
    matrix = np.concatenate(
        [
            embed([entity_text(e) for e in entities[i : i + 256]])
            for i in range(0, len(entities), 256)
        ]
    )
    qvecs = embed([q for q, _ in queries])
    embed_s = time.perf_counter() - start
    param = SearchGraph()
    expected = [name for _, name in queries]
    bm25 = PlainBM25({e.name: entity_text(e) for e in entities})
    found: dict[str, list[list[str]]] = {m: [] for m in MODES}
    for (query, _), qvec in zip(queries, qvecs, strict=True):
        sims = matrix @ qvec
        top = np.argsort(-sims)[:30]
        hits = [(ids[i], float(sims[i])) for i in top if sims[i] >= param.score_threshold]
        for mode, (search_mode, fusion) in SEARCHES.items():
            result = graph.search(
                query,
                search_mode,
                10,
                hits,
                rrf_k=param.rrf_k,
                weights=(param.keyword_weight, param.vector_weight),
                fusion=fusion,
            )
            found[mode].append([e.name for e, _ in result.entities])
        found["bm25"].append([d for d, _ in bm25.search(query, 10)])
    figures = {mode: measure(rankings, expected) for mode, rankings in found.items()}
    figures["_"] = {"docs": len(entities), "queries": len(queries), "embed_s": embed_s}
    return figures


SEARCHES: dict[str, tuple[Any, str]] = {
    "keyword": ("keyword", "scores"),
    "vector": ("vector", "scores"),
    "hybrid (rrf)": ("hybrid", "rrf"),
    "hybrid": ("hybrid", "scores"),
}
MODES = (*SEARCHES, "bm25")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="16 documents, 8 queries, drawn from the first 100 candidates of the stdlib walk",
    )
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=400)
    args = parser.parse_args()
    docs, queries = (16, 8) if args.quick else (args.docs, args.queries)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    figures = run(docs, queries, scan=100 if args.quick else None)
    meta = figures.pop("_")
    print(
        f"cpus={os.cpu_count()} load(1m)={load:.1f}: {int(meta['docs'])} stdlib docstrings, "
        f"{int(meta['queries'])} summary-line queries, local MiniLM "
        f"(embedded in {meta['embed_s']:.1f} s)"
    )
    print(f"  {'mode':<13}" + "".join(f"{k:>8}" for k in ("r@1", "r@5", "r@10", "mrr")))
    for mode, row in figures.items():
        print(f"  {mode:<13}" + "".join(f"{row[k]:8.3f}" for k in ("r@1", "r@5", "r@10", "mrr")))
    for mode, row in figures.items():
        for key in ("r@5", "mrr"):
            record(f"stdlib known-item eval, {mode}, {key}", row[key], "")


if __name__ == "__main__":
    main()
