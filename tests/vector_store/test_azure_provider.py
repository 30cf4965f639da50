"""Azure OpenAI embeddings over a mock transport: URL, headers, batching, errors, the key."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from toolcards.tools.vector_store.base import EmbeddingError
from toolcards.tools.vector_store.card import VectorStoreTool
from toolcards.tools.vector_store.models import VectorStoreConfig
from toolcards.tools.vector_store.openai_provider import AzureOpenAIEmbeddingProvider
from toolcards.tools.vector_store.providers import make_provider

ENDPOINT = "https://contoso.openai.azure.com"
SECRET = "azure-secret-key-123"


def answer(request: httpx.Request, dim: int = 8) -> httpx.Response:
    body = json.loads(request.content)
    data = [
        {"index": i, "embedding": [float(len(t))] + [1.0] * (dim - 1)}
        for i, t in enumerate(body["input"])
    ]
    return httpx.Response(200, json={"data": list(reversed(data))})


def provider(handler: Any, **kw: Any) -> AzureOpenAIEmbeddingProvider:
    kw.setdefault("api_key", SECRET)
    kw.setdefault("backoff_s", 0.0)
    kw.setdefault("dimension", 8)
    return AzureOpenAIEmbeddingProvider(
        deployment="embed-small",
        endpoint=ENDPOINT + "/",
        api_version="2024-06-01",
        transport=httpx.MockTransport(handler),
        **kw,
    )


def test_requests_go_to_the_deployment_url_with_the_api_key_header() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    provider(handler).embed(["hello"])
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == (
        f"{ENDPOINT}/openai/deployments/embed-small/embeddings?api-version=2024-06-01"
    )
    assert request.headers["api-key"] == SECRET
    assert "authorization" not in request.headers
    assert json.loads(request.content) == {"input": ["hello"]}


def test_texts_are_sent_in_batches_and_kept_in_order() -> None:
    seen: list[list[str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["input"])
        return answer(request)

    out = provider(handler, batch_size=2).embed(["a", "bb", "ccc", "dddd", "eeeee"])
    assert seen == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    assert np.allclose(out[:, 0] / out[:, 1], [1, 2, 3, 4, 5])


def test_a_text_embedding_3_deployment_is_asked_for_the_configured_dimension() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return answer(request, dim=256)

    p = provider(handler, model="text-embedding-3-small", dimension=256)
    assert p.embed(["x"]).shape == (1, 256)
    assert bodies == [{"input": ["x"], "dimensions": 256}]
    assert (p.name, p.model) == ("azure", "text-embedding-3-small")


def test_throttling_is_retried_then_succeeds() -> None:
    statuses = iter([429, 503])

    def handler(request: httpx.Request) -> httpx.Response:
        status = next(statuses, 200)
        return answer(request) if status == 200 else httpx.Response(status)

    p = provider(handler, max_retries=2)
    assert p.embed(["x"]).shape == (1, 8)
    assert p.requests == 3


def test_a_rejected_key_fails_at_once_with_the_service_message_and_no_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        message = "Access denied due to invalid subscription key."
        return httpx.Response(401, json={"error": {"code": "401", "message": message}})

    p = provider(handler, max_retries=3)
    with pytest.raises(EmbeddingError, match="401.*invalid subscription key") as caught:
        p.embed(["x"])
    assert p.requests == 1 and SECRET not in str(caught.value)


def test_a_missing_deployment_answers_an_embedding_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": {"message": "DeploymentNotFound"}})

    with pytest.raises(EmbeddingError, match="404.*DeploymentNotFound"):
        provider(handler).embed(["x"])


def test_timeouts_are_retried_then_reported() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    p = provider(handler, max_retries=1, timeout_s=0.5)
    with pytest.raises(EmbeddingError, match="timed out"):
        p.embed(["x"])
    assert p.requests == 2


def test_key_and_endpoint_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "from-env")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://env.openai.azure.com")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    p = AzureOpenAIEmbeddingProvider(
        deployment="d", dimension=8, transport=httpx.MockTransport(handler)
    )
    p.embed(["x"])
    assert seen[0].headers["api-key"] == "from-env"
    assert str(seen[0].url).startswith("https://env.openai.azure.com/openai/deployments/d/")


def test_a_missing_key_is_an_embedding_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbeddingError, match="AZURE_OPENAI_API_KEY"):
        provider(answer, api_key=None).embed(["x"])


def test_make_provider_builds_the_azure_provider_from_the_config() -> None:
    config = VectorStoreConfig(
        provider="azure",
        azure_endpoint=ENDPOINT,
        azure_deployment="embed-large",
        model="text-embedding-3-large",
        api_key=SECRET,
    )
    found = make_provider(
        "azure",
        model=config.model,
        dimension=config.expected_dimension(),
        api_key=config.api_key,
        azure_endpoint=config.azure_endpoint,
        azure_deployment=config.azure_deployment,
        azure_api_version=config.azure_api_version,
    )
    assert isinstance(found, AzureOpenAIEmbeddingProvider)
    assert found.dimension == 3072 and config.model_name() == "text-embedding-3-large"
    assert found.base_url == f"{ENDPOINT}/openai/deployments/embed-large"
    assert found.params == {"api-version": "2024-02-01"}


@pytest.mark.parametrize(
    "fields",
    [
        {"azure_endpoint": ENDPOINT, "dimension": 8},  # no deployment
        {"azure_endpoint": ENDPOINT, "azure_deployment": "d"},  # unknown dimension
        {"azure_endpoint": "ftp://x", "azure_deployment": "d", "dimension": 8},
        {"azure_endpoint": ENDPOINT, "azure_deployment": "a/../b", "dimension": 8},
    ],
)
def test_an_incomplete_azure_card_fails_when_built(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        VectorStoreTool(provider="azure", **fields)


def test_the_key_is_never_serialised_shown_or_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    card = VectorStoreTool(
        provider="azure",
        azure_endpoint=ENDPOINT,
        azure_deployment="d",
        dimension=8,
        api_key=SECRET,
    )
    key = card.config().api_key
    assert key is not None and key.get_secret_value() == SECRET
    dumped = card.model_dump_json() + json.dumps(card.config().model_dump(mode="json"))
    assert SECRET not in dumped and SECRET not in repr(card) and SECRET not in repr(card.config())
    assert SECRET not in caplog.text
