"""Vector store card, embedding providers and indexes (numpy & co. load lazily).

Other cards reach a store through the team by actor name (``#VectorStore``), with the helpers
of :mod:`toolcards.tools.vector_store.client`; the classes here are the plain-Python API.
"""

from toolcards.tools.vector_store.base import (
    EmbeddingError,
    EmbeddingProvider,
    VectorExtraMissing,
)
from toolcards.tools.vector_store.card import VectorAdd, VectorSearch, VectorStoreTool
from toolcards.tools.vector_store.embeddings import HashEmbeddingProvider, LocalMiniLMProvider
from toolcards.tools.vector_store.index import InMemoryIndex, VectorIndex
from toolcards.tools.vector_store.models import VectorStoreConfig
from toolcards.tools.vector_store.openai_provider import (
    AzureOpenAIEmbeddingProvider,
    OpenAIEmbeddingProvider,
)
from toolcards.tools.vector_store.providers import make_provider
from toolcards.tools.vector_store.qdrant_index import QdrantIndex
from toolcards.tools.vector_store.records import MemoryState, RecordStore
from toolcards.tools.vector_store.store import VectorStore

__all__ = [
    "AzureOpenAIEmbeddingProvider",
    "EmbeddingError",
    "EmbeddingProvider",
    "HashEmbeddingProvider",
    "InMemoryIndex",
    "LocalMiniLMProvider",
    "MemoryState",
    "OpenAIEmbeddingProvider",
    "QdrantIndex",
    "RecordStore",
    "VectorAdd",
    "VectorExtraMissing",
    "VectorIndex",
    "VectorSearch",
    "VectorStore",
    "VectorStoreConfig",
    "VectorStoreTool",
    "make_provider",
]
