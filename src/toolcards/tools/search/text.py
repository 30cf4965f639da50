"""Cleaning and bounding of text that goes back to the model."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANK_LINES = re.compile(r"\n\s*\n(\s*\n)+")
_CONTROL = re.compile(
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x84\x86-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""C0 and C1 controls (an 8-bit CSI ``\\x9b`` drives a terminal as ``ESC [`` does) and bidi
controls (an override shows ``exe.txt`` reversed): removed."""
_LINE_BREAK = re.compile("[\x85\u2028\u2029]")
"""Next line and the line and paragraph separators: read as the line breaks they are."""
_DECIMAL_REF = re.compile(r"&#([0-9]{8,});?")
"""A decimal character reference of 8 digits or more: ``html.unescape`` reads its number with
``int()``, which raises ValueError past 4,300 digits (leading zeros included)."""
_READ = 4
"""Characters of a raw string cleaned per character kept: 7.9 MB of blank lines (12 KB of
gzip) took 2 s to clean, on the event loop, for the 1,000 characters of one snippet kept."""


def clean(text: object) -> str:
    """A string with control and bidi characters removed, other line breaks read as ``\\n``
    and runs of whitespace collapsed (a number read as its digits, any other value as no
    text)."""
    text = _LINE_BREAK.sub("\n", _CONTROL.sub("", _string(text)))
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _string(value: object) -> str:
    """``value`` if a string, a number's digits, else ``""``: never the ``str`` of a list or
    an object (one nested 975 deep raised RecursionError out of ``web_search``)."""
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, (int, float)) else ""


def clip(text: str, limit: int, unread: int = 0) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped:
    ``unread`` more characters that were dropped before it was cleaned, too."""
    dropped = max(0, len(text) - limit) + unread
    if not dropped:
        return text
    return text[:limit] + f"\n[... truncated: {dropped} more chars]"


def excerpt(value: object, limit: int) -> str:
    """``value`` cleaned and cut to ``limit`` characters, only its first ``_READ * limit``
    cleaned: what a remote service sends costs no more than what is kept of it."""
    raw = _string(value)
    read = _READ * limit
    return clip(clean(raw[:read]), limit, unread=max(0, len(raw) - read))


def _unescape(text: str) -> str:
    """``html.unescape`` that no character reference raises on: a number of 8 digits or more,
    leading zeros aside, is past U+10FFFF, read as U+FFFD as unescape reads a shorter one."""
    return unescape(_DECIMAL_REF.sub(_short_ref, text))


def _short_ref(found: re.Match[str]) -> str:
    digits = found.group(1).lstrip("0") or "0"
    return f"&#{digits};" if len(digits) < 8 else "\ufffd"


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
            self.parts.append(_unescape(data))

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
        page.title.append(_unescape(html[at : close.start() if close else len(html)]))
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
    answer = excerpt(data.get("answer"), per_result)
    if answer:
        lines += [f"Answer: {answer}", ""]
    entries = _entries(data, most)
    if not entries:
        lines.append("No results.")
    for i, item in enumerate(entries, 1):
        title = excerpt(item.get("title"), 200) or "(untitled)"
        lines.append(f"{i}. {title}\n   {excerpt(item.get('url'), 500)}")
        snippet = excerpt(item.get("content"), per_result)
        if snippet:
            lines.append("   " + snippet.replace("\n", "\n   "))
    return clip("\n".join(lines), limit)


def format_extract(data: dict[str, Any], *, url: str, limit: int) -> str:
    """The page a Tavily ``extract`` answer holds for ``url``, or why it holds none."""
    pages = pages_of(data, 1, per_page=limit)
    if not pages:
        reason = "\n".join(failures_of(data)) or "no content returned"
        return f"error: could not fetch {clip(url, 300)}\n{reason}"
    return format_pages(pages, limit=limit)


def format_crawl(data: dict[str, Any], *, url: str, most: int, per_page: int, limit: int) -> str:
    """The first ``most`` pages of a Tavily ``crawl`` answer, under a line naming their count."""
    pages = pages_of(data, most, per_page=per_page)
    if not pages:
        return f"No pages found when crawling {clip(url, 300)}."
    head = f"Crawled {len(pages)} page(s) from {clip(url, 300)}.\n\n"
    return head + format_pages(pages, limit=limit)


def format_pages(pages: list[tuple[str, str]], *, limit: int) -> str:
    """Pages (each cut to its own limit already) as ``## url`` sections, cut to ``limit``."""
    sections = [f"## {url}\n{body or '(empty)'}" for url, body in pages]
    return clip("\n\n".join(sections), limit)


def pages_of(data: dict[str, Any], most: int, *, per_page: int) -> list[tuple[str, str]]:
    """(url, content cut to ``per_page``) of the first ``most`` entries of a Tavily
    ``results`` list."""
    return [
        (
            excerpt(item.get("url"), 500),
            excerpt(item.get("raw_content") or item.get("content"), per_page),
        )
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
            lines.append(f"- {excerpt(item.get('url'), 300)}: {excerpt(item.get('error'), 200)}")
        else:
            lines.append(f"- {excerpt(item, 300)}")
    return lines
