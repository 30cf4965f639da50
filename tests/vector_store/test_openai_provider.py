"""OpenAI embeddings over a mock transport: batching, retries, timeouts, errors."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import httpx
import numpy as np
import pytest

from toolcards.tools.vector_store import openai_provider
from toolcards.tools.vector_store.embeddings import EmbeddingError
from toolcards.tools.vector_store.openai_provider import OpenAIEmbeddingProvider


def _answer(request: httpx.Request, dim: int = 8) -> httpx.Response:
    body = json.loads(request.content)
    data = [
        {"index": i, "embedding": [float(len(t))] + [1.0] * (dim - 1)}
        for i, t in enumerate(body["input"])
    ]
    return httpx.Response(200, json={"data": list(reversed(data)), "model": body["model"]})


def _provider(handler: Any, **kw: Any) -> OpenAIEmbeddingProvider:
    kw.setdefault("api_key", "sk-test")
    kw.setdefault("backoff_s", 0.0)
    return OpenAIEmbeddingProvider(
        model="m", dimension=8, transport=httpx.MockTransport(handler), **kw
    )


def test_texts_are_sent_in_batches_and_kept_in_order() -> None:
    seen: list[list[str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["input"])
        return _answer(request)

    p = _provider(handler, batch_size=2)
    out = p.embed(["a", "bb", "ccc", "dddd", "eeeee"])
    assert seen == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    raw_first = out[:, 0] / out[:, 1]  # undo normalisation: first component is len(text)
    assert np.allclose(raw_first, [1, 2, 3, 4, 5])


def test_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    headers: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers["authorization"])
        return _answer(request)

    _provider(handler, api_key=None).embed(["x"])
    assert headers == ["Bearer sk-env"]


def test_missing_key_is_an_embedding_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbeddingError, match="OPENAI_API_KEY"):
        _provider(_answer, api_key=None).embed(["x"])


def test_rate_limit_is_retried_then_succeeds() -> None:
    statuses = iter([429, 503])

    def handler(request: httpx.Request) -> httpx.Response:
        status = next(statuses, 200)
        return _answer(request) if status == 200 else httpx.Response(status)

    p = _provider(handler, max_retries=2)
    assert p.embed(["x"]).shape == (1, 8)
    assert p.requests == 3


def test_client_error_fails_at_once_with_the_service_message() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "Incorrect API key"}})

    p = _provider(handler, max_retries=3)
    with pytest.raises(EmbeddingError, match="401.*Incorrect API key"):
        p.embed(["x"])
    assert p.requests == 1


def test_timeouts_are_retried_then_reported() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    p = _provider(handler, max_retries=1, timeout_s=0.5)
    with pytest.raises(EmbeddingError, match="timed out"):
        p.embed(["x"])
    assert p.requests == 2


def test_wrong_dimension_in_answer_is_rejected() -> None:
    p = _provider(lambda r: _answer(r, dim=4))
    with pytest.raises(EmbeddingError, match="shape"):
        p.embed(["x"])


def test_malformed_answer_is_rejected() -> None:
    p = _provider(lambda r: httpx.Response(200, json={"nope": 1}))
    with pytest.raises(EmbeddingError, match="malformed"):
        p.embed(["x"])


def test_text_embedding_3_requests_the_configured_dimension() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return _answer(request, dim=256)

    p = OpenAIEmbeddingProvider(
        model="text-embedding-3-small",
        dimension=256,
        api_key="k",
        transport=httpx.MockTransport(handler),
    )
    assert p.embed(["x"]).shape == (1, 256)
    assert bodies[0]["dimensions"] == 256


class Trickle(httpx.SyncByteStream):
    """An answer sent a byte per (fake) second, then valid: each read is quick, the whole is
    not (a trickling service held the store's only embedding worker for minutes)."""

    def __init__(self, clock: list[float], payload: bytes) -> None:
        self.clock = clock
        self.payload = payload
        self.sent = 0
        self.closed = 0

    def __iter__(self) -> Any:
        for _ in range(100):
            self.clock[0] += 1.0
            self.sent += 1
            yield b" "
        yield self.payload

    def close(self) -> None:
        self.closed += 1


def _payload(dim: int = 8) -> bytes:
    return json.dumps({"data": [{"index": 0, "embedding": [1.0] * dim}]}).encode()


def test_a_trickling_answer_ends_at_the_deadline_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(
        openai_provider, "time", SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep)
    )
    streams: list[Trickle] = []

    def handler(request: httpx.Request) -> httpx.Response:
        streams.append(Trickle(clock, _payload()))
        return httpx.Response(200, stream=streams[-1])

    p = _provider(handler, max_retries=1, timeout_s=3)
    with pytest.raises(EmbeddingError, match="timed out after 3 s"):
        p.embed(["x"])
    assert p.requests == 2
    assert [(s.sent, s.closed) for s in streams] == [(4, 1), (4, 1)]


def test_an_answer_past_its_cap_is_refused_unread() -> None:
    """A 400 MiB answer to one query was read whole: 44 -> 862 MiB of memory."""
    chunks = [b" " * 65536] * (openai_provider.ANSWER_SLACK // 65536 * 4) + [_payload()]
    read: list[int] = []

    def body() -> Any:
        for n, chunk in enumerate(chunks):
            read.append(n)
            yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body())

    p = _provider(handler, max_retries=2)
    with pytest.raises(EmbeddingError, match="exceeded .* bytes"):
        p.embed(["x"])
    assert p.requests == 1
    assert len(read) < len(chunks) // 3


def test_an_encoded_answer_is_refused() -> None:
    """The cap counts bytes as they come: an inflated answer could be any size."""

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept-encoding"] == "identity"
        return httpx.Response(200, content=b"x", headers={"content-encoding": "gzip"})

    with pytest.raises(EmbeddingError, match="gzip-encoded"):
        _provider(handler).embed(["x"])
