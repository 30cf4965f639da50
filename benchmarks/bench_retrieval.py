"""Retrieval quality of the knowledge graph: known-item evals built from Python's standard
library docstrings and from Debian's package descriptions, recall@1/5/10/20 and MRR for
keyword, vector and hybrid search beside a plain BM25 baseline.

Run: .venv/bin/python benchmarks/bench_retrieval.py [--quick] [--docs 2000] [--queries 400]
     [--corpus both|stdlib|debian] [--debian FILE]

Every function and class of the standard library (read with ``ast``, nothing imported) whose
docstring has a one-line summary and a body is a candidate: the entity holds the body (name,
type, description), the query is the summary line, and the one relevant entity is the one it
came from. The summary says in a few words what the body says at length, mostly in other
words: a known-item task neither exact words nor meaning alone solves. Vectors come from the
local MiniLM model (offline, the ``vector`` extra), embedded from the same texts the
``#VectorStore`` receives; vector hits below the card's ``score_threshold`` are dropped, as in
``search_graph``. ``hybrid (rrf)`` is the former plain reciprocal-rank fusion, ``hybrid`` the
score-aware fusion ``search_graph`` uses now. MRR counts the first 10 hits.

The Debian eval is held out (nothing was tuned on it): a package's one-line synopsis is the
query, its long description the entity (named by the package, typed by its section). The
descriptions come from ``--debian FILE`` (a ``Translation-en`` or ``status`` file, plain or
lz4/gz/xz), else the ``Translation-en`` lists apt keeps when it fetched them, else the
installed packages (``/var/lib/dpkg/status``).

Each recall@k calls the search as ``search_graph(top_k=k)`` does (its candidate pools depend
on k); the last line says at which k hybrid is below the better single mode, if any.
"""

from __future__ import annotations

import argparse
import ast
import functools
import gzip
import lzma
import math
import os
import random
import re
import shutil
import subprocess
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
KS = (1, 5, 10, 20)
Ranked = list[tuple[str, float]]


def docstrings(root: Path) -> Iterator[tuple[str, str, str]]:
    """``(qualified name, kind, docstring)`` of every documented function and class under
    ``root``, in a stable order."""
    for path in python_files(root):
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


def python_files(folder: Path) -> Iterator[Path]:
    """The ``.py`` files under ``folder`` in the order ``sorted(folder.rglob("*.py"))`` gives,
    found as they are read (a scan that stops early lists no more folders than it reads)."""
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            yield from python_files(entry)
        elif entry.suffix == ".py":
            yield entry


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
    for name, kind, doc in docstrings(Path(sysconfig.get_paths()["stdlib"])):
        if scan is not None and len(items) >= scan:
            break
        parts = split(doc)
        if parts is not None and name not in items:
            items[name] = (kind, *parts)
    return sample(items, n_docs, n_queries, seed)


def sample(
    items: dict[str, tuple[str, str, str]], n_docs: int, n_queries: int, seed: int
) -> tuple[list[Entity], Ranked]:
    """``n_docs`` entities drawn from ``items`` (name -> kind, query, body) whose query no
    other item shares, and ``n_queries`` of them asked."""
    seen = Counter(query.lower() for _, query, _ in items.values())
    unique = [n for n, (_, q, _) in sorted(items.items()) if seen[q.lower()] == 1]
    rng = random.Random(seed)
    chosen = sorted(rng.sample(unique, min(n_docs, len(unique))))
    entities = [
        Entity(name=name, entity_type=items[name][0], description=items[name][2]) for name in chosen
    ]
    asked = rng.sample(chosen, min(n_queries, len(chosen)))
    return entities, [(items[name][1], name) for name in asked]


APT_LISTS = Path("/var/lib/apt/lists")
DPKG_STATUS = Path("/var/lib/dpkg/status")


def debian_source(given: Path | None) -> Path | None:
    """The file to read package descriptions from: ``given``, else apt's English
    translations (the largest), else the installed packages; None when there is none."""
    if given is not None:
        return given
    found = sorted(APT_LISTS.glob("*_i18n_Translation-en*"), key=lambda p: -p.stat().st_size)
    if found:
        return found[0]
    return DPKG_STATUS if DPKG_STATUS.exists() else None


def read_text(path: Path) -> str:
    """A plain, gzip, xz or lz4 (with the ``lz4`` command) file's text."""
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes()).decode("utf-8", "replace")
    if path.suffix == ".lz4":
        tool = shutil.which("lz4")
        if tool is None:
            raise SystemExit(f"{path} is lz4-compressed and the lz4 command is not installed")
        done = subprocess.run([tool, "-dc", "--", str(path)], capture_output=True, check=True)
        return done.stdout.decode("utf-8", "replace")
    return path.read_text(encoding="utf-8", errors="replace")


def packages(text: str) -> Iterator[tuple[str, str, str, str]]:
    """``(package, section, synopsis, long description)`` of each stanza with a description."""
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line[1:]
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        description = fields.get("Description-en") or fields.get("Description")
        if "Package" in fields and description:
            synopsis, _, body = description.partition("\n")
            lines = [line for line in body.splitlines() if line.strip() != "."]
            section = fields.get("Section", "package").rpartition("/")[2]
            yield fields["Package"], section, synopsis.strip(), " ".join(" ".join(lines).split())


def build_debian(
    n_docs: int, n_queries: int, source: Path, seed: int = 0
) -> tuple[list[Entity], Ranked]:
    """Entities (one per package: its long description) and ``(synopsis, package)`` pairs."""
    items: dict[str, tuple[str, str, str]] = {}
    for name, section, synopsis, body in packages(read_text(source)):
        words = synopsis.split()
        if len(words) < 3 or len(body.split()) < 15 or synopsis.lower() in body.lower():
            continue
        items.setdefault(name, (section, synopsis, body[:600]))
    return sample(items, n_docs, n_queries, seed)


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


def measure(rankings: dict[int, list[list[str]]], expected: list[str]) -> dict[str, float]:
    """recall@k of the ranking asked with top_k=k, and MRR@10."""
    out = {f"r@{k}": 0.0 for k in KS}
    out["mrr"] = 0.0
    for k in KS:
        for found, want in zip(rankings[k], expected, strict=True):
            out[f"r@{k}"] += want in found[:k]
    for found, want in zip(rankings[10], expected, strict=True):
        out["mrr"] += 1.0 / (found.index(want) + 1) if want in found[:10] else 0.0
    return {key: value / len(expected) for key, value in out.items()}


@functools.cache
def embedder() -> Callable[[list[str]], Any]:
    from toolcards.tools.vector_store.embeddings import LocalMiniLMProvider

    provider = LocalMiniLMProvider()
    return lambda texts: provider.embed(texts)


def run(entities: list[Entity], queries: Ranked) -> dict[str, dict[str, float]]:
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
    found: dict[str, dict[int, list[list[str]]]] = {m: {k: [] for k in KS} for m in MODES}
    for (query, _), qvec in zip(queries, qvecs, strict=True):
        sims = matrix @ qvec
        order = np.argsort(-sims, kind="stable")
        for k in KS:  # as search_graph(top_k=k) asks the store: max(3k, 30) hits above the floor
            top = order[: max(k * 3, 30)]
            hits = [(ids[i], float(sims[i])) for i in top if sims[i] >= param.score_threshold]
            for mode, (search_mode, fusion) in SEARCHES.items():
                result = graph.search(
                    query,
                    search_mode,
                    k,
                    hits,
                    rrf_k=param.rrf_k,
                    weights=(param.keyword_weight, param.vector_weight),
                    fusion=fusion,
                )
                found[mode][k].append([e.name for e, _ in result.entities])
            found["bm25"][k].append([d for d, _ in bm25.search(query, k)])
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
COLUMNS = (*(f"r@{k}" for k in KS), "mrr")


def report(name: str, figures: dict[str, dict[str, float]]) -> None:
    """Print one eval's table and the k at which hybrid is below the better single mode."""
    meta = figures.pop("_")
    print(
        f"{name}: {int(meta['docs'])} entities, {int(meta['queries'])} queries, local MiniLM "
        f"(embedded in {meta['embed_s']:.1f} s)"
    )
    print(f"  {'mode':<13}" + "".join(f"{c:>8}" for c in COLUMNS))
    for mode, row in figures.items():
        print(f"  {mode:<13}" + "".join(f"{row[c]:8.3f}" for c in COLUMNS))
    gaps = []
    for k in KS:
        column = f"r@{k}"
        better = max(figures["keyword"][column], figures["vector"][column])
        gap = figures["hybrid"][column] - better
        gaps.append(f"k={k} {gap:+.3f}")
        record(
            f"{name}, hybrid {column}",
            figures["hybrid"][column],
            "",
            peer="the better of keyword and vector alone",
            peer_value=better,
            goal=">= the peer",
        )
    print("  hybrid minus the better single mode: " + ", ".join(gaps))
    for mode, row in figures.items():
        record(f"{name}, {mode}, mrr", row["mrr"], "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="8 documents, 4 queries each, from the first 100 stdlib candidates and the "
        "installed packages",
    )
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--corpus", default="both", choices=("both", "stdlib", "debian"))
    parser.add_argument("--debian", type=Path, default=None, help="package descriptions file")
    args = parser.parse_args()
    docs, queries = (8, 4) if args.quick else (args.docs, args.queries)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cpus={os.cpu_count()} load(1m)={load:.1f}")
    if args.corpus in ("both", "stdlib"):
        evaluation = build_eval(docs, queries, scan=100 if args.quick else None)
        report("stdlib known-item eval", run(*evaluation))
    if args.corpus in ("both", "debian"):
        source = DPKG_STATUS if args.quick and args.debian is None else args.debian
        found = debian_source(source)
        if found is None or not found.exists():
            print("Debian eval skipped: no package descriptions here (--debian FILE)")
            return
        print(f"Debian descriptions from {found}")
        report("Debian known-item eval", run(*build_debian(docs, queries, found)))


if __name__ == "__main__":
    main()
