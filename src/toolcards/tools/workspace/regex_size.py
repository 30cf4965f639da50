"""How large a ``regex`` pattern compiles, found from its parse tree before it is compiled.

The ``regex`` package compiles a counted repeat by copying its body ``min`` times, in C, with
the interpreter lock held and nothing that can stop it: ``(?:a{1000}){6000}`` (20
characters) takes seconds and gigabytes. Parsing is cheap and pure Python, so the pattern is
parsed first with the package's own parser (both agree on the syntax by construction), each
node is weighed with the product of the minimum counts of the repeats around it, and a
pattern heavier than :data:`MAX_PATTERN_SIZE` is refused; compiling the rest takes
milliseconds at most.
"""

from __future__ import annotations

from typing import Any

from toolcards.core.errors import RetriableError

MAX_PATTERN_SIZE = 50_000
"""Nodes of the compiled pattern with every counted repeat copied out (about 1 microsecond of
compile each); a search pattern a person writes weighs a few hundred."""


def check_pattern_size(pattern: str, flags: int = 0) -> None:
    """Raise RetriableError when ``pattern`` compiles to more than MAX_PATTERN_SIZE nodes.
    A pattern that does not parse passes: compiling it reports the syntax error at once."""
    tree = _parse(pattern, flags)
    if tree is not None and _weight(tree, MAX_PATTERN_SIZE) > MAX_PATTERN_SIZE:
        raise RetriableError(
            f"pattern too large: its counted repeats such as {{1000}} expand to more than "
            f"{MAX_PATTERN_SIZE:,} steps; use smaller counts, or + and *"
        )


def _parse(pattern: str, flags: int) -> Any:
    """The parse tree ``regex.compile`` would build, or None when the pattern is invalid."""
    import regex

    core = _core()
    while True:
        source = core.Source(pattern)
        info = core.Info(flags, source.char_type, {})
        info.guess_encoding = core.UNICODE
        source.ignore_space = bool(info.flags & core.VERBOSE)
        try:
            return core._parse_pattern(source, info)
        except core._UnscopedFlagSet:
            flags = info.global_flags  # a global flag later in the pattern: parse again
        except (regex.error, ValueError, KeyError):
            return None
        except RecursionError:
            raise RetriableError("pattern nests groups too deeply") from None


def _core() -> Any:
    """The ``regex`` package's parser module (private; its stubs do not describe it)."""
    import importlib

    return importlib.import_module("regex._regex_core")


def _weight(tree: Any, cap: int) -> int:
    """Nodes of ``tree`` with repeats copied out ``min_count`` times; stops past ``cap``."""
    core = _core()
    total = 0
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, times = stack.pop()
        total += times
        if total > cap:
            return total
        if isinstance(node, core.GreedyRepeat):  # lazy and possessive repeats too
            times *= max(1, node.min_count)
        for value in vars(node).values():
            if isinstance(value, core.RegexBase):
                stack.append((value, times))
            elif isinstance(value, list | tuple):
                stack.extend((item, times) for item in value if isinstance(item, core.RegexBase))
    return total
