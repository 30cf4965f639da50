"""The one YAML loader for files a user hands toolcards (policies, configs, policy tables).

YAML aliases let a 1 KB document stand for billions of values: ``a: &a [x, x, x, x]``, then
``b: &b [*a, *a, *a, *a]`` and so on. PyYAML shares the aliased object, so loading is quick,
but the first conversion to text (a rule description, an error message) walks the whole
expansion and never ends. :class:`BoundedLoader` keeps aliases (the docs use an anchor for a
shared target list) and counts what every node expands to while the document is composed,
before anything is constructed: one over :data:`MAX_EXPANDED` (scalar characters plus one per
node) or nested deeper than :data:`MAX_DEPTH` is refused, naming the file and the line.
Data another library loaded with plain PyYAML (an agent spec) keeps the same shared objects:
:func:`check_loaded` holds it to the same bounds before it is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from toolcards.core.errors import ToolcardsError

MAX_EXPANDED = 4_000_000
"""What a document may expand to with its aliases followed: scalar characters plus one per
node (a policy or config file is a few kilobytes)."""

MAX_DEPTH = 200
"""How deeply collections may nest (PyYAML composes recursively)."""

_TOO_LARGE = (
    f"expands to more than {MAX_EXPANDED:,} characters through its aliases (*name); "
    "write the values out or use fewer aliases"
)
_TOO_DEEP = f"collections nest deeper than {MAX_DEPTH} levels"


class YamlError(ToolcardsError, ValueError):
    """A YAML document is malformed or too large once its aliases are expanded.

    ``str()`` is one line: ``<source>: line N: <problem>``; ``detail`` is the part after the
    source.
    """

    def __init__(self, source: str, detail: str) -> None:
        super().__init__(f"{source}: {detail}")
        self.source = source
        self.detail = detail


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses documents expanding past :data:`MAX_EXPANDED` or
    nesting past :data:`MAX_DEPTH`. Subclass it to add constructors."""

    def __init__(self, stream: str, source: str = "<yaml>") -> None:
        super().__init__(stream)
        self.source = source
        self._sizes: dict[int, int] = {}  # id(node) -> expanded size, once composed
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:  # an alias to a collection still being composed
                self._refuse(event, f"alias *{event.anchor} refers to itself")
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            self._refuse(event, _TOO_DEEP)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None:
            self._sizes[id(node)] = self._size(node, event)
        return node

    def _size(self, node: yaml.Node, event: yaml.Event) -> int:
        if isinstance(node, yaml.ScalarNode):
            size = 1 + len(node.value)
        elif isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes[id(item)] for item in node.value)
        else:
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        if size > MAX_EXPANDED:
            self._refuse(event, f"the document {_TOO_LARGE}")
        return size

    def _refuse(self, event: yaml.Event, problem: str) -> None:
        mark = event.start_mark
        where = f"line {mark.line + 1}" if mark is not None else "unknown line"
        raise YamlError(self.source, f"{where}: {problem}")


def load_yaml(text: str, source: str, loader: type[BoundedLoader] = BoundedLoader) -> Any:
    """Parse one YAML document with ``loader``; every YAML problem is a one-line
    :class:`YamlError` naming ``source`` and the line (other exceptions pass through)."""
    parser = loader(text, source)
    try:
        return parser.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else "unknown line"
        problem = exc.problem or exc.context or "not valid YAML"
        if exc.context and problem.startswith("but "):
            problem = f"{exc.context}, {problem}"
        problem = " ".join(problem.split())
        raise YamlError(source, f"{where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlError(source, " ".join(str(exc).split())) from None
    finally:
        parser.dispose()


def check_loaded(value: Any, source: str) -> None:
    """One-line :class:`YamlError` naming ``source`` when ``value`` (data loaded without
    :class:`BoundedLoader`) expands past :data:`MAX_EXPANDED`, nests past :data:`MAX_DEPTH` or
    contains itself. A shared object counts every time it is reached, as its alias would; its
    size is remembered, so the walk costs what the data holds, not what it stands for."""
    sizes: dict[int, int | None] = {}  # id -> expanded size (None: still being walked)

    def size(item: Any, depth: int) -> int:
        if isinstance(item, str | bytes):
            return 1 + len(item)
        if not isinstance(item, Mapping | list | tuple | set | frozenset):
            return 1
        if id(item) in sizes:
            known = sizes[id(item)]
            if known is None:
                raise YamlError(source, "refers to itself through an alias")
            return known
        if depth > MAX_DEPTH:
            raise YamlError(source, _TOO_DEEP)
        sizes[id(item)] = None
        parts = [p for pair in item.items() for p in pair] if isinstance(item, Mapping) else item
        total = 1 + sum(size(part, depth + 1) for part in parts)
        if total > MAX_EXPANDED:
            raise YamlError(source, _TOO_LARGE)
        sizes[id(item)] = total
        return total

    size(value, 1)
