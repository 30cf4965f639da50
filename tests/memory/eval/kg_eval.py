"""Retrieval eval of the knowledge graph: recall@k of keyword, vector and hybrid search.

``evaluate(data, vector_query)`` works with any ``vector_query(text, top_k) -> [(doc_id,
cosine)]``; ``team_vector_query`` provides one backed by a real team ``#VectorStore``
(the local MiniLM model by default).

    python tests/memory/eval/kg_eval.py                    # local MiniLM through a team
    python tests/memory/eval/kg_eval.py --rrf-k 20 --weights 1,1.5 --threshold 0.1
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolcards.tools.knowledge_graph.card import SearchGraph
from toolcards.tools.knowledge_graph.graph import Graph
from toolcards.tools.knowledge_graph.models import Entity, Relation, SearchMode
from toolcards.tools.vector_store.actor import VectorStoreActor

DATA = Path(__file__).with_name("kg_eval.json")
COLLECTION = "knowledge_graph"
MODES: tuple[SearchMode, ...] = ("keyword", "vector", "hybrid")

VectorQuery = Callable[[str, int], list[tuple[str, float]]]


def load(path: Path = DATA) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def build_graph(data: dict[str, Any]) -> Graph:
    entities = [Entity.model_validate(e) for e in data["entities"]]
    relations = [Relation.model_validate(r) for r in data["relations"]]
    return Graph(entities, relations)


def evaluate(
    data: dict[str, Any],
    vector_query: VectorQuery,
    k: int = 5,
    rrf_k: float = 60.0,
    weights: tuple[float, float] = (1.0, 1.0),
    threshold: float = 0.0,
    graph: Graph | None = None,
) -> dict[str, Any]:
    """Recall@k per mode, overall and per query kind."""
    graph = graph or build_graph(data)
    hits: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    for q in data["queries"]:
        vectors = [h for h in vector_query(q["query"], max(k * 3, 30)) if h[1] >= threshold]
        expected = set(q["expected"])
        for mode in MODES:
            result = graph.search(q["query"], mode, k, vectors, rrf_k=rrf_k, weights=weights)
            found = {e.name for e, _ in result.entities}
            score = len(found & expected) / len(expected)
            for bucket in ("all", q["kind"]):
                hits[mode].setdefault(bucket, []).append(score)
    return {
        mode: {bucket: sum(v) / len(v) for bucket, v in sorted(buckets.items())}
        for mode, buckets in hits.items()
    }


@contextmanager
def team_vector_query(
    data: dict[str, Any], provider: str = "local", timeout: float = 120.0
) -> Iterator[VectorQuery]:
    """A vector query backed by a team ``#VectorStore`` holding the eval's entity texts."""
    from toolcards import VectorStoreTool
    from toolcards.runtime import Team
    from toolcards.tools._common.fusion import VectorLink
    from toolcards.tools.knowledge_graph.graph import ENTITY, entity_text

    graph = build_graph(data)
    with Team("kg-eval", ":memory:") as team:
        team.bind([VectorStoreTool.model_validate({"provider": provider})], member="eval")
        link = VectorLink(team, "#VectorStore", timeout=timeout)
        handle = link.handle()
        if handle is None:
            raise RuntimeError("the vector store is unavailable (is the vector extra installed?)")
        docs = [(ENTITY + e.name, entity_text(e)) for e in graph.entities.values()]
        handle.ask(VectorStoreActor.upsert, COLLECTION, docs)
        handle.ask(VectorStoreActor.flush).result(timeout=timeout)

        def query(text: str, top_k: int) -> list[tuple[str, float]]:
            found = link.query(COLLECTION, text, top_k)
            if found is None:
                raise RuntimeError("vector query failed")
            return found

        yield query


def _memo(query: VectorQuery) -> VectorQuery:
    seen: dict[tuple[str, int], list[tuple[str, float]]] = {}

    def cached(text: str, top_k: int) -> list[tuple[str, float]]:
        key = (text, top_k)
        if key not in seen:
            seen[key] = query(text, top_k)
        return seen[key]

    return cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="local")
    parser.add_argument("--k", type=int, default=5)
    defaults = SearchGraph()
    parser.add_argument("--rrf-k", type=float, default=defaults.rrf_k)
    parser.add_argument(
        "--weights",
        default=f"{defaults.keyword_weight},{defaults.vector_weight}",
        help="keyword,vector",
    )
    parser.add_argument("--threshold", type=float, default=defaults.score_threshold)
    parser.add_argument("--grid", action="store_true", help="also try a small fusion grid")
    args = parser.parse_args()
    kw, vec = (float(x) for x in args.weights.split(","))
    data = load()
    started = time.perf_counter()
    with team_vector_query(data, args.provider) as vector_query:
        report = evaluate(data, vector_query, args.k, args.rrf_k, (kw, vec), args.threshold)
        if args.grid:
            cached = _memo(vector_query)
            for rrf_k in (10.0, 30.0, 60.0):
                for weights in ((1.0, 1.0), (1.0, 1.5), (1.0, 2.0), (0.7, 1.0)):
                    for threshold in (0.0, 0.2, 0.3):
                        r = evaluate(data, cached, args.k, rrf_k, weights, threshold)["hybrid"]
                        print(
                            f"grid rrf_k={rrf_k:<4} weights={weights} threshold={threshold}: "
                            f"hybrid all={r['all']:.3f} id={r['identifier']:.3f} "
                            f"para={r['paraphrase']:.3f} mixed={r['mixed']:.3f}"
                        )
    print(
        f"{len(data['entities'])} entities, {len(data['queries'])} queries, "
        f"provider={args.provider} rrf_k={args.rrf_k} weights={kw},{vec} "
        f"threshold={args.threshold} ({time.perf_counter() - started:.1f} s)"
    )
    buckets = sorted(report["hybrid"])
    print(f"{'recall@' + str(args.k):<10}" + "".join(f"{b:>12}" for b in buckets))
    for mode in MODES:
        print(f"{mode:<10}" + "".join(f"{report[mode][b]:>12.3f}" for b in buckets))


if __name__ == "__main__":
    main()
