"""A small async Tavily client: bounded requests, errors as readable messages."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import httpx

from toolcards.core import outside_json
from toolcards.core.errors import ToolcardsError
from toolcards.core.tls import default_verify

T = TypeVar("T")

MAX_RESPONSE_BYTES = 8_000_000
"""A Tavily response larger than this is refused rather than parsed."""
MAX_VALUES = 10_000
"""Values a Tavily response may hold (as :func:`outside_json.over_values` counts them, the
text of strings aside), else it is refused unparsed: a real one holds about ten per result or
page, and a call asks for at most 100 (``max_results`` up to 20, a crawl's ``max_pages`` up to
100). 7.6 KB of gzip inflated to 2.6 M ``{}``, parsed into 180 MiB and a second of the loop."""
ACCEPT_ENCODING = "gzip, deflate"
"""The content encodings asked for: the ones :func:`read_prefix` inflates."""
_INFLATE = {"gzip": 31, "x-gzip": 31, "deflate": 15}
"""The content encodings read (one layer), and their zlib window bits."""
_RAW_SLACK = 64 << 10
"""Bytes a compressed body may be read past its cap: a stream of empty deflate blocks
inflates to nothing however long it runs."""


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

    async def post(
        self, endpoint: str, payload: dict[str, Any], read: Callable[[dict[str, Any]], T]
    ) -> T:
        """POST ``payload`` to ``/endpoint``; ``read`` of the object answered, SearchError on
        any failure. ``read`` runs in the worker thread that parses the answer, within the
        deadline: 7.9 MB of text in 3 values was cleaned on the event loop, after it, for 2 s."""
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        try:
            with anyio.fail_after(self._deadline):
                body, status = await self._send(endpoint, payload, headers)
                return await anyio.to_thread.run_sync(
                    _answer, endpoint, status, body, read, abandon_on_cancel=True
                )
        except TimeoutError:
            raise SearchError(f"Tavily {endpoint} timed out; try again later") from None

    async def _send(
        self, endpoint: str, payload: dict[str, Any], headers: dict[str, str]
    ) -> tuple[bytes, int]:
        """The response's body (bounded) and status; SearchError when it cannot be had."""
        try:
            async with (
                httpx.AsyncClient(
                    transport=self._transport,
                    timeout=self._timeout,
                    follow_redirects=False,
                    verify=default_verify(httpx),
                ) as client,
                client.stream(
                    "POST", f"{self._base_url}/{endpoint}", json=payload, headers=headers
                ) as response,
            ):
                body, cut = await read_prefix(response, MAX_RESPONSE_BYTES)
                if cut:
                    raise SearchError(
                        f"the response exceeded {MAX_RESPONSE_BYTES} bytes and was dropped"
                    )
                return body, response.status_code
        except httpx.TimeoutException:
            raise SearchError(f"Tavily {endpoint} timed out; try again later") from None
        except httpx.HTTPError as exc:
            raise SearchError(f"Tavily {endpoint} is unreachable ({type(exc).__name__})") from None


async def read_prefix(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """At most ``max_bytes`` of the body as sent and inflated here, and whether it was cut.

    One layer of gzip or deflate, inflated only as far as the cap: httpx inflates each chunk
    whole, and any number of layers (1,833 bytes of ``gzip, gzip`` were 2 GiB). Reading stops
    where the compressed stream ends (zlib kept, copying it at every chunk, all a server sent
    after it: ``gzip("hello")`` then zeros was read for 30 s) and ``_RAW_SLACK`` bytes as
    sent past the cap."""
    if response.is_stream_consumed:  # built in memory, its body read already (a mock's)
        return response.content[:max_bytes], len(response.content) > max_bytes
    inflater = _inflater(response)
    chunks: list[bytes] = []
    size = sent = 0
    async for raw in response.aiter_raw():
        sent += len(raw)
        data = raw
        while data:
            out, data = _inflate(inflater, data, max_bytes + 1 - size, response)
            chunks.append(out)
            size += len(out)
            if size > max_bytes:
                return b"".join(chunks)[:max_bytes], True
        if inflater is not None and inflater.eof:
            break  # what follows the compressed stream is not read
        if sent > max_bytes + _RAW_SLACK:
            return b"".join(chunks), True
    return b"".join(chunks), False


def _inflater(response: httpx.Response) -> zlib._Decompress | None:
    """A zlib inflater for the response's one content encoding, None when it has none."""
    named = response.headers.get("content-encoding", "").lower().split(",")
    encodings = [e.strip() for e in named if e.strip() not in ("", "identity")]
    if len(encodings) > 1 or (encodings and encodings[0] not in _INFLATE):
        raise SearchError(
            f"{response.url} came with a content encoding toolcards does not read "
            f"({', '.join(encodings)})"
        )
    return zlib.decompressobj(_INFLATE[encodings[0]]) if encodings else None


def _inflate(
    inflater: zlib._Decompress | None, data: bytes, room: int, response: httpx.Response
) -> tuple[bytes, bytes]:
    """At most ``room`` bytes inflated from ``data``, and the part of ``data`` not read yet."""
    if inflater is None:
        return data, b""
    try:
        return inflater.decompress(data, room), inflater.unconsumed_tail
    except zlib.error:
        raise SearchError(f"{response.url} sent a body that does not inflate") from None


def _answer(endpoint: str, status: int, body: bytes, read: Callable[[dict[str, Any]], T]) -> T:
    """``read`` of the object a response holds; SearchError for an error status, more than
    :data:`MAX_VALUES` values or anything but a JSON object (a worker thread's: megabytes take
    a while to count, parse and read)."""
    if status >= 400:
        raise _status_error(endpoint, status, body)
    if outside_json.over_values(body, MAX_VALUES):
        raise SearchError(f"Tavily {endpoint} returned more than {MAX_VALUES} values; dropped")
    try:
        data = outside_json.load_object(body)
    except ValueError as exc:
        raise SearchError(f"Tavily {endpoint} returned a response that is {exc}") from None
    return read(data)


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
        if outside_json.over_values(body, MAX_VALUES):
            raise ValueError("too many values")
        data = outside_json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace").strip()
    if isinstance(data, dict):
        detail = data.get("detail", data.get("error", ""))
        if isinstance(detail, dict):
            detail = detail.get("error", "")
        return str(detail)[:200]
    return ""
