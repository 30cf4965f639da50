"""SearchTool: web search, page fetch and site crawl over the Tavily HTTP API."""

from toolcards.tools.search.card import SearchTool, WebCrawl, WebFetch, WebSearch

__all__ = ["SearchTool", "WebCrawl", "WebFetch", "WebSearch"]
