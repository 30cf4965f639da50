"""Cleaning and bounding of text that goes back to the model."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANK_LINES = re.compile(r"\n\s*\n(\s*\n)+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def clean(text: Any) -> str:
    """A string with control characters removed and runs of whitespace collapsed."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    text = _CONTROL.sub("", text)
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated: {len(text) - limit} more chars]"


class _TextExtractor(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    _BREAK = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BREAK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag in self._BREAK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """The title and the visible text of an HTML document (scripts and styles dropped)."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    return clean(parser.title), clean("".join(parser.parts))


def format_search(data: dict[str, Any], *, per_result: int, limit: int) -> str:
    """Search results as short numbered entries: title, URL, snippet."""
    lines: list[str] = []
    answer = clean(data.get("answer"))
    if answer:
        lines += [f"Answer: {clip(answer, per_result)}", ""]
    results = data.get("results")
    entries = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
    if not entries:
        lines.append("No results.")
    for i, item in enumerate(entries, 1):
        title = clip(clean(item.get("title")) or "(untitled)", 200)
        lines.append(f"{i}. {title}\n   {clip(clean(item.get('url')), 500)}")
        snippet = clean(item.get("content"))
        if snippet:
            lines.append("   " + clip(snippet, per_result).replace("\n", "\n   "))
    return clip("\n".join(lines), limit)


def format_pages(pages: list[tuple[str, str]], *, per_page: int, limit: int) -> str:
    """Pages as ``## url`` sections, each cut to ``per_page`` and the whole to ``limit``."""
    sections = [f"## {clip(url, 500)}\n{clip(body, per_page) or '(empty)'}" for url, body in pages]
    return clip("\n\n".join(sections), limit)


def pages_of(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(url, cleaned content) of each entry of a Tavily ``results`` list."""
    results = data.get("results")
    if not isinstance(results, list):
        return []
    return [
        (clean(item.get("url")), clean(item.get("raw_content") or item.get("content")))
        for item in results
        if isinstance(item, dict)
    ]


def failures_of(data: dict[str, Any]) -> list[str]:
    """Readable lines for a Tavily ``failed_results`` list."""
    failed = data.get("failed_results")
    if not isinstance(failed, list):
        return []
    lines = []
    for item in failed[:20]:
        if isinstance(item, dict):
            lines.append(
                f"- {clip(clean(item.get('url')), 300)}: {clip(clean(item.get('error')), 200)}"
            )
        else:
            lines.append(f"- {clip(clean(item), 300)}")
    return lines
