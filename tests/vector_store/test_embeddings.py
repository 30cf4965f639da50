"""Embedding providers: the real local MiniLM model, the hashing provider, the factory."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from toolcards.tools.vector_store.embeddings import (
    HashEmbeddingProvider,
    LocalMiniLMProvider,
    vocab_path,
)
from toolcards.tools.vector_store.providers import make_provider

VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"


def test_bundled_vocab_is_the_bert_uncased_vocabulary() -> None:
    data = vocab_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == VOCAB_SHA256
    assert len(data.decode().splitlines()) == 30522


def test_tokenizer_produces_bert_uncased_ids(local_provider: LocalMiniLMProvider) -> None:
    # [CLS] hello world [SEP], lower-cased; "unaffable" splits into word pieces.
    assert local_provider.tokenize(["Hello World"]) == [[101, 7592, 2088, 102]]
    assert local_provider.tokenize(["unaffable"]) == [[101, 14477, 20961, 3468, 102]]


def test_similar_sentences_score_higher_than_unrelated(
    local_provider: LocalMiniLMProvider,
) -> None:
    v = local_provider.embed(
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The stock market fell sharply today.",
            "How do I reset my password?",
            "I forgot my login credentials and cannot sign in.",
        ]
    )
    sim = v @ v.T
    assert sim[0, 1] > 0.6
    assert sim[0, 1] > sim[0, 2] + 0.4
    assert sim[3, 4] > sim[3, 2] + 0.2


def test_vectors_are_unit_length_float32(local_provider: LocalMiniLMProvider) -> None:
    v = local_provider.embed(["one", "two words", ""])
    assert v.dtype == np.float32
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1.0, atol=1e-5)


def test_batching_does_not_change_vectors(local_provider: LocalMiniLMProvider) -> None:
    texts = ["short", "a considerably longer sentence that pads the short ones in its batch"]
    together = local_provider.embed(texts)
    alone = np.vstack([local_provider.embed([t]) for t in texts])
    assert np.all(np.sum(together * alone, axis=1) > 0.9999)


def test_huge_text_is_truncated_not_rejected(local_provider: LocalMiniLMProvider) -> None:
    v = local_provider.embed(["word " * 200_000])
    assert v.shape == (1, 384)
    assert len(local_provider.tokenize(["word " * 200_000])[0]) == 256


def test_empty_input_gives_empty_matrix(local_provider: LocalMiniLMProvider) -> None:
    assert local_provider.embed([]).shape == (0, 384)


def test_hash_provider_is_deterministic_and_lexical() -> None:
    p = HashEmbeddingProvider(128)
    a, b, c = p.embed(["red apple pie", "red apple pie", "blue whale song"])
    assert np.array_equal(a, b)
    assert float(a @ c) == pytest.approx(0.0, abs=1e-6)


def test_make_provider_rejects_a_wrong_dimension() -> None:
    with pytest.raises(ValueError, match="dimension"):
        make_provider("local", dimension=768)


def test_make_provider_rejects_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown embedding provider"):
        make_provider("word2vec")
