"""SearchTool: ``web_search``, ``web_fetch`` and ``web_crawl`` over the Tavily HTTP API."""

from __future__ import annotations

import os
from collections.abc import Awaitable
from typing import Annotated, Any, ClassVar, Literal

import httpx
from pydantic import Field, PrivateAttr, SecretStr, field_validator

from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.channels import Channels
from toolcards.core.errors import RetriableError, ToolNotConfigured
from toolcards.core.params import BaseToolParam
from toolcards.core.pathargs import url_args
from toolcards.core.spec import annotate
from toolcards.core.trust import HostAccess, Reach
from toolcards.tools._common.url_guard import Resolver, check_url, system_resolver
from toolcards.tools._common.urls import URLRefused, normalize_url
from toolcards.tools.search.client import SearchError, TavilyClient
from toolcards.tools.search.fetch import fetch_page
from toolcards.tools.search.text import (
    clip,
    format_crawl,
    format_extract,
    format_pages,
    format_search,
)


def _fetched_url(url: str) -> str:
    """The URL the tool fetches for ``url``: the policy, grants and approvals decide on it."""
    return normalize_url(url).url


_URL_ARGS = url_args(_fetched_url)
"""``web_fetch`` and ``web_crawl`` take one ``url``; ``web_search`` has none (its domain
filters only narrow what the search service returns, nothing is fetched from them)."""


class WebSearch(BaseToolParam):
    """``web_search(query, ...)``: ranked results with title, URL and snippet."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})

    max_results: int = Field(default=5, ge=1, le=20)
    """Default and upper bound of the number of results."""
    search_depth: Literal["basic", "advanced"] = "basic"
    include_answer: bool = False
    """Ask Tavily for a short generated answer above the results."""
    snippet_chars: int = Field(default=1_000, ge=50)
    max_chars: int = Field(default=12_000, ge=500)


class WebFetch(BaseToolParam):
    """``web_fetch(url)``: the readable text of one page."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})

    backend: Literal["tavily", "direct"] = "tavily"
    """``tavily`` uses the extract endpoint; ``direct`` fetches the page from this process."""
    max_chars: int = Field(default=20_000, ge=500)
    max_bytes: int = Field(default=2_000_000, ge=1_000)
    """Direct backend only: bytes read from the page before it is cut."""


class WebCrawl(BaseToolParam):
    """``web_crawl(url, ...)``: pages of a site, starting at a URL."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})

    max_pages: int = Field(default=10, ge=1, le=100)
    max_depth: int = Field(default=2, ge=1, le=5)
    page_chars: int = Field(default=3_000, ge=200)
    max_chars: int = Field(default=30_000, ge=1_000)


class SearchTool(ToolCard):
    """Web search, page fetch and site crawl through Tavily.

    The API key comes from ``api_key`` (a secret that is never serialized) or from the
    environment variable named by ``api_key_env``. URLs reaching private, loopback, link-local
    or metadata addresses are refused unless ``allow_private`` is set.

    Loaded from data, another ``base_url`` (it receives the key), another ``api_key_env`` and
    ``allow_private`` need the host's trust (``HostTrust(urls=..., env=...,
    private_network=True)``).
    """

    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    """Never serialized: persisted cards use ``api_key_env``."""
    api_key_env: Annotated[
        str, HostAccess(Reach.ENV, "sends a host variable as the API key", to=("base_url",))
    ] = Field(default="TAVILY_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    base_url: Annotated[str, HostAccess(Reach.URL, "receives the host's search API key")] = (
        "https://api.tavily.com"
    )
    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    allow_private: Annotated[
        bool, HostAccess(Reach.NETWORK, "lets the model read loopback, private and metadata URLs")
    ] = False
    web_search: bool | WebSearch = True
    web_fetch: bool | WebFetch = True
    web_crawl: bool | WebCrawl = True

    _transport: httpx.AsyncBaseTransport | None = PrivateAttr(default=None)
    _resolver: Resolver | None = PrivateAttr(default=None)

    @field_validator("base_url")
    @classmethod
    def _http_base(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http(s) URL")
        return value.rstrip("/")

    # ---- plumbing ------------------------------------------------------------------------

    def _key(self) -> str | None:
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        return os.environ.get(self.api_key_env) or None

    def _client(self, tool: str) -> TavilyClient:
        key = self._key()
        if key is None:
            raise SearchError(
                f"{tool} is not configured: no Tavily API key (set the {self.api_key_env} "
                "environment variable); do not retry this tool",
                config=True,
            )
        return TavilyClient(
            key, base_url=self.base_url, timeout=self.timeout_seconds, transport=self._transport
        )

    async def _guard(self, url: object) -> str:
        """The canonical form of ``url`` to send; a retry when it is malformed or refused."""
        try:
            checked = await check_url(
                url, self._resolver or system_resolver, allow_private=self.allow_private
            )
        except URLRefused as exc:
            raise SearchError(str(exc), retriable=True) from None
        return checked.url

    @staticmethod
    async def _answer(work: Awaitable[str]) -> str:
        try:
            return await work
        except SearchError as exc:
            if exc.retriable:
                raise RetriableError(str(exc)) from None
            if exc.config:  # an error outcome on every surface, not a result
                raise ToolNotConfigured(str(exc)) from None
            return f"error: {exc}"

    # ---- tools ------------------------------------------------------------------------------

    def _search_tool(self, cfg: WebSearch) -> ToolFunc:
        async def web_search(
            query: str,
            max_results: int | None = None,
            topic: Literal["general", "news", "finance"] = "general",
            time_range: Literal["day", "week", "month", "year"] | None = None,
            include_domains: list[str] | None = None,
            exclude_domains: list[str] | None = None,
        ) -> str:
            """Search the web; returns numbered results with title, URL and snippet.

            Args:
                query: What to search for, in plain words.
                max_results: How many results to return (capped by the configuration).
                topic: The search category.
                time_range: Only results from this recent period.
                include_domains: Only results from these domains.
                exclude_domains: No results from these domains.
            """

            async def work() -> str:
                text = query.strip() if isinstance(query, str) else ""
                if not text:
                    raise SearchError("the query is empty", retriable=True)
                count = cfg.max_results if max_results is None else max_results
                payload: dict[str, Any] = {
                    "query": text[:400],
                    "max_results": max(1, min(int(count), cfg.max_results)),
                    "topic": topic,
                    "search_depth": cfg.search_depth,
                    "include_answer": cfg.include_answer,
                }
                if time_range:
                    payload["time_range"] = time_range
                if include_domains:
                    payload["include_domains"] = [str(d)[:253] for d in include_domains[:50]]
                if exclude_domains:
                    payload["exclude_domains"] = [str(d)[:253] for d in exclude_domains[:50]]
                return await self._client("web_search").post(
                    "search",
                    payload,
                    lambda data: format_search(
                        data,
                        per_result=cfg.snippet_chars,
                        limit=cfg.max_chars,
                        most=cfg.max_results,
                    ),
                )

            return await self._answer(work())

        return annotate(web_search, readonly=True, open_world=True)

    def _fetch_tool(self, cfg: WebFetch) -> ToolFunc:
        async def web_fetch(url: str) -> str:
            """Fetch one web page and return its readable text.

            Args:
                url: The http(s) URL of the page.
            """

            async def work() -> str:
                if cfg.backend == "direct":
                    final, text = await fetch_page(
                        url,
                        timeout=self.timeout_seconds,
                        max_bytes=cfg.max_bytes,
                        allow_private=self.allow_private,
                        resolver=self._resolver or system_resolver,
                        transport=self._transport,
                    )
                    page = (clip(final, 500), clip(text, cfg.max_chars))
                    return format_pages([page], limit=cfg.max_chars)
                target = await self._guard(url)
                return await self._client("web_fetch").post(
                    "extract",
                    {"urls": [target], "format": "markdown"},
                    lambda data: format_extract(data, url=target, limit=cfg.max_chars),
                )

            return await self._answer(work())

        return annotate(web_fetch, readonly=True, open_world=True, paths=_URL_ARGS)

    def _crawl_tool(self, cfg: WebCrawl) -> ToolFunc:
        async def web_crawl(
            url: str,
            instructions: str | None = None,
            max_depth: int = 1,
            limit: int | None = None,
        ) -> str:
            """Crawl a website from a start URL and return the text of the pages found.

            Args:
                url: The http(s) URL to start from.
                instructions: What to look for, in plain words (focuses the crawl).
                max_depth: How many links deep to follow from the start page.
                limit: The most pages to return (capped by the configuration).
            """

            async def work() -> str:
                target = await self._guard(url)
                client = self._client("web_crawl")
                pages_cap = cfg.max_pages if limit is None else max(1, min(limit, cfg.max_pages))
                payload: dict[str, Any] = {
                    "url": target,
                    "max_depth": max(1, min(int(max_depth), cfg.max_depth)),
                    "limit": pages_cap,
                    "format": "markdown",
                }
                if instructions and instructions.strip():
                    payload["instructions"] = instructions.strip()[:1_000]
                return await client.post(
                    "crawl",
                    payload,
                    lambda data: format_crawl(
                        data,
                        url=target,
                        most=pages_cap,
                        per_page=cfg.page_chars,
                        limit=cfg.max_chars,
                    ),
                )

            return await self._answer(work())

        return annotate(
            web_crawl, readonly=True, open_world=True, long_running=True, paths=_URL_ARGS
        )

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "web_search": CardCapability(tool=_search_tool),
        "web_fetch": CardCapability(tool=_fetch_tool),
        "web_crawl": CardCapability(tool=_crawl_tool),
    }
