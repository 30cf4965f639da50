"""A small async Tavily client: bounded requests, errors as readable messages."""

from __future__ import annotations

from typing import Any

import anyio
import httpx

from toolcards.core import outside_json
from toolcards.core.errors import ToolcardsError

MAX_RESPONSE_BYTES = 8_000_000
"""A Tavily response larger than this is refused rather than parsed."""


class SearchError(ToolcardsError):
    """A failed request, with a message meant for the model.

    ``retriable`` is True when the model can fix the call (bad arguments, a refused URL);
    ``config`` when the card's configuration is at fault (no key, a rejected key): such a
    call ends with the outcome ``error`` rather than a text the model reads.
    """

    def __init__(self, message: str, *, retriable: bool = False, config: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.config = config


class TavilyClient:
    """POSTs JSON to the Tavily endpoints and returns the decoded object."""

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url.rstrip("/")
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._deadline = timeout
        """Seconds the whole request may take (httpx's timeouts bound each read: a server
        sending a byte just within each kept a request open for as long as it liked)."""
        self._transport = transport

    def __repr__(self) -> str:
        return f"TavilyClient(base_url={self._base_url!r})"

    async def post(self, endpoint: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` to ``/endpoint``; SearchError on any failure."""
        headers = {"Authorization": f"Bearer {self._api_key}", "Accept": "application/json"}
        try:
            with anyio.fail_after(self._deadline):
                body, status = await self._send(endpoint, payload, headers)
        except TimeoutError:
            raise SearchError(f"Tavily {endpoint} timed out; try again later") from None
        if status >= 400:
            raise _status_error(endpoint, status, body)
        try:
            data = outside_json.loads(body)
        except ValueError:
            raise SearchError(f"Tavily {endpoint} returned a response that is not JSON") from None
        if not isinstance(data, dict):
            raise SearchError(f"Tavily {endpoint} returned an unexpected {type(data).__name__}")
        return data

    async def _send(
        self, endpoint: str, payload: dict[str, Any], headers: dict[str, str]
    ) -> tuple[bytes, int]:
        """The response's body (bounded) and status; SearchError when it cannot be had."""
        try:
            async with (
                httpx.AsyncClient(
                    transport=self._transport, timeout=self._timeout, follow_redirects=False
                ) as client,
                client.stream(
                    "POST", f"{self._base_url}/{endpoint}", json=payload, headers=headers
                ) as response,
            ):
                return await _read_bounded(response), response.status_code
        except httpx.TimeoutException:
            raise SearchError(f"Tavily {endpoint} timed out; try again later") from None
        except httpx.HTTPError as exc:
            raise SearchError(f"Tavily {endpoint} is unreachable ({type(exc).__name__})") from None


async def _read_bounded(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise SearchError(f"the response exceeded {MAX_RESPONSE_BYTES} bytes and was dropped")
        chunks.append(chunk)
    return b"".join(chunks)


def _status_error(endpoint: str, status: int, body: bytes) -> SearchError:
    detail = _error_detail(body)
    suffix = f": {detail}" if detail else ""
    if status in (401, 403):
        return SearchError(
            f"Tavily rejected the API key (HTTP {status}); check TAVILY_API_KEY", config=True
        )
    if status == 429:
        return SearchError(f"Tavily rate limit or quota reached (HTTP 429){suffix}")
    if status in (400, 422):
        return SearchError(
            f"Tavily refused the {endpoint} request (HTTP {status}){suffix}", retriable=True
        )
    return SearchError(f"Tavily {endpoint} failed (HTTP {status}){suffix}")


def _error_detail(body: bytes) -> str:
    try:
        data = outside_json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace").strip()
    if isinstance(data, dict):
        detail = data.get("detail", data.get("error", ""))
        if isinstance(detail, dict):
            detail = detail.get("error", "")
        return str(detail)[:200]
    return ""
