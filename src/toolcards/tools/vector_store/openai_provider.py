"""OpenAI-compatible and Azure OpenAI embeddings over httpx: batched, bounded retries,
explicit timeouts. API keys are sent as headers only: never logged, never in an error.

httpx's timeout bounds each read, not a whole request: a service sending a byte just within
it held the store's embedding worker for as long as it liked (every later query waited), so
each attempt also has a deadline, and its answer a size cap (it was read whole)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import httpx

from toolcards.core import outside_json
from toolcards.core.tls import default_verify
from toolcards.tools.vector_store.base import (
    OPENAI_DIMENSIONS,
    EmbeddingError,
    normalize_rows,
    read_capped,
    require,
)

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

KNOWN_DIMENSIONS = OPENAI_DIMENSIONS
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_AZURE_API_VERSION = "2024-02-01"
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
BYTES_PER_VALUE = 64
"""Answer bytes allowed per embedding value: a float as JSON writes it (about 24 characters)
on a line of its own, indented, as OpenAI's pretty-printed answers put it, with room to spare."""
ANSWER_SLACK = 1 << 20
"""Answer bytes allowed besides the values (the envelope, an error message)."""


class OpenAIEmbeddingProvider:
    """``POST {base_url}/embeddings`` in batches of ``batch_size`` texts.

    The key comes from ``api_key`` or the environment variable ``OPENAI_API_KEY`` (read when
    the first request is made). 408/429/5xx and transport errors are retried ``max_retries``
    times with exponential backoff; anything else raises :class:`EmbeddingError` at once.
    ``transport`` replaces the network (``httpx.MockTransport`` in tests).
    """

    def __init__(
        self,
        *,
        model: str = "text-embedding-3-small",
        dimension: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        batch_size: int = 256,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_chars: int = 24_000,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not 1 <= batch_size <= 2048:
            raise ValueError("batch_size must be within 1..2048")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        known = KNOWN_DIMENSIONS.get(model)
        if dimension is None and known is None:
            raise ValueError(f"unknown dimension for model {model!r}: pass dimension=")
        self._model = model
        self._dimension = dimension or known or 0
        # text-embedding-3 models shorten vectors natively when asked for fewer dimensions.
        self._send_dimensions = dimension is not None and model.startswith("text-embedding-3")
        self._api_key = api_key
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip(
            "/"
        )
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.backoff_s = max(0.0, backoff_s)
        self.max_chars = max_chars
        self._transport = transport
        self.params: dict[str, str] = {}
        """Query parameters sent with every request."""
        self._client: httpx.Client | None = None
        self.requests = 0
        """Number of HTTP requests sent (retries included)."""

    @property
    def name(self) -> str:
        return "openai"

    @property
    def model(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        return self._dimension

    key_env = "OPENAI_API_KEY"
    """The environment variable read when no ``api_key`` is given."""

    def _auth(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def _body(self, chunk: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "input": chunk}
        if self._send_dimensions:
            body["dimensions"] = self._dimension
        return body

    def _http(self) -> httpx.Client:
        if self._client is None:
            key = self._api_key or os.environ.get(self.key_env)
            if not key:
                raise EmbeddingError(f"{self.key_env} is not set")
            self._client = httpx.Client(
                base_url=self.base_url,
                headers=self._auth(key),
                params=self.params,
                timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)),
                transport=self._transport,
                verify=default_verify(httpx),
            )
        return self._client

    def close(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def embed(self, texts: list[str]) -> Matrix:
        np = require("numpy")
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = [
                str(t)[: self.max_chars] or " " for t in texts[start : start + self.batch_size]
            ]
            out[start : start + len(chunk)] = self._request(chunk)
        return normalize_rows(out)

    def _request(self, chunk: list[str]) -> Matrix:
        body = self._body(chunk)
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            self.requests += 1
            try:
                status, answer = self._send(body, len(chunk) * self._dimension)
            except (httpx.TimeoutException, TimeoutError):
                last = f"timed out after {self.timeout_s:g} s"
                continue
            except httpx.TransportError as exc:
                last = f"transport error: {type(exc).__name__}"
                continue
            if status in _RETRY_STATUS:
                last = f"HTTP {status}"
                continue
            if status >= 400:
                raise EmbeddingError(
                    f"embedding request failed: HTTP {status}: {_error_message(answer)}"
                )
            return self._parse(answer, len(chunk))
        raise EmbeddingError(
            f"embedding request failed after {self.max_retries + 1} attempts: {last}"
        )

    def _send(self, body: dict[str, Any], values: int) -> tuple[int, bytes]:
        """One POST's status and answer, read within ``timeout_s`` (TimeoutError past it, the
        response closed) and up to a cap for ``values`` numbers (EmbeddingError past it)."""
        deadline = time.monotonic() + self.timeout_s
        cap = values * BYTES_PER_VALUE + ANSWER_SLACK
        headers = {"Accept-Encoding": "identity"}  # the cap counts the bytes as they come
        with self._http().stream("POST", "/embeddings", json=body, headers=headers) as response:
            answer = read_capped(response, cap, deadline, "embedding answer", clock=time.monotonic)
            return response.status_code, answer

    def _parse(self, answer: bytes, expected: int) -> Matrix:
        np = require("numpy")
        try:
            data = outside_json.loads(answer)["data"]
            rows = sorted(data, key=lambda item: int(item["index"]))
            matrix = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"malformed embedding response: {exc}") from exc
        if matrix.shape != (expected, self._dimension):
            raise EmbeddingError(
                f"embedding response has shape {matrix.shape}, expected "
                f"({expected}, {self._dimension})"
            )
        result: Matrix = matrix
        return result


class AzureOpenAIEmbeddingProvider(OpenAIEmbeddingProvider):
    """Azure OpenAI: ``POST {endpoint}/openai/deployments/{deployment}/embeddings
    ?api-version={api_version}`` with the key in the ``api-key`` header.

    The key comes from ``api_key`` or ``AZURE_OPENAI_API_KEY``, the endpoint from ``endpoint``
    or ``AZURE_OPENAI_ENDPOINT``. ``model`` names the model the deployment serves (it decides
    the dimension when ``dimension`` is not given, and whether vectors are shortened); the
    service itself picks the model from the deployment. Batching, retries and errors are those
    of :class:`OpenAIEmbeddingProvider`.
    """

    key_env = "AZURE_OPENAI_API_KEY"

    def __init__(
        self,
        *,
        deployment: str,
        endpoint: str | None = None,
        api_version: str = DEFAULT_AZURE_API_VERSION,
        model: str | None = None,
        dimension: int | None = None,
        **kwargs: Any,
    ) -> None:
        if not deployment or "/" in deployment or "?" in deployment:
            raise ValueError(f"invalid Azure deployment name {deployment!r}")
        found = (endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or "").rstrip("/")
        if not found.startswith(("https://", "http://")):
            raise ValueError("set the Azure OpenAI endpoint (https://<resource>.openai.azure.com)")
        if dimension is None and model not in KNOWN_DIMENSIONS:
            raise ValueError(
                f"unknown dimension for Azure deployment {deployment!r}: pass dimension="
            )
        super().__init__(
            model=model or f"azure:{deployment}",
            dimension=dimension,
            base_url=f"{found}/openai/deployments/{deployment}",
            **kwargs,
        )
        self.deployment = deployment
        self.params = {"api-version": api_version}

    @property
    def name(self) -> str:
        return "azure"

    def _auth(self, key: str) -> dict[str, str]:
        return {"api-key": key}

    def _body(self, chunk: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"input": chunk}
        if self._send_dimensions:
            body["dimensions"] = self._dimension
        return body


def _error_message(answer: bytes) -> str:
    try:
        payload = outside_json.loads(answer)
        message = payload.get("error", {}).get("message") if isinstance(payload, dict) else None
    except (ValueError, AttributeError):
        message = None
    return str(message or answer[:300].decode("utf-8", "replace"))[:300]
