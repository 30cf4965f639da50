"""``make_provider``: an embedding provider by kind (local, hash, openai, azure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolcards.tools.vector_store.base import LOCAL_MODEL, EmbeddingProvider
from toolcards.tools.vector_store.embeddings import HashEmbeddingProvider, LocalMiniLMProvider

if TYPE_CHECKING:
    from pydantic import SecretStr


def make_provider(
    provider: str,
    *,
    model: str | None = None,
    dimension: int | None = None,
    batch_size: int = 32,
    max_length: int = 256,
    timeout_s: float = 30.0,
    base_url: str | None = None,
    api_key: SecretStr | None = None,
    azure_endpoint: str | None = None,
    azure_deployment: str | None = None,
    azure_api_version: str | None = None,
    transport: Any = None,
) -> EmbeddingProvider:
    """Build a provider by kind; ``dimension`` (when given) must match what it produces.

    ``api_key`` (openai, azure) defaults to the provider's environment variable;
    ``transport`` (openai, azure: an ``httpx.BaseTransport``) replaces the network.
    """
    found: EmbeddingProvider
    key = api_key.get_secret_value() if api_key is not None else None
    if provider == "local":
        if model not in (None, LOCAL_MODEL):
            raise ValueError(f"the local provider runs {LOCAL_MODEL} only, not {model!r}")
        found = LocalMiniLMProvider(max_length=max_length, batch_size=batch_size)
    elif provider == "hash":
        found = HashEmbeddingProvider(dimension or 256)
    elif provider == "openai":
        # lazy: httpx, ~3x python -c pass; only the openai provider
        from toolcards.tools.vector_store.openai_provider import OpenAIEmbeddingProvider

        found = OpenAIEmbeddingProvider(
            model=model or "text-embedding-3-small",
            dimension=dimension,
            api_key=key,
            batch_size=batch_size,
            timeout_s=timeout_s,
            base_url=base_url,
            transport=transport,
        )
    elif provider == "azure":
        # lazy: httpx, ~3x python -c pass; only the openai provider
        from toolcards.tools.vector_store.openai_provider import (
            DEFAULT_AZURE_API_VERSION,
            AzureOpenAIEmbeddingProvider,
        )

        if not azure_deployment:
            raise ValueError("the azure provider needs azure_deployment")
        found = AzureOpenAIEmbeddingProvider(
            deployment=azure_deployment,
            endpoint=azure_endpoint,
            api_version=azure_api_version or DEFAULT_AZURE_API_VERSION,
            model=model,
            dimension=dimension,
            api_key=key,
            batch_size=batch_size,
            timeout_s=timeout_s,
            transport=transport,
        )
    else:
        raise ValueError(f"unknown embedding provider {provider!r} (local, openai, azure or hash)")
    if dimension is not None and found.dimension != dimension:
        raise ValueError(f"dimension {dimension} does not match {found.model} ({found.dimension})")
    return found
