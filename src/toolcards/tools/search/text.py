"""Cleaning and bounding of text that goes back to the model."""

from __future__ import annotations

import re
from html import unescape
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


_MARKUP = re.compile(r"<[a-zA-Z/!?]")
"""Where a tag, comment or declaration may start; any other ``<`` is text."""
_TAG_START = re.compile(r"</?[a-zA-Z]")
_TAG = re.compile(r"""</?([a-zA-Z][^\s/>]*+)(?:[^>=]++|=\s*+(?:"[^"]*+"|'[^']*+'|(?!["'])))*+>""")
"""A start or end tag, ``>`` inside a quoted attribute value included. Possessive throughout:
a match never backtracks, and one fails only where the page ends inside the tag."""
_COMMENT_END = re.compile(r"--!?>")
_RAW_END = {name: re.compile(rf"</{name}(?=[\s/>])", re.I) for name in ("script", "style", "title")}
"""The elements whose content is text up to their end tag (no tags in it): a ``<`` in a
script is not markup."""
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
_BREAK = frozenset(
    {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article"}
)


class _Page:
    """The text and title gathered so far, and how deep inside skipped elements the scan is."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.title: list[str] = []
        self.skip = 0

    def text(self, data: str) -> None:
        if data and not self.skip:
            self.parts.append(unescape(data))

    def start(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip += 1
        elif tag in _BREAK:
            self.parts.append("\n")

    def end(self, tag: str) -> None:
        if tag in _SKIP and self.skip:
            self.skip -= 1
        elif tag in _BREAK:
            self.parts.append("\n")


def html_to_text(html: str) -> tuple[str, str]:
    """The title and the visible text of an HTML document (scripts and styles dropped).

    One forward scan, each character looked at a bounded number of times: html.parser
    rescans the unparsed rest at every ``<`` it cannot finish (120 KB of ``<a`` took
    19 s, on the event loop of the fetch). Markup the page ends inside is dropped, as a
    browser drops it."""
    page = _Page()
    pos = 0
    while (found := _MARKUP.search(html, pos)) is not None:
        page.text(html[pos : found.start()])
        pos = _markup(html, found.start(), page)
    page.text(html[pos:])
    return clean("".join(page.title)), clean("".join(page.parts))


def _markup(html: str, at: int, page: _Page) -> int:
    """Read the markup at ``html[at]`` (a ``<``) into ``page``; where the text after it starts."""
    if html.startswith("<!--", at):
        close = _COMMENT_END.search(html, at + 2)
        return close.end() if close else len(html)
    if not _TAG_START.match(html, at):  # ``<!...>``, ``<?...>``, ``</`` and no name
        gt = html.find(">", at)
        return gt + 1 if gt >= 0 else len(html)
    tag = _TAG.match(html, at)
    if tag is None:
        return len(html)  # the page ends inside this tag
    name = tag.group(1).lower()
    if tag.group().startswith("</"):
        page.end(name)
        return tag.end()
    page.start(name)
    if tag.group().endswith("/>"):
        page.end(name)
    elif name in _RAW_END:
        return _raw(html, tag.end(), name, page)
    return tag.end()


def _raw(html: str, at: int, name: str, page: _Page) -> int:
    """Read the content of a script, style or title opened just before ``html[at]``."""
    close = _RAW_END[name].search(html, at)
    if name == "title":
        page.title.append(unescape(html[at : close.start() if close else len(html)]))
    page.end(name)
    end_tag = _TAG.match(html, close.start()) if close else None
    return end_tag.end() if end_tag else len(html)


def _entries(data: dict[str, Any], most: int) -> list[dict[str, Any]]:
    """The first ``most`` entries of a Tavily ``results`` list (those that are objects): an
    answer holding millions costs no more than one holding ``most``."""
    results = data.get("results")
    if not isinstance(results, list):
        return []
    return [r for r in results[:most] if isinstance(r, dict)]


def format_search(data: dict[str, Any], *, per_result: int, limit: int, most: int) -> str:
    """The first ``most`` search results as short numbered entries: title, URL, snippet."""
    lines: list[str] = []
    answer = clean(data.get("answer"))
    if answer:
        lines += [f"Answer: {clip(answer, per_result)}", ""]
    entries = _entries(data, most)
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


def pages_of(data: dict[str, Any], most: int) -> list[tuple[str, str]]:
    """(url, cleaned content) of the first ``most`` entries of a Tavily ``results`` list."""
    return [
        (clean(item.get("url")), clean(item.get("raw_content") or item.get("content")))
        for item in _entries(data, most)
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
