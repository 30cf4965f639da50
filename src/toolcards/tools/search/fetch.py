"""Direct page fetch with the URL guard applied to the URL and to every redirect."""

from __future__ import annotations

import codecs
import re
import zlib

import anyio
import httpx

from toolcards.tools._common.url_guard import Resolver, check_url, pinned
from toolcards.tools._common.urls import URLRefused
from toolcards.tools.search.client import SearchError
from toolcards.tools.search.text import clean, html_to_text

MAX_REDIRECTS = 5
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml")
_TEXT_CODECS = re.compile(
    r"utf-(8|8-sig|16|16-[lb]e|32|32-[lb]e)|ascii|iso8859-\d+|cp\d+|mac-\w+|koi8-\w"
    r"|shift_jis\w*|euc_\w+|gb2312|gbk|gb18030|big5\w*|iso2022_\w+"
)
"""The charsets a page may name: text encodings decoded in one pass. A server's other choice
(``punycode`` decodes in quadratic time, ``base64`` is no text encoding) reads as UTF-8."""
_INFLATE = {"gzip": 31, "x-gzip": 31, "deflate": 15}
"""The content encodings read (one layer), and their zlib window bits."""


async def fetch_page(
    url: str,
    *,
    timeout: float,
    max_bytes: int,
    allow_private: bool,
    resolver: Resolver,
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[str, str]:
    """GET ``url`` (redirects followed by hand, each hop checked) -> (final URL, clean text),
    all of it within ``timeout`` seconds (a server sending a byte now and then is cut)."""
    try:
        with anyio.fail_after(timeout):
            return await _fetch(url, timeout, max_bytes, allow_private, resolver, transport)
    except TimeoutError:
        raise SearchError(f"fetching {url} took longer than {timeout:g} s") from None


async def _fetch(
    url: str,
    timeout: float,
    max_bytes: int,
    allow_private: bool,
    resolver: Resolver,
    transport: httpx.AsyncBaseTransport | None,
) -> tuple[str, str]:
    limits = httpx.Timeout(timeout, connect=min(timeout, 10.0))
    headers = {
        "User-Agent": "toolcards-web-fetch/1",
        "Accept": "text/html,text/*;q=0.9,*/*;q=0.1",
        "Accept-Encoding": "gzip, deflate",
    }
    async with httpx.AsyncClient(
        transport=transport, timeout=limits, follow_redirects=False, trust_env=False
    ) as client:
        current: object = url
        for _ in range(MAX_REDIRECTS + 1):
            try:
                checked = await check_url(current, resolver, allow_private=allow_private)
            except URLRefused as exc:
                raise SearchError(str(exc), retriable=True) from None
            target = checked.url
            try:
                request = client.build_request("GET", target, headers=headers)
                if checked.addresses:
                    request = pinned(request, checked.addresses[0])
                response = await client.send(request, stream=True)
            except httpx.TimeoutException:
                raise SearchError(f"fetching {target} timed out") from None
            except (httpx.HTTPError, httpx.InvalidURL, UnicodeError) as exc:  # idna's too
                raise SearchError(f"fetching {target} failed ({type(exc).__name__})") from None
            try:
                if response.is_redirect and "location" in response.headers:
                    current = _redirect_target(target, response.headers["location"])
                    continue
                raw, cut, kind, encoding = await _body(response, target, max_bytes)
            finally:
                await response.aclose()
            text = raw.decode(encoding, "replace")
            if "html" in kind or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
                title, text = html_to_text(text)
                text = f"# {title}\n{text}" if title else text
            else:
                text = clean(text)
            if cut:
                text += f"\n[... truncated: page larger than {max_bytes} bytes]"
            return target, text
    raise SearchError(f"too many redirects (more than {MAX_REDIRECTS}) from {url}")


def _redirect_target(current: str, location: str) -> str:
    """The URL a redirect points to; SearchError when the server sent an unusable one."""
    try:
        return str(httpx.URL(current).join(location))
    except (httpx.InvalidURL, ValueError, UnicodeError):
        raise SearchError(f"{current} redirected to a malformed URL") from None


async def _body(response: httpx.Response, url: str, max_bytes: int) -> tuple[bytes, bool, str, str]:
    """(at most ``max_bytes`` of the body, whether it was cut, content type, encoding)."""
    if response.status_code >= 400:
        raise SearchError(f"fetching {url} failed (HTTP {response.status_code})")
    kind = response.headers.get("content-type", "").lower()
    if kind and not kind.startswith(_TEXT_TYPES):
        raise SearchError(f"{url} is not a text page ({kind.split(';')[0]})")
    try:
        raw, cut = await _read_prefix(response, max_bytes)
    except httpx.TimeoutException:
        raise SearchError(f"fetching {url} timed out") from None
    except httpx.HTTPError as exc:
        raise SearchError(f"fetching {url} failed ({type(exc).__name__})") from None
    return raw, cut, kind, _text_encoding(response.charset_encoding)


def _text_encoding(name: str | None) -> str:
    """The codec to decode a page with: the one it names when it is a text encoding."""
    try:
        codec = codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"
    return codec if _TEXT_CODECS.fullmatch(codec) else "utf-8"


async def _read_prefix(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """At most ``max_bytes`` of the body as sent and inflated here, never more: one layer of
    gzip or deflate, inflated only as far as the cap (httpx inflates each chunk whole, and
    any number of layers: 684 bytes of ``gzip, gzip`` were 300 MiB)."""
    if response.is_stream_consumed:  # built in memory, its body read already (a mock's)
        return response.content[:max_bytes], len(response.content) > max_bytes
    named = response.headers.get("content-encoding", "").lower().split(",")
    encodings = [e.strip() for e in named if e.strip() not in ("", "identity")]
    if len(encodings) > 1 or (encodings and encodings[0] not in _INFLATE):
        raise SearchError(
            f"{response.url} came with a content encoding this fetch does not read "
            f"({', '.join(encodings)})"
        )
    inflater = zlib.decompressobj(_INFLATE[encodings[0]]) if encodings else None
    chunks: list[bytes] = []
    size = 0
    async for raw in response.aiter_raw():
        data = raw
        while data:
            if inflater is None:
                out, data = data, b""
            else:
                try:
                    out = inflater.decompress(data, max_bytes + 1 - size)
                except zlib.error:
                    raise SearchError(f"{response.url} sent a body that does not inflate") from None
                data = inflater.unconsumed_tail
            chunks.append(out)
            size += len(out)
            if size > max_bytes:
                return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False
