"""Indexes: exact top-k, dimension checks, removal, and qdrant local-mode parity."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from toolcards.tools.vector_store.embeddings import HashEmbeddingProvider, normalize_rows
from toolcards.tools.vector_store.index import InMemoryIndex
from toolcards.tools.vector_store.qdrant_index import QdrantIndex, make_client


def _data(n: int, d: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return normalize_rows(rng.standard_normal((n, d)).astype(np.float32))


def _brute(matrix: np.ndarray, ids: list[str], q: np.ndarray, k: int) -> list[str]:
    scores = matrix @ q
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


def test_top_k_equals_brute_force() -> None:
    vecs, queries = _data(3000, 32), _data(20, 32, seed=1)
    ids = [f"id{i}" for i in range(len(vecs))]
    index = InMemoryIndex(32, capacity=16)
    index.add(ids, vecs)
    for q in queries:
        hits = index.search(q, 10)
        assert [h[0] for h in hits] == _brute(vecs, ids, q, 10)
        assert [h[1] for h in hits] == sorted((h[1] for h in hits), reverse=True)


def test_batched_search_equals_single_search() -> None:
    vecs, queries = _data(500, 16), _data(5, 16, seed=2)
    index = InMemoryIndex(16)
    index.add([str(i) for i in range(500)], vecs)
    batched = index.search_batch(queries, 7)
    single = [index.search(q, 7) for q in queries]
    assert [[h[0] for h in r] for r in batched] == [[h[0] for h in r] for r in single]
    assert np.allclose([[h[1] for h in r] for r in batched], [[h[1] for h in r] for r in single])


def _sparse(n: int, d: int, used: int, seed: int) -> np.ndarray:
    """Unit rows with ``used`` non-zero components each (as a hashed embedding of a few words)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((n, d), dtype=np.float32)
    for row in out:
        row[rng.choice(d, size=used, replace=False)] = rng.standard_normal(used)
    return normalize_rows(out)


def test_sparse_queries_return_the_exact_top_k() -> None:
    # queries with at most a quarter of the components non-zero are scored on those
    # components' rows only: the answer is the full scan's, also after growth (the first block
    # doubled, then blocks added) and removals across blocks
    d = 256
    vecs, queries = _sparse(6000, d, 24, seed=5), _sparse(30, d, 5, seed=6)
    ids = [f"id{i:05d}" for i in range(len(vecs))]
    index = InMemoryIndex(d, capacity=16, block=512)
    for start in range(0, len(ids), 1000):
        index.add(ids[start : start + 1000], vecs[start : start + 1000])
    assert index.remove(ids[::3]) == 2000
    keep = [i for i in range(len(ids)) if i % 3]
    kept, names = vecs[keep].astype(np.float64), [ids[i] for i in keep]
    for q in queries:
        assert np.count_nonzero(q) * 4 <= d
        hits = index.search(q, 10)
        assert [h[0] for h in hits] == _brute(kept, names, q.astype(np.float64), 10)
        assert np.allclose([h[1] for h in hits], np.sort(kept @ q)[::-1][:10], atol=1e-6)
    # a batch mixing sparse queries with a dense one is answered as each alone
    mixed = np.vstack([queries[:3], _data(1, d, seed=7)])
    batched = index.search_batch(mixed, 10)
    assert [[h[0] for h in r] for r in batched] == [
        [h[0] for h in index.search(q, 10)] for q in mixed
    ]
    dense = mixed[-1].astype(np.float64)
    assert [h[0] for h in batched[-1]] == _brute(kept, names, dense, 10)
    assert np.array_equal(index.vectors(names[::7]), vecs[keep][::7])
    labels, snapshot = index.snapshot()
    assert sorted(label for label in labels if label is not None) == names
    assert np.array_equal(snapshot, vecs[[int(str(label)[2:]) for label in labels]])


def test_hashed_texts_return_the_exact_top_k_within_float_rounding() -> None:
    # hashed embeddings of a few words (the hash provider's): many equal scores, which float32
    # sums in another order may split by a rounding step; every hit still scores as the full
    # scan says, and nothing left out scores more than the last hit
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(300)]
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    embedder = HashEmbeddingProvider(256)
    docs = [" ".join(rng.choice(words, size=18, p=weights)) for _ in range(4000)]
    vecs = embedder.embed(docs)
    ids = [f"d{i:05d}" for i in range(len(docs))]
    index = InMemoryIndex(256, capacity=16, block=1024)
    index.add(ids, vecs)
    exact = vecs.astype(np.float64)
    for text in (" ".join(rng.choice(words, size=rng.integers(2, 7))) for _ in range(40)):
        query = embedder.embed([text])[0]
        assert np.count_nonzero(query) * 4 <= 256  # scored on its components' rows
        truth = exact @ query.astype(np.float64)
        hits = index.search(query, 30)
        found = np.array([truth[int(name[1:])] for name, _ in hits])
        assert np.allclose([score for _, score in hits], found, atol=1e-6)
        assert np.allclose(found, np.sort(truth)[::-1][:30], atol=1e-6)


def test_a_repeated_id_in_one_add_keeps_its_last_vector() -> None:
    a, b, c = _data(3, 8)
    index = InMemoryIndex(8)
    index.add(["x", "y", "x"], np.vstack([a, b, c]))
    assert index.count() == 2
    assert index.search(c, 1) == [("x", pytest.approx(1.0, abs=1e-5))]
    assert np.allclose(index.vectors(["x", "y"]), np.vstack([c, b]))


def test_dimension_mismatch_is_rejected() -> None:
    index = InMemoryIndex(8)
    with pytest.raises(ValueError, match="dimension 8"):
        index.add(["a"], _data(1, 9))
    index.add(["a"], _data(1, 8))
    with pytest.raises(ValueError, match="dimension 8"):
        index.search(_data(1, 4)[0], 1)


def test_non_finite_vectors_are_rejected() -> None:
    bad = np.full((1, 4), np.nan, dtype=np.float32)
    with pytest.raises(ValueError, match="NaN"):
        InMemoryIndex(4).add(["a"], bad)


def test_removal_keeps_results_exact() -> None:
    vecs = _data(400, 16)
    ids = [f"id{i}" for i in range(400)]
    index = InMemoryIndex(16)
    index.add(ids, vecs)
    assert index.remove([*ids[::2], "missing"]) == 200
    keep = np.arange(1, 400, 2)
    q = _data(1, 16, seed=3)[0]
    expected = _brute(vecs[keep], [ids[i] for i in keep], q, 10)
    assert [h[0] for h in index.search(q, 10)] == expected
    assert index.count() == 200


def test_adding_an_existing_id_replaces_its_vector() -> None:
    a, b = _data(2, 8)
    index = InMemoryIndex(8)
    index.add(["x"], a[None])
    index.add(["x"], b[None])
    assert index.count() == 1
    assert index.search(b, 1)[0][1] == pytest.approx(1.0, abs=1e-5)


def test_top_k_beyond_size_and_zero() -> None:
    index = InMemoryIndex(8)
    index.add(["a", "b"], _data(2, 8))
    assert len(index.search(_data(1, 8)[0], 50)) == 2
    assert index.search(_data(1, 8)[0], 0) == []


def test_qdrant_local_mode_matches_inmemory() -> None:
    vecs, queries = _data(300, 24), _data(5, 24, seed=4)
    ids = [f"doc-{i}" for i in range(300)]
    mem = InMemoryIndex(24)
    mem.add(ids, vecs)
    qd = QdrantIndex(make_client(), "parity", 24)
    qd.add(ids, vecs)
    assert qd.count() == mem.count() == 300
    for q in queries:
        a, b = mem.search(q, 5), qd.search(q, 5)
        assert [h[0] for h in a] == [h[0] for h in b]
        assert np.allclose([h[1] for h in a], [h[1] for h in b], atol=1e-4)
    assert qd.remove(ids[:10]) == 10
    assert "doc-0" not in qd and "doc-10" in qd


def test_qdrant_rejects_a_collection_of_another_dimension(tmp_path: Path) -> None:
    client = make_client(path=str(tmp_path / "q"))
    QdrantIndex(client, "c", 8).add(["a"], _data(1, 8))
    with pytest.raises(ValueError, match="dimension 8"):
        QdrantIndex(client, "c", 16)
    client.close()


def test_qdrant_path_persists_points(tmp_path: Path) -> None:
    client = make_client(path=str(tmp_path / "q"))
    QdrantIndex(client, "c", 8).add(["a", "b"], _data(2, 8))
    client.close()
    again = make_client(path=str(tmp_path / "q"))
    assert QdrantIndex(again, "c", 8).count() == 2
    again.close()


def _chunked(handler: BaseHTTPRequestHandler, parts: Iterator[bytes]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for part in parts:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        handler.wfile.flush()
    handler.wfile.write(b"0\r\n\r\n")


_BOMB = gzip.compress(b"0" * (16 << 20), compresslevel=9)  # 16 MiB in 16 KB


def _gzip_bomb(handler: BaseHTTPRequestHandler) -> None:
    body = _BOMB
    handler.send_response(200)
    for name, value in [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]:
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _too_large(handler: BaseHTTPRequestHandler) -> None:
    _chunked(handler, (b" " * (1 << 20) for _ in range(17)))  # 17 MiB


def _trickle(handler: BaseHTTPRequestHandler) -> None:
    def drip() -> Iterator[bytes]:
        for _ in range(200):  # 20 s: the request's deadline (2 s here) ends it first
            yield b" "
            time.sleep(0.1)

    _chunked(handler, drip())


def _qdrant(handler: BaseHTTPRequestHandler) -> None:
    found = handler.command == "GET"  # GET .../exists, then PUT the collection
    data = json.dumps({"result": {"exists": False} if found else True, "status": "ok"}).encode()
    _chunked(handler, iter([data]))


@contextmanager
def _remote(answer: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[tuple[str, list[str]]]:
    """A qdrant server on 127.0.0.1 (the stand-in for one a data card names) and the
    ``Accept-Encoding`` of each request it got."""
    asked: list[str] = []

    class Server(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _any(self) -> None:
            asked.append(self.headers.get("Accept-Encoding", ""))
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with suppress(OSError):  # the client hung up
                answer(self)

        do_GET = do_PUT = do_POST = _any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_qdrant_server_is_read_through_the_bounded_transport() -> None:
    with _remote(_qdrant) as (url, asked):
        client = make_client(url=url)
        assert QdrantIndex(client, "c", 8).collection == "c"
        client.close()
    assert asked == ["identity", "identity"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("answer", "deadline", "refused"),
    [
        (_gzip_bomb, 10, "qdrant answer came gzip-encoded: not read"),
        (_too_large, 10, "qdrant answer exceeded 16777216 bytes: not read"),
        (_trickle, 2, "qdrant answer was not read within its deadline"),
    ],
    ids=["gzip", "too-large", "trickle"],
)
def test_a_qdrant_servers_answer_is_read_unencoded_capped_and_by_a_deadline(
    monkeypatch: pytest.MonkeyPatch,
    answer: Callable[[BaseHTTPRequestHandler], None],
    deadline: int,
    refused: str,
) -> None:
    """qdrant_url is no credential: a data card names any server. Its answers were asked for
    in gzip and read whole, inflated (1 MB of gzip cost 13 s and 4 GiB, then a JSONDecodeError
    escaped), each read bounded but not the whole (a byte every 5 s held it for good)."""
    from qdrant_client.http.exceptions import ResponseHandlingException

    monkeypatch.setattr(
        "toolcards.tools.vector_store.qdrant_index.TIMEOUT_S", deadline, raising=False
    )
    with _remote(answer) as (url, asked):
        client = make_client(url=url)
        with pytest.raises(ResponseHandlingException) as raised:
            QdrantIndex(client, "c", 8)
        client.close()
    assert str(raised.value) == refused
    assert asked == ["identity"]
