"""Direct page fetch of one checked URL; a redirect is named to the model, not followed."""

from __future__ import annotations

import codecs
import encodings
import pkgutil
import re
from encodings.aliases import aliases
from typing import NoReturn

import anyio
import httpx

from toolcards.core.tls import default_verify
from toolcards.tools._common.url_guard import CheckedURL, Resolver, check_url, pinned
from toolcards.tools._common.urls import URLRefused
from toolcards.tools.search.client import ACCEPT_ENCODING, SearchError, read_prefix
from toolcards.tools.search.text import clean, html_to_text

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml")
_TEXT_CODECS = re.compile(
    r"utf_(8|8_sig|16|16_[lb]e|32|32_[lb]e)|ascii|latin_1|iso8859_\d+|cp\d+|mac_\w+|koi8_\w"
    r"|shift_jis\w*|euc_\w+|gb2312|gbk|gb18030|big5\w*|iso2022_\w+"
)
"""The charsets a page may name (as codec modules): text encodings decoded in one pass. A
server's other choice (``punycode`` decodes in quadratic time, ``base64`` is no text encoding)
reads as UTF-8."""
_CODEC_MODULES = frozenset(m.name for m in pkgutil.iter_modules(encodings.__path__))
_CHARSET_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,40}")
_MAX_CONTENT_TYPE = 256
"""A longer Content-Type header names no charset (the page reads as UTF-8)."""


async def fetch_page(
    url: str,
    *,
    timeout: float,
    max_bytes: int,
    allow_private: bool,
    resolver: Resolver,
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[str, str]:
    """GET ``url`` (checked; a redirect is not followed) -> (the URL, clean text), all of it
    within ``timeout`` seconds (a server sending a byte now and then is cut)."""
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
    target = await _checked(url, resolver, allow_private)
    limits = httpx.Timeout(timeout, connect=min(timeout, 10.0))
    headers = {
        "User-Agent": "toolcards-web-fetch/1",
        "Accept": "text/html,text/*;q=0.9,*/*;q=0.1",
        "Accept-Encoding": ACCEPT_ENCODING,
    }
    async with httpx.AsyncClient(
        transport=transport,
        timeout=limits,
        follow_redirects=False,
        trust_env=False,
        verify=default_verify(httpx, trust_env=False),
    ) as client:
        try:
            request = client.build_request("GET", target.url, headers=headers)
            if target.addresses:
                request = pinned(request, target.addresses[0])
            response = await client.send(request, stream=True)
        except httpx.TimeoutException:
            raise SearchError(f"fetching {target.url} timed out") from None
        except (httpx.HTTPError, httpx.InvalidURL, UnicodeError) as exc:  # idna's too
            raise SearchError(f"fetching {target.url} failed ({type(exc).__name__})") from None
        try:
            if response.is_redirect and "location" in response.headers:
                await _refuse_redirect(
                    target.url, response.headers["location"], resolver, allow_private
                )
            raw, cut, kind, encoding = await _body(response, target.url, max_bytes)
        finally:
            await response.aclose()
    text = await anyio.to_thread.run_sync(_page_text, raw, kind, encoding, abandon_on_cancel=True)
    if cut:
        text += f"\n[... truncated: page larger than {max_bytes} bytes]"
    return target.url, text


async def _checked(url: object, resolver: Resolver, allow_private: bool) -> CheckedURL:
    try:
        return await check_url(url, resolver, allow_private=allow_private)
    except URLRefused as exc:
        raise SearchError(str(exc), retriable=True) from None


async def _refuse_redirect(
    url: str, location: str, resolver: Resolver, allow_private: bool
) -> NoReturn:
    """A redirect is never followed: the policy decided on ``url``, and an open redirect or an
    http->https upgrade leads to a URL it may deny (a glob tells any two spellings apart). The
    model is told the target in the form the policy will decide on, so fetching it is a call
    of its own; a target the guard refuses is refused as a URL the model sent would be."""
    target = await _checked(_redirect_target(url, location), resolver, allow_private)
    raise SearchError(f"{url} redirects to {target.url}; call web_fetch with that URL to read it")


def _page_text(raw: bytes, kind: str, encoding: str) -> str:
    """The clean text of a page body. Run in a worker thread, abandoned at the fetch's
    deadline: 2 MB of ``<p>`` (2 KB gzipped) took 4 s, which stalled the event loop
    when run on it, past any deadline."""
    text = raw.decode(encoding, "replace")
    if "html" in kind or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        title, text = html_to_text(text)
        return f"# {title}\n{text}" if title else text
    return clean(text)


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
        raw, cut = await read_prefix(response, max_bytes)
    except httpx.TimeoutException:
        raise SearchError(f"fetching {url} timed out") from None
    except httpx.HTTPError as exc:
        raise SearchError(f"fetching {url} failed ({type(exc).__name__})") from None
    return raw, cut, kind, _text_encoding(_charset(kind))


def _charset(content_type: str) -> str | None:
    """The charset a Content-Type header names, read in one pass of at most 256 characters.
    Not httpx's ``charset_encoding``: the stdlib email parser behind it took 6 s, on the event
    loop and past the fetch's deadline, on ``a="`` and 95 KB of ``;``."""
    if len(content_type) > _MAX_CONTENT_TYPE:
        return None
    for param in content_type.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip("\"'")
    return None


def _text_encoding(name: str | None) -> str:
    """The codec to decode a page with: the one it names when it is a text encoding. Only a
    codec module's own name reaches ``codecs.lookup``: the codec registry keeps every name it
    is asked for, found or not, for the life of the process (2,000 pages naming 90 KB charsets
    kept 180 MB)."""
    if not name or not _CHARSET_NAME.fullmatch(name):
        return "utf-8"
    normal = encodings.normalize_encoding(name.lower())
    module = aliases.get(normal) or aliases.get(normal.replace(".", "_")) or normal
    if module not in _CODEC_MODULES or not _TEXT_CODECS.fullmatch(module):
        return "utf-8"
    return codecs.lookup(module).name
