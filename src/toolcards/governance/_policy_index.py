"""Indexes over policy rules, so that a decision costs about the same with 1,000 rules as
with 10, a new caller's first call included.

- :class:`GlobIndex` finds the rules whose target (or caller) globs match a name: literal
  globs by dictionary lookup, ``prefix*`` globs by one lookup per distinct prefix length, and
  only the remaining globs by regex.
- :class:`ArgumentIndex` narrows a plan's conditional rules to those whose ``eq``/``in``
  argument condition can hold for the call's value.

Both return rule positions; the caller still checks every candidate in full and in rule
order, so first-match semantics are unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolcards.governance._policy_parse import ArgCondition, Rule, compile_globs

_WILD = frozenset("*?[")
_CACHE_MAX = 50_000


class GlobIndex:
    """Positions of items by the shell-style globs they list (an item matches a name when
    any of its globs does, as :func:`compile_globs` matches)."""

    def __init__(self, items: Iterable[tuple[int, Sequence[str]]]) -> None:
        self._exact: dict[str, list[int]] = {}
        self._prefix: dict[str, list[int]] = {}
        self._general: list[tuple[int, re.Pattern[str]]] = []
        for position, globs in items:
            for glob in globs:
                head = glob[:-1] if glob.endswith("*") else None
                if _WILD.isdisjoint(glob):
                    self._exact.setdefault(glob, []).append(position)
                elif head is not None and _WILD.isdisjoint(head):
                    self._prefix.setdefault(head, []).append(position)
                else:
                    self._general.append((position, compile_globs((glob,))))
        self._lengths = sorted({len(p) for p in self._prefix})
        self._cache: dict[str, frozenset[int]] = {}

    def lookup(self, name: str) -> frozenset[int]:
        """Positions of the items matching ``name`` (cached per name)."""
        found = self._cache.get(name)
        if found is None:
            found = self._compute(name)
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[name] = found
        return found

    def _compute(self, name: str) -> frozenset[int]:
        hits: set[int] = set(self._exact.get(name, ()))
        for length in self._lengths:
            if length > len(name):
                break
            hits.update(self._prefix.get(name[:length], ()))
        hits.update(p for p, rx in self._general if rx.fullmatch(name) is not None)
        return frozenset(hits)


class RuleIndex:
    """The rules that may apply to one (caller id, tool id), in rule order."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._rules = rules
        self._targets = GlobIndex((i, r.target_globs) for i, r in enumerate(rules))
        self._callers = GlobIndex((i, r.caller_globs) for i, r in enumerate(rules))

    def candidates(self, caller_id: str, tool_id: str) -> list[Rule]:
        targets = self._targets.lookup(tool_id)
        if not targets:
            return []
        positions = targets & self._callers.lookup(caller_id)
        rules = self._rules
        return [rules[i] for i in sorted(positions)]


class ArgumentIndex:
    """Narrows a plan's conditional rules by one ``eq`` or ``in`` condition each.

    A rule is indexed under its first condition whose operand values are hashable; a call
    whose argument holds one of them makes it a candidate. A rule without such a condition
    is always a candidate, and so is every rule indexed under an argument the call lacks
    (when it is restrictive: a missing argument counts against the caller) or holds an
    unhashable value for.
    """

    MIN_RULES = 8  # below this, checking the rules one by one is as cheap

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._always: list[int] = []
        self._tables: dict[str, dict[Any, list[int]]] = {}
        self._all: dict[str, list[int]] = {}
        self._restrictive: dict[str, list[int]] = {}
        for position, rule in enumerate(rules):
            key = _indexable(rule.arguments)
            if key is None:
                self._always.append(position)
                continue
            name, values = key
            table = self._tables.setdefault(name, {})
            for value in values:
                table.setdefault(value, []).append(position)
            self._all.setdefault(name, []).append(position)
            if rule.effect != "allow":
                self._restrictive.setdefault(name, []).append(position)

    def candidates(self, args: Mapping[str, Any]) -> list[int]:
        """Positions of the rules that may match ``args``, in rule order."""
        found = set(self._always)
        for name, table in self._tables.items():
            if name not in args:
                found.update(self._restrictive.get(name, ()))
                continue
            try:
                found.update(table.get(args[name], ()))
            except TypeError:  # an unhashable value: leave it to the full check
                found.update(self._all[name])
        return sorted(found)


def _indexable(conditions: Iterable[ArgCondition]) -> tuple[str, tuple[Any, ...]] | None:
    for cond in conditions:
        if cond.op == "eq":
            values: tuple[Any, ...] = (cond.operand,)
        elif cond.op == "in":
            values = tuple(cond.operand)
        else:
            continue
        try:
            for value in values:
                hash(value)
        except TypeError:
            continue
        if any(isinstance(v, float) and v != v for v in values):
            continue  # NaN: equal to nothing, but found by identity in a dict
        return cond.name, values
    return None
