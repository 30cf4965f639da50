"""The rule indexes change nothing: random policies decide exactly as a plain first-match
scan over every rule does, with literal, prefix and general globs, every argument operator,
missing and unhashable arguments."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from toolcards.governance import Identity, Policy
from toolcards.governance.policy.index import GlobIndex
from toolcards.governance.policy.parse import CompiledPolicy, Rule, compile_policy

TARGETS = ["t1", "t2", "t*", "x?", "[tx]1", "*", "t1*", "crm.read"]
CALLERS = ["alice", "a*", "*", "bob", "agent.*", "?ob"]
VALUES: list[Any] = [0, 1, 2, "x", "y", True, None, 1.0]
OPS = ["eq", "ne", "in", "not_in", "min", "max", "glob", "max_length"]
IDENTITIES = [
    Identity("alice", roles=["admin"]),
    Identity("bob", roles=["ops"]),
    Identity("agent.one", "agent", roles=["admin", "ops"]),
    Identity("zed", "service"),
]
TOOLS = ["t1", "t2", "x1", "t10", "y", "crm.read", "tx"]


def _condition(rng: random.Random) -> Any:
    op = rng.choice(OPS)
    if op in ("in", "not_in"):
        return {op: rng.sample(VALUES, 3)}
    if op in ("min", "max"):
        return {op: rng.choice([0, 1, 2])}
    if op == "glob":
        return {op: rng.choice(["x*", "?", "y"])}
    if op == "max_length":
        return {op: rng.choice([0, 1, 3])}
    return {op: rng.choice(VALUES)}


def _policy(rng: random.Random, n_rules: int) -> dict[str, Any]:
    rules = []
    for _ in range(n_rules):
        rule: dict[str, Any] = {
            "targets": rng.sample(TARGETS, rng.choice([1, 1, 2])),
            "callers": rng.sample(CALLERS, rng.choice([1, 1, 2])),
            "effect": rng.choice(["allow", "deny", "approve"]),
        }
        conditions: dict[str, Any] = {}
        if rng.random() < 0.3:
            conditions["roles"] = [rng.choice(["admin", "ops"])]
        if rng.random() < 0.7:
            names = rng.sample(["a", "b"], rng.choice([1, 2]))
            conditions["arguments"] = {name: _condition(rng) for name in names}
        if conditions:
            rule["conditions"] = conditions
        rules.append(rule)
    return {"default_effect": rng.choice(["allow", "deny"]), "rules": rules}


def _scan(compiled: CompiledPolicy, who: Identity, tool: str, args: Mapping[str, Any]) -> str:
    """First match over every rule, the way the policy language defines it."""
    for rule in compiled.rules:
        if _applies(rule, who, tool, args):
            return rule.effect
    return compiled.default_effect


def _applies(rule: Rule, who: Identity, tool: str, args: Mapping[str, Any]) -> bool:
    if rule.targets.fullmatch(tool) is None or rule.callers.fullmatch(who.id) is None:
        return False
    if rule.roles is not None and rule.roles.isdisjoint(who.roles):
        return False
    if rule.identity_types is not None and who.type not in rule.identity_types:
        return False
    for cond in rule.arguments:
        ok = cond.check(args)
        if ok is None:
            ok = rule.effect != "allow"
        if not ok:
            return False
    return True


def _args(rng: random.Random) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name in ("a", "b"):
        roll = rng.random()
        if roll < 0.2:
            continue  # missing
        args[name] = [1] if roll < 0.3 else rng.choice([*VALUES, "xy", 3, -1])
    return args


@pytest.mark.parametrize("seed", range(12))
def test_indexed_decisions_equal_a_plain_first_match_scan(seed: int) -> None:
    rng = random.Random(seed)
    data = _policy(rng, n_rules=rng.choice([5, 12, 40]))
    policy = Policy.from_dict(data)
    compiled = compile_policy(data)
    for _ in range(400):
        who, tool, args = rng.choice(IDENTITIES), rng.choice(TOOLS), _args(rng)
        assert policy.decide(who, tool, args).effect == _scan(compiled, who, tool, args), (
            who,
            tool,
            args,
        )


def test_many_rules_on_one_tool_keep_first_match_order() -> None:
    rules: list[dict[str, Any]] = [
        {"targets": ["pay"], "effect": "allow", "conditions": {"arguments": {"to": f"acct-{i}"}}}
        for i in range(1000)
    ]
    late_deny = {"to": ["acct-7", "acct-900"]}
    rules.insert(
        500, {"targets": ["pay"], "effect": "deny", "conditions": {"arguments": late_deny}}
    )
    policy = Policy.from_dict({"default_effect": "deny", "rules": rules})
    alice = Identity("alice")
    assert policy.decide(alice, "pay", {"to": "acct-7"}).effect == "allow"  # rule 7 comes first
    assert policy.decide(alice, "pay", {"to": "acct-900"}).effect == "deny"
    assert policy.decide(alice, "pay", {"to": "acct-999"}).effect == "allow"
    assert policy.decide(alice, "pay", {"to": "elsewhere"}).effect == "deny"
    assert policy.decide(alice, "pay", {"to": ["acct-1"]}).effect == "deny"


def test_glob_index_matches_like_the_glob_regexes() -> None:
    index = GlobIndex([(0, ["crm_*"]), (1, ["crm_read"]), (2, ["*_read"]), (3, ["?rm_*", "x"])])
    assert index.lookup("crm_read") == {0, 1, 2, 3}
    assert index.lookup("crm_") == {0, 3}
    assert index.lookup("x") == {3}
    assert index.lookup("cr") == frozenset()
