"""mkdocs hook: on every guide page, the first mention of a public name in backticks
(`` `Team` ``, or a code span starting with it: `` `Team("t1")` ``, `` `Team.resume` ``) links
to its entry in the API reference (``docs/reference/``).

The names and their anchors come from the reference pages' ``::: toolcards....`` lines, so a
name added to the reference is linked everywhere without further work, and a broken anchor
fails ``mkdocs build --strict`` (``validation.anchors: warn``). A mention already written as a
link counts as the first one. Code blocks, inline code other than a bare name, and headings are
left alone.
"""

from __future__ import annotations

import posixpath
import re
from functools import cache
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
DIRECTIVE = re.compile(r"^::: (toolcards(?:\.\w+)+)\s*$", re.M)
FENCE = re.compile(r"^\s*```")


@cache
def targets() -> dict[str, tuple[str, str]]:
    """Public name -> (reference page, anchor); the first page that documents it wins."""
    found: dict[str, tuple[str, str]] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for path in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            found.setdefault(path.rsplit(".", 1)[1], (f"reference/{page.name}", path))
    return found


def link_first_mentions(markdown: str, src_uri: str) -> str:
    """``markdown`` with the first bare mention of each public name linked."""
    known = targets()
    if src_uri.startswith("reference/") or not known:
        return markdown
    names = "|".join(map(re.escape, sorted(known, key=len, reverse=True)))
    pattern = re.compile(r"(\[)?`(" + names + r")((?:[(.][^`]*)?)`(\]|\()?")
    done: set[str] = set()
    here = posixpath.dirname(src_uri)
    lines = markdown.split("\n")
    in_code = False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if in_code or line.lstrip().startswith("#"):
            continue

        def link(match: re.Match[str]) -> str:
            name = match.group(2)
            if name in done:
                return match.group(0)
            done.add(name)
            if match.group(1) or match.group(4):  # already a link: it is the first mention
                return match.group(0)
            page, anchor = known[name]
            span = f"`{name}{match.group(3)}`"
            return f"[{span}]({posixpath.relpath(page, here or '.')}#{anchor})"

        lines[i] = pattern.sub(link, line)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    return link_first_mentions(markdown, page.file.src_uri)
