"""Indexes over policy rules, so that a decision costs about the same with 1,000 rules as
with 10, a new caller's first call included.

- :class:`GlobIndex` finds the rules whose target (or caller) globs match a name: literal
  globs by dictionary lookup, ``prefix*`` globs by one lookup per distinct prefix length, and
  only the remaining globs by regex.
- :class:`RuleIndex` groups the rules per tool (:class:`ToolRules`); a tool's plans are
  compiled once per caller *profile* (which of its distinct caller tests hold), not once per
  caller.
- :class:`ArgumentIndex` narrows a plan's conditional rules to those whose ``eq``/``in``
  argument condition can hold for the call's value.

Both return rule positions; the caller still checks every candidate in full and in rule
order, so first-match semantics are unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from toolcards.core.identity import Identity
from toolcards.governance.policy.parse import ArgCondition, Limit, Rule, compile_globs, json_kind

_WILD = frozenset("*?[")
_CACHE_MAX = 50_000


class GlobIndex:
    """Positions of items by the shell-style globs they list (an item matches a name when
    any of its globs does, as :func:`compile_globs` matches)."""

    def __init__(self, items: Iterable[tuple[int, Sequence[str]]], *, cache: bool = True) -> None:
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
        self._cache: dict[str, frozenset[int]] | None = {} if cache else None

    def lookup(self, name: str) -> frozenset[int]:
        """Positions of the items matching ``name`` (cached per name, unless built without)."""
        cache = self._cache
        if cache is None:
            return self._compute(name)
        found = cache.get(name)
        if found is None:
            found = self._compute(name)
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            cache[name] = found
        return found

    def _compute(self, name: str) -> frozenset[int]:
        hits: set[int] = set(self._exact.get(name, ()))
        for length in self._lengths:
            if length > len(name):
                break
            hits.update(self._prefix.get(name[:length], ()))
        hits.update(p for p, rx in self._general if rx.fullmatch(name) is not None)
        return frozenset(hits)


class CallerTest(NamedTuple):
    """A rule's conditions on the caller: its caller globs, roles, identity types, attrs."""

    callers: re.Pattern[str]
    roles: frozenset[str] | None
    identity_types: frozenset[str] | None
    attrs: tuple[tuple[str, Any], ...]

    def holds(self, identity: Identity, *, globs_checked: bool = False) -> bool:
        if not globs_checked and self.callers.fullmatch(identity.id) is None:
            return False
        if self.roles is not None and self.roles.isdisjoint(identity.roles):
            return False
        if self.identity_types is not None and identity.type not in self.identity_types:
            return False
        return all(identity.attrs.get(k, _MISSING) == v for k, v in self.attrs)


_MISSING = object()
Profile = tuple[tuple[int, ...], tuple[int, ...]]
"""(the caller tests that hold, the limits whose callers match), by position."""


class ToolRules:
    """What the policy says about one tool, whoever calls: its rules in order, their distinct
    caller tests, its limits, and the plans compiled per caller :data:`Profile` (callers with
    the same profile share one plan, so a new caller costs one profile, not a rule scan)."""

    MAX_SCAN = 16  # more distinct caller tests than this are found through a glob index
    MAX_PLANS = 4096

    def __init__(self, rules: Sequence[Rule], limits: Sequence[Limit]) -> None:
        self.rules = tuple(rules)
        known: dict[tuple[Any, ...], int] = {}
        self.rule_tests = tuple(
            known.setdefault((r.caller_globs, r.roles, r.identity_types, r.attrs), len(known))
            for r in self.rules
        )
        tests: list[CallerTest] = [CallerTest(re.compile("(?!)"), None, None, ())] * len(known)
        for rule, position in zip(self.rules, self.rule_tests, strict=True):
            tests[position] = CallerTest(rule.callers, rule.roles, rule.identity_types, rule.attrs)
        self.tests = tuple(tests)
        self.limits = tuple(limits)
        globs = {
            position: r.caller_globs
            for r, position in zip(self.rules, self.rule_tests, strict=True)
        }
        self._callers = GlobIndex(globs.items()) if len(tests) > self.MAX_SCAN else None
        self.plans: dict[Profile, Any] = {}
        self._profiles: dict[Identity, Profile] = {}

    def profile(self, identity: Identity) -> Profile:
        """Which caller tests hold for ``identity`` and which limits apply (cached)."""
        found = self._profiles.get(identity)
        if found is None:
            found = self._profile(identity)
            if len(self._profiles) >= _CACHE_MAX:
                self._profiles.clear()
            self._profiles[identity] = found
        return found

    def _profile(self, identity: Identity) -> Profile:
        tests = self.tests
        if self._callers is None:
            held = tuple(i for i, test in enumerate(tests) if test.holds(identity))
        else:
            found = self._callers.lookup(identity.id)
            held = tuple(i for i in sorted(found) if tests[i].holds(identity, globs_checked=True))
        limits = tuple(i for i, lim in enumerate(self.limits) if lim.callers.fullmatch(identity.id))
        return held, limits

    def remember(self, profile: Profile, plan: Any) -> None:
        if len(self.plans) >= self.MAX_PLANS:
            self.plans.clear()
        self.plans[profile] = plan


class RuleIndex:
    """The rules and limits that may apply to a tool id. Tools matched by the same rules and
    limits (``tool_*`` for 5,000 tools) share one :class:`ToolRules`, and its plans."""

    def __init__(self, rules: Sequence[Rule], limits: Sequence[Limit]) -> None:
        self._rules = rules
        self._limits = limits
        targets = [(i, r.target_globs) for i, r in enumerate(rules)]
        self._targets = GlobIndex(targets, cache=False)
        self._tools: dict[str, ToolRules] = {}
        self._shared: dict[tuple[frozenset[int], tuple[int, ...]], ToolRules] = {}

    def rule(self, index: int) -> Rule | None:
        """The rule a :class:`~.policy.Decision` names by ``index``."""
        return self._rules[index] if 0 <= index < len(self._rules) else None

    def for_tool(self, tool_id: str) -> ToolRules:
        found = self._tools.get(tool_id)
        if found is None:
            positions = self._targets.lookup(tool_id)
            limits = tuple(
                i for i, lim in enumerate(self._limits) if lim.targets.fullmatch(tool_id)
            )
            found = self._shared.get((positions, limits))
            if found is None:
                rules = [self._rules[i] for i in sorted(positions)]
                found = ToolRules(rules, [self._limits[i] for i in limits])
                self._shared[(positions, limits)] = found
            if len(self._tools) >= _CACHE_MAX:
                self._tools.clear()
                self._shared.clear()
            self._tools[tool_id] = found
        return found


class ArgumentIndex:
    """Narrows a plan's conditional rules by one ``eq`` or ``in`` condition each.

    A rule is indexed under its first condition whose operand values are hashable; a call
    whose argument holds one of them makes it a candidate. A rule without such a condition
    is always a candidate, and so is every rule indexed under an argument the call lacks
    or holds a value of another JSON type than an operand for (when it is restrictive: such
    a condition counts against the caller) or holds an unhashable value for.
    """

    MIN_RULES = 8  # below this, checking the rules one by one is as cheap

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._always: list[int] = []
        self._tables: dict[str, dict[Any, list[int]]] = {}
        self._all: dict[str, list[int]] = {}
        self._restrictive: dict[str, list[int]] = {}
        self._by_kind: dict[str, dict[str | None, list[int]]] = {}  # restrictive, by operand type
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
                kinds = self._by_kind.setdefault(name, {})
                for kind in {json_kind(value) for value in values}:
                    kinds.setdefault(kind, []).append(position)

    def candidates(self, args: Mapping[str, Any], each: Iterable[str] = ()) -> list[int]:
        """Positions of the rules that may match ``args``, in rule order (every rule indexed
        under a name of ``each``, whose several values are tested one by one)."""
        found = set(self._always)
        several = frozenset(each)
        for name, table in self._tables.items():
            if name in several:
                found.update(self._all[name])
                continue
            if name not in args:
                found.update(self._restrictive.get(name, ()))
                continue
            value, kind = args[name], json_kind(args[name])
            for other, positions in self._by_kind.get(name, {}).items():
                if other != kind:  # "0" is not the 0 of a deny, yet the tool may be handed 0
                    found.update(positions)
            try:
                found.update(table.get(value, ()))
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
