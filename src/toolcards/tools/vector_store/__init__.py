"""Vector store card, embedding providers and indexes (numpy & co. load lazily)."""

from toolcards.tools.vector_store.embeddings import (
    EmbeddingError,
    EmbeddingProvider,
    HashEmbeddingProvider,
    LocalMiniLMProvider,
    VectorExtraMissing,
    make_provider,
)
from toolcards.tools.vector_store.index import InMemoryIndex, VectorIndex
from toolcards.tools.vector_store.openai_provider import OpenAIEmbeddingProvider
from toolcards.tools.vector_store.qdrant_index import QdrantIndex
from toolcards.tools.vector_store.records import MemoryState, RecordStore
from toolcards.tools.vector_store.store import VectorStore

__all__ = [
    "EmbeddingError",
    "EmbeddingProvider",
    "HashEmbeddingProvider",
    "InMemoryIndex",
    "LocalMiniLMProvider",
    "MemoryState",
    "OpenAIEmbeddingProvider",
    "QdrantIndex",
    "RecordStore",
    "VectorExtraMissing",
    "VectorIndex",
    "VectorStore",
    "make_provider",
]
