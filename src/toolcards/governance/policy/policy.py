"""Policy: who may call which tool, as data (YAML or dict), decided in microseconds.

First matching rule wins. Per (identity, tool) the rules that could apply are compiled once
and cached; argument conditions are the only thing evaluated per call. Rules are indexed by
their target and caller globs (compiling a new caller's plan looks at the rules that can
match, not at all of them), and a plan with many conditional rules indexes their ``eq``/``in``
argument conditions, so 1,000 rules cost about what 10 do.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toolcards.core import host_files
from toolcards.core.identity import Identity
from toolcards.governance.policy.index import ArgumentIndex, Profile, RuleIndex, ToolRules
from toolcards.governance.policy.parse import (
    ArgCondition,
    Budget,
    CompiledPolicy,
    Effect,
    Limit,
    PolicyError,
    Rule,
    compile_globs,
    compile_policy,
    load_yaml,
)
from toolcards.governance.redaction.redactor import DEFAULT_REDACTOR, Redactor

__all__ = ["Decision", "Policy", "PolicyError"]

log = logging.getLogger(__name__)
_CACHE_MAX = 50_000
EVERYONE = "toolcards_everyone"
"""Set on a log record that every listener should hear (an MCP server sends it to every
connection, not only to the call that happened to emit it): a policy file that broke."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The policy's answer: ``effect`` is allow, deny or approve (allow after a human says yes).

    ``reason`` names only the rule that applied (its description) or the default; it never
    lists other rules. ``rule`` is that rule's index, None for the default.
    """

    effect: Effect
    reason: str
    rule: int | None = None

    @property
    def allowed(self) -> bool:
        return self.effect == "allow"

    @property
    def denied(self) -> bool:
        return self.effect == "deny"

    @property
    def needs_approval(self) -> bool:
        return self.effect == "approve"


_DEFAULT = Decision("deny", "default")  # stands for the policy's default in a shared plan


@dataclass(frozen=True, slots=True)
class _Plan:
    """What can apply to one (identity, tool): conditional rules, then a fallthrough."""

    conditional: tuple[tuple[Rule, Decision], ...]
    fallthrough: Decision
    limits: tuple[Limit, ...]
    visible: bool
    index: ArgumentIndex | None = None


Each = Mapping[str, tuple[Any, ...]]
"""Arguments with several values (every path a call writes), by the name rules test."""


def _argument_match(rule: Rule, args: Mapping[str, Any], each: Each | None = None) -> bool:
    """All argument conditions hold. One that cannot be evaluated (missing argument, wrong
    type) counts against the caller: it matches a deny/approve rule, not an allow rule.

    The conditions on a name of ``each`` are tested against each of its values: a deny or
    approve rule holds when one value satisfies them all, an allow rule only when every value
    does (a call writing ``deploy/x`` and ``notes/y`` is denied by a deny on ``deploy/*`` and
    not allowed by an allow on ``notes/*``). No value at all counts against the caller."""
    restrictive = rule.effect != "allow"
    for cond in rule.arguments:
        if each and cond.name in each:
            continue
        ok = cond.check(args)
        if ok is None:
            ok = restrictive
        if not ok:
            return False
    if not each:
        return True
    for name, values in each.items():
        conds = [cond for cond in rule.arguments if cond.name == name]
        if not conds:
            continue
        if not values:
            if restrictive:
                continue
            return False
        held = (_all_hold(conds, {name: value}, restrictive) for value in values)
        if not (any(held) if restrictive else all(held)):
            return False
    return True


def _all_hold(conds: list[ArgCondition], args: Mapping[str, Any], restrictive: bool) -> bool:
    for cond in conds:
        ok = cond.check(args)
        if not (restrictive if ok is None else ok):
            return False
    return True


class Policy:
    """An ACL over capability ids. Build with :meth:`from_yaml` or :meth:`from_dict`.

    A policy read from a file reloads when the file's mtime changes (checked at most every
    ``reload_interval`` seconds). A reload that fails to parse keeps the last good rules
    (``error`` says why, and the failure is logged as an error once) until the file is fixed.
    A file where agents write is read with no link followed on its path (:class:`PolicyFile`).
    A policy with no good rules (``from_yaml(path, strict=False)`` on a broken file) refuses
    every call (``loaded`` is False) until the file is fixed; it never degrades to allow.
    """

    def __init__(
        self,
        compiled: CompiledPolicy,
        *,
        file: PolicyFile | None = None,
        reload_interval: float = 1.0,
    ) -> None:
        self._compiled = compiled
        self._index = RuleIndex(compiled.rules, compiled.limits)
        self._file = file
        self._mtime = file.mtime() if file else None
        self.reload_interval = reload_interval
        self._next_check = time.monotonic() + reload_interval
        self._plans: dict[Identity, dict[str, _Plan]] = {}  # per caller, per tool
        self._planned = 0
        self._lock = threading.Lock()
        self.version = 0
        self.error: str | None = None
        self.loaded = True
        """False while the policy has no good rules (it then refuses every call)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """A policy from a mapping in the documented shape; raises PolicyError if malformed."""
        return cls(compile_policy(data, "policy"))

    @classmethod
    def from_yaml(
        cls, source: str | os.PathLike[str], *, reload_interval: float = 1.0, strict: bool = True
    ) -> Policy:
        """A policy from a YAML file path or YAML text. A file is watched for changes.
        A malformed source raises PolicyError; with ``strict=False`` a malformed file gives
        a policy that refuses every call (``error`` says why) until the file is fixed."""
        path = _as_path(source)
        if path is None:
            text = str(source)
            return cls(compile_policy(load_yaml(text, "policy"), "policy"))
        file = PolicyFile.at(path)
        try:
            compiled = file.read()
        except PolicyError as exc:
            if strict:
                raise
            policy = cls(_refuse_all(), file=file, reload_interval=reload_interval)
            policy.error, policy.loaded = str(exc), False
            log.error("%s; every call is refused until it is fixed", exc)
            return policy
        return cls(compiled, file=file, reload_interval=reload_interval)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its rules (and file, which the copy keeps watching where it exists)."""
        return (
            _rebuild,
            (self._compiled, self._file, self.reload_interval, self.error, self.loaded),
        )

    @classmethod
    def allow_all(cls) -> Policy:
        """A policy that allows every call (for trusted, single-user setups and benchmarks)."""
        return cls.from_dict({"default_effect": "allow"})

    @property
    def default_effect(self) -> Effect:
        return self._compiled.default_effect

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """The spending limits the team shares (the policy's ``budgets:`` section)."""
        return self._compiled.budgets

    @property
    def redaction(self) -> Redactor:
        """How arguments and texts are redacted (the policy's ``redaction:`` section)."""
        return self._compiled.redaction

    # -- reload ---------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> bool:
        """Re-read the file if it changed (or ``force``); True when the policy was replaced."""
        file = self._file
        if file is None:
            return False
        mtime = file.mtime()
        if not force and mtime == self._mtime:
            return False
        with self._lock:
            self._mtime = mtime
            try:
                compiled = file.read()
            except PolicyError as exc:
                if str(exc) != self.error:  # once per failure, not at every check
                    kept = (
                        "still using the last good policy"
                        if self.loaded
                        else ("every call is refused")
                    )
                    log.error(
                        "policy reload failed (%s until it is fixed): %s",
                        kept,
                        exc,
                        extra={EVERYONE: True},
                    )
                self.error = str(exc)
                return False
            if self.error is not None:
                log.warning(
                    "policy %s is valid again and was reloaded", file.path, extra={EVERYONE: True}
                )
            self.error, self.loaded = None, True
            self._compiled = compiled
            self._index = RuleIndex(compiled.rules, compiled.limits)
            self._plans = {}
            self._planned = 0
            self.version += 1
        return True

    def refusing(self) -> bool:
        """True while the policy has no good rules (a fixed file is picked up first)."""
        if self.loaded:
            return False
        self.check_reload()
        return not self.loaded

    def check_reload(self) -> None:
        """Reload if the file changed (checked at most every ``reload_interval`` seconds)."""
        if self._file is not None:
            now = time.monotonic()
            if now >= self._next_check:
                self._next_check = now + self.reload_interval
                self.refresh()

    # -- decisions ------------------------------------------------------------------------

    def _plan(self, identity: Identity, tool_id: str) -> _Plan:
        self.check_reload()
        plans = self._plans.get(identity)
        plan = plans.get(tool_id) if plans is not None else None
        if plan is None:
            plan = self._compile_plan(identity, tool_id)
            if self._planned >= _CACHE_MAX:
                self._plans, self._planned = {}, 0
            self._plans.setdefault(identity, {})[tool_id] = plan
            self._planned += 1
        return plan

    def _shared(self, identity: Identity, tool_id: str) -> _Plan:
        """The plan ``identity`` shares with the callers of its profile, for every tool the
        same rules match (compiled once for them all)."""
        rules = self._index.for_tool(tool_id)
        profile = rules.profile(identity)
        shared: _Plan | None = rules.plans.get(profile)
        if shared is None:
            shared = self._shared_plan(rules, profile)
            rules.remember(profile, shared)
        return shared

    def _compile_plan(self, identity: Identity, tool_id: str) -> _Plan:
        shared = self._shared(identity, tool_id)
        if shared.fallthrough is not _DEFAULT:
            return shared
        default = self._compiled.default_effect
        if not self.loaded:
            reason = "the policy file is invalid; every call is refused"
        elif default != "deny":
            reason = "default effect"
        else:
            reason = f"no rule permits {tool_id} for {identity.id}"
        return replace(shared, fallthrough=Decision(default, reason, None))

    def _shared_plan(self, rules: ToolRules, profile: Profile) -> _Plan:
        """The plan of every caller with ``profile``; its fallthrough is :data:`_DEFAULT` when
        the default effect applies (the caller's plan then names the caller)."""
        held = frozenset(profile[0])
        conditional: list[tuple[Rule, Decision]] = []
        fallthrough = _DEFAULT
        for rule, test in zip(rules.rules, rules.rule_tests, strict=True):
            if test not in held:
                continue
            decision = Decision(rule.effect, rule.description, rule.index)
            if rule.arguments:
                conditional.append((rule, decision))
            else:
                fallthrough = decision
                break
        effect = self._compiled.default_effect if fallthrough is _DEFAULT else fallthrough.effect
        visible = effect != "deny" or any(d.effect != "deny" for _, d in conditional)
        limits = tuple(rules.limits[i] for i in profile[1])
        index = None
        if len(conditional) >= ArgumentIndex.MIN_RULES:
            index = ArgumentIndex([rule for rule, _ in conditional])
        return _Plan(tuple(conditional), fallthrough, limits, visible, index)

    def decide(
        self,
        identity: Identity,
        tool_id: str,
        args: Mapping[str, Any] | None,
        each: Each | None = None,
    ) -> Decision:
        """The decision for ``identity`` calling ``tool_id`` with ``args`` (first match wins);
        ``each``: arguments with several values, see :func:`_argument_match`."""
        return self.evaluate(identity, tool_id, args, each)[0]

    def grants_by_name(self, identity: Identity, target: str) -> bool:
        """True when a rule allows ``identity`` ``target`` through a target of that rule that
        names its kind (starts as ``target`` does up to its ``:``: ``context:PlanningTool``,
        ``context:*``) and matches it. The default effect and a catch-all ``*`` (beside it
        in the same rule too) grant no such right."""
        self.check_reload()
        index = self._index
        decision = self.decide(identity, target, {})
        if self._index is not index:  # reloaded in between: its rule is in the new rules
            index = self._index
            decision = self.decide(identity, target, {})
        if not decision.allowed or decision.rule is None:
            return False
        kind = target.partition(":")[0] + ":"
        rule = index.rule(decision.rule)
        named = tuple(g for g in rule.target_globs if g.startswith(kind)) if rule else ()
        return bool(named) and compile_globs(named).fullmatch(target) is not None

    def evaluate(
        self,
        identity: Identity,
        tool_id: str,
        args: Mapping[str, Any] | None,
        each: Each | None = None,
    ) -> tuple[Decision, tuple[Limit, ...]]:
        """The decision and the rate limits that apply, from one cached plan lookup."""
        plan = self._plan(identity, tool_id)
        return self._decide(plan, args, each), plan.limits

    @staticmethod
    def _decide(plan: _Plan, args: Mapping[str, Any] | None, each: Each | None) -> Decision:
        if plan.conditional:
            values = args or {}
            if plan.index is None:
                for rule, decision in plan.conditional:
                    if _argument_match(rule, values, each):
                        return decision
            else:
                conditional = plan.conditional
                for position in plan.index.candidates(values, each or ()):
                    rule, decision = conditional[position]
                    if _argument_match(rule, values, each):
                        return decision
        return plan.fallthrough

    def visible(self, identity: Identity, tool_id: str) -> bool:
        """False when no arguments could make the call allowed (the tool can be hidden).
        Read from the plan shared by the tools the same rules match (a listing of thousands
        of tools compiles no plan per tool; a call makes the caller's own)."""
        self.check_reload()
        plans = self._plans.get(identity)
        plan = plans.get(tool_id) if plans is not None else None
        return (plan or self._shared(identity, tool_id)).visible

    def may_approve(self, identity: Identity, tool_id: str) -> bool:
        """True when some arguments would make ``identity``'s call of ``tool_id`` wait for a
        human's approval (a rule with effect ``approve`` applies to it)."""
        plan = self._plan(identity, tool_id)
        gated = (d.effect == "approve" for _, d in plan.conditional)
        return plan.fallthrough.effect == "approve" or any(gated)

    def limits_for(self, identity: Identity, tool_id: str) -> tuple[Limit, ...]:
        """The rate limits that apply to ``identity`` calling ``tool_id``."""
        return self._plan(identity, tool_id).limits


def _as_path(source: str | os.PathLike[str]) -> Path | None:
    if isinstance(source, os.PathLike):
        return Path(source)
    if "\n" in source:
        return None
    if source.endswith((".yaml", ".yml")) or Path(source).is_file():
        return Path(source)
    return None


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """The file a policy is read from, and whether links on its path are followed: not when it
    lies where agents write (:func:`toolcards.core.host_files.where_agents_write`; a config
    that is data names its policy by the real path checked to lie in its own folder). A link
    planted there after that check, at the file's name or a folder's, is then refused on the
    first read and on every reload, never followed to a host file whose values the policy's
    errors would quote. Judged once, of the path as given, and kept by a pickled copy."""

    path: Path
    follow_links: bool

    @classmethod
    def at(cls, path: Path) -> PolicyFile:
        return cls(path, not host_files.where_agents_write(path))

    def mtime(self) -> int | None:
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return None

    def read(self) -> CompiledPolicy:
        name = str(self.path)
        try:
            text = host_files.read_bounded(self.path, "policy file", follow_links=self.follow_links)
        except OSError as exc:
            raise PolicyError(f"{name}: cannot read policy file: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise PolicyError(f"{name}: the policy file is not UTF-8 text") from None
        return compile_policy(load_yaml(text, name), name)


def _refuse_all() -> CompiledPolicy:
    return CompiledPolicy("deny", (), (), DEFAULT_REDACTOR)


def _rebuild(
    compiled: CompiledPolicy,
    file: PolicyFile | None,
    reload_interval: float,
    error: str | None = None,
    loaded: bool = True,
) -> Policy:
    if file is not None and not file.path.exists():
        file = None  # another machine: the rules as they were
    policy = Policy(compiled, file=file, reload_interval=reload_interval)
    policy.error, policy.loaded = error, loaded
    return policy
