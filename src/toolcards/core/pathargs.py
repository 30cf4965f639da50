"""Tool arguments that name what a tool acts on (files, URLs): which ones they are, and the
name the tool acts on for each.

A card declares them with ``annotate(fn, paths=PathArgs(...))`` (URLs: ``paths=url_args(...)``);
the declaration travels in ``ToolDefinition.metadata["paths"]``. The governed executor calls
:meth:`PathArgs.resolve` before the policy decides: every declared argument is replaced by its
canonical form (what the card's ``canonical`` returns, the name the tool will act on), so a
rule on ``path`` or ``url`` is decided on that name whatever spelling was sent, and the tool
receives the name that was decided on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolcards.core.errors import RetriableError

Canonical = Callable[[str], str]
"""A path (or URL) as a caller sent it -> the name the tool acts on; RetriableError where the
tool would refuse it."""
PathsIn = Callable[[str], Iterable[str]]
"""The text of an argument (a patch) -> the paths it names, as the tool itself reads them."""

TEXT_PATHS = "path"
"""The name under which the policy sees paths found inside a text argument."""


@dataclass(frozen=True, slots=True)
class PathArgs:
    """Which arguments of a tool are paths, and how to make each canonical.

    ``fields``: arguments holding one path each, by name (``"path"``) or as a name inside each
    item of a list argument (``"edits[].path"``). ``texts``: arguments whose text names paths
    (a patch), each with the function the tool itself uses to find them. The policy sees
    every path under its last name (``path`` for ``edits[].path``), paths found in a text as
    ``path``.
    """

    canonical: Canonical
    fields: tuple[str, ...] = ("path",)
    texts: tuple[tuple[str, PathsIn], ...] = ()

    def describe(self) -> list[str]:
        """The declared arguments, as text (for listings)."""
        return [*self.fields, *(name for name, _ in self.texts)]

    def resolve(self, args: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
        """``args`` with every declared path canonical, and, per policy name, every canonical
        path of the call where one argument does not hold them all (paths inside a list or a
        text, or several of one name). RetriableError when a declared path is refused or is
        not a string: such a call never reaches the policy or the tool."""
        out = dict(args)
        found: dict[str, list[str]] = {}
        several: set[str] = set()
        for spec in self.fields:
            head, nested, leaf = spec.partition("[].")
            if head not in out:
                continue
            if not nested:
                out[head] = self._one(out[head], head)
                found.setdefault(head, []).append(out[head])
                continue
            several.add(leaf)
            out[head] = self._items(out[head], head, leaf, found.setdefault(leaf, []))
        for name, paths_in in self.texts:
            several.add(TEXT_PATHS)
            bucket = found.setdefault(TEXT_PATHS, [])
            if name in out:
                text = out[name]
                if not isinstance(text, str):
                    raise RetriableError(f"{name} must be a string")
                bucket.extend(self.canonical(path) for path in paths_in(text))
        each = {
            name: tuple(dict.fromkeys(values))
            for name, values in found.items()
            if name in several or len(values) > 1
        }
        return out, each

    def _one(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise RetriableError(f"{where} must be a string")
        return self.canonical(value)

    def _items(self, items: Any, head: str, leaf: str, bucket: list[str]) -> list[Any]:
        """A copy of the list argument ``head`` with each item's ``leaf`` path canonical."""
        if not isinstance(items, list | tuple):
            raise RetriableError(f"{head} must be a list")
        copied: list[Any] = []
        for number, item in enumerate(items):
            if not isinstance(item, Mapping):
                dump = getattr(item, "model_dump", None)  # a pydantic model given in code
                if dump is None:
                    raise RetriableError(f"{head}[{number}] must be an object")
                item = dump(by_alias=True)
            if leaf in item:
                value = self._one(item[leaf], f"{head}[{number}].{leaf}")
                item = {**item, leaf: value}
                bucket.append(value)
            copied.append(item)
        return copied


def url_args(normalize: Canonical, *fields: str) -> PathArgs:
    """The declaration of arguments holding one URL each (``url`` when none is named): each is
    replaced by ``normalize(url)``, the URL the tool will fetch, before the policy decides. The
    card passes its own normaliser (core knows no tool); its ValueError, a URL the tool would
    refuse, makes the call invalid."""

    def canonical(url: str) -> str:
        try:
            return normalize(url)
        except ValueError as exc:
            raise RetriableError(str(exc)) from None

    return PathArgs(canonical, fields or ("url",))
