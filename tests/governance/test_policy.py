"""Policy: parsing, first-match decisions, conditions, reload and malformed files."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pickle
import shutil
import time
from decimal import Decimal
from pathlib import Path

import pytest

from toolcards.core.host_files import ROOT_ENV, ROOTS_MARKER
from toolcards.governance import (
    CapabilityRegistry,
    Executor,
    Identity,
    Outcome,
    Policy,
    PolicyError,
)
from toolcards.governance.card_reads import may_read_card
from toolcards.surfaces.config import load_config

ALICE = Identity("alice", roles=["data_admin"])
BOB = Identity("bob", roles=["sales"])


def _policy(*rules: dict[str, object], default: str = "deny") -> Policy:
    return Policy.from_dict({"default_effect": default, "rules": list(rules)})


def test_first_matching_rule_wins() -> None:
    policy = _policy(
        {"targets": ["crm_*"], "effect": "deny", "description": "first"},
        {"targets": ["crm_read"], "effect": "allow", "description": "second"},
    )
    decision = policy.decide(ALICE, "crm_read", {})
    assert decision.effect == "deny"
    assert decision.reason == "first"


def test_default_effect_applies_when_no_rule_matches() -> None:
    assert _policy().decide(ALICE, "anything", {}).effect == "deny"
    assert _policy(default="allow").decide(ALICE, "anything", {}).effect == "allow"


def test_callers_glob_matches_identity_id() -> None:
    policy = _policy({"callers": ["agent.*"], "targets": ["*"], "effect": "allow"})
    assert policy.decide(Identity("agent.crawler", "agent"), "t", {}).allowed
    assert policy.decide(Identity("agentsmith"), "t", {}).denied


def test_role_condition_requires_one_of_the_roles() -> None:
    policy = _policy(
        {"targets": ["crm_delete"], "effect": "allow", "conditions": {"roles": ["data_admin"]}}
    )
    assert policy.decide(ALICE, "crm_delete", {}).allowed
    assert policy.decide(BOB, "crm_delete", {}).denied


def test_identity_type_condition() -> None:
    policy = _policy(
        {"targets": ["*"], "effect": "allow", "conditions": {"identity_types": ["service"]}}
    )
    assert policy.decide(Identity("svc", "service"), "t", {}).allowed
    assert policy.decide(Identity("svc", "user"), "t", {}).denied


def test_attrs_condition_compares_identity_attributes() -> None:
    policy = _policy({"targets": ["*"], "effect": "allow", "conditions": {"attrs": {"team": "a"}}})
    assert policy.decide(Identity("x", attrs={"team": "a"}), "t", {}).allowed
    assert policy.decide(Identity("x", attrs={"team": "b"}), "t", {}).denied


def test_anonymous_is_denied_by_default_deny_policy() -> None:
    policy = _policy({"targets": ["*"], "effect": "allow", "conditions": {"roles": ["user"]}})
    assert policy.decide(Identity.anonymous(), "crm_read", {}).denied


def test_argument_max_condition() -> None:
    policy = _policy(
        {
            "targets": ["pay"],
            "effect": "allow",
            "conditions": {"arguments": {"amount": {"max": 100}}},
        },
        {"targets": ["pay"], "effect": "approve"},
    )
    assert policy.decide(ALICE, "pay", {"amount": 100}).allowed
    assert policy.decide(ALICE, "pay", {"amount": 100.5}).needs_approval


def test_an_integer_too_large_for_a_float_is_over_any_max_and_the_call_denied() -> None:
    """A JSON integer of 309 digits and more made the ``max`` check raise OverflowError: the
    executor re-raised it and it ended the agent's run. It is now +inf (-inf), so the call is
    denied, not raised."""
    policy = _policy(
        {
            "targets": ["pay"],
            "effect": "allow",
            "conditions": {"arguments": {"amount": {"max": 1000}}},
        },
    )
    huge = json.loads('{"amount": ' + "9" * 400 + "}")
    assert policy.decide(ALICE, "pay", huge).denied
    assert policy.decide(ALICE, "pay", {"amount": -huge["amount"]}).allowed

    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    executor = Executor(CapabilityRegistry.from_tools([pay]), policy)
    result = asyncio.run(executor.call("pay", huge, ALICE))
    assert result.outcome == Outcome.DENIED


def _bounded(op: str, limit: object) -> Policy:
    return _policy(
        {"targets": ["pay"], "effect": "allow", "conditions": {"arguments": {"x": {op: limit}}}},
        {"targets": ["pay"], "effect": "approve"},
    )


@pytest.mark.parametrize(
    ("op", "limit", "inside", "outside"),
    [
        ("max", 10**18, 10**18, 10**18 + 1),
        ("min", 10**18, 10**18, 10**18 - 1),
        ("max", 100, "100", "100.0000000000000001"),
        ("min", 100, "100", "99.99999999999999999"),
        ("max", 100, Decimal("100"), Decimal("100.0000000000000001")),
        ("max", 0.1, "0.1", "0.10000000000000001"),
    ],
)
def test_min_and_max_compare_the_exact_value_the_tool_gets(
    op: str, limit: object, inside: object, outside: object
) -> None:
    """The check compared a float of the argument: 10**18 + 1 wei or "100.0000000000000001"
    (a Decimal to the tool) rounded onto the limit and ran without approval."""
    policy = _bounded(op, limit)
    assert policy.decide(ALICE, "pay", {"x": inside}).allowed
    assert policy.decide(ALICE, "pay", {"x": outside}).needs_approval


def test_a_decimal_amount_just_over_max_is_not_run_by_the_executor() -> None:
    ran: list[Decimal] = []

    def pay(amount: Decimal) -> str:
        """Pay."""
        ran.append(amount)
        return "paid"

    policy = _policy(
        {
            "targets": ["pay"],
            "effect": "allow",
            "conditions": {"arguments": {"amount": {"max": 100}}},
        },
        {"targets": ["pay"], "effect": "approve"},
    )
    executor = Executor(CapabilityRegistry.from_tools([pay]), policy)
    over = asyncio.run(executor.call("pay", {"amount": "100.0000000000000001"}, ALICE))
    assert over.outcome == Outcome.NEEDS_APPROVAL
    assert asyncio.run(executor.call("pay", {"amount": "100"}, ALICE)).ok
    assert ran == [Decimal("100")]


def test_min_and_max_take_infinities_and_refuse_nans() -> None:
    policy = _bounded("max", 10**18)
    assert policy.decide(ALICE, "pay", {"x": float("-inf")}).allowed
    assert policy.decide(ALICE, "pay", {"x": Decimal("-Infinity")}).allowed
    for value in (float("inf"), Decimal("Infinity"), float("nan"), Decimal("NaN"), Decimal("sNaN")):
        assert policy.decide(ALICE, "pay", {"x": value}).needs_approval
    assert _bounded("max", float("inf")).decide(ALICE, "pay", {"x": 10**400}).allowed


def test_a_numeric_string_past_decimals_exponent_range_counts_against_the_caller() -> None:
    """Decimal("1e99999999999999999999") raises (and so does "1e-99999999999999999999", a
    number near 0): the policy reads neither as a number it can place, never lets the error
    end the call (and an agent's whole run)."""
    for exponent in ("99999999999999999999", "-99999999999999999999"):
        for sign in ("", "-"):
            value = f"{sign}1e{exponent}"
            assert _bounded("max", 10**18).decide(ALICE, "pay", {"x": value}).needs_approval
            assert _bounded("min", 0).decide(ALICE, "pay", {"x": value}).needs_approval


@pytest.mark.parametrize(
    ("effect", "op", "limit", "across"),
    [
        ("deny", "min", 1000, "999.99999999999999999"),
        ("deny", "max", 0, "1e-400"),
        ("approve", "min", 1000, "999.99999999999999999"),
        ("deny", "min", 10**21, 10**21 - 1),  # an int: the tool is handed 1e21
    ],
)
def test_a_numeric_string_whose_float_crosses_a_deny_or_approve_bound_is_not_run(
    effect: str, op: str, limit: int, across: str | int
) -> None:
    """A tool taking a float is handed the float the string (or int) rounds to:
    "999.99999999999999999" was under a deny ``min: 1000`` and ran with 1000.0, "1e-400" was
    over a deny ``max: 0`` and ran with 0.0. The exact value and the float on two sides of the
    bound (or a string ``float`` does not read, which no tool taking a float is handed): not
    evaluable, against the caller; one side decides as before."""
    ran: list[float] = []

    def pay(amount: float) -> str:
        """Pay."""
        ran.append(amount)
        return "paid"

    conditions = {"arguments": {"amount": {op: limit}}}
    bounded = {"targets": ["pay"], "effect": effect, "conditions": conditions}
    policy = _policy(bounded, {"targets": ["pay"], "effect": "allow"})
    executor = Executor(CapabilityRegistry.from_tools([pay]), policy)
    stopped = Outcome.DENIED if effect == "deny" else Outcome.NEEDS_APPROVAL
    assert asyncio.run(executor.call("pay", {"amount": across}, ALICE)).outcome == stopped
    assert policy.decide(ALICE, "pay", {"amount": "\x1c5\x1c"}).effect == effect
    inside = "999.5" if op == "min" else "0.5"
    assert asyncio.run(executor.call("pay", {"amount": inside}, ALICE)).ok
    assert ran == [float(inside)]


def test_argument_condition_that_cannot_be_evaluated_counts_against_the_caller() -> None:
    policy = _policy(
        {
            "targets": ["pay"],
            "effect": "deny",
            "conditions": {"arguments": {"amount": {"min": 1000}}},
        },
        {"targets": ["pay"], "effect": "allow"},
    )
    assert policy.decide(ALICE, "pay", {"amount": 5}).allowed
    assert policy.decide(ALICE, "pay", {"amount": "a lot"}).denied
    assert policy.decide(ALICE, "pay", {"amount": {"$gt": 0}}).denied
    assert policy.decide(ALICE, "pay", {}).denied


def test_argument_glob_and_in_conditions() -> None:
    policy = _policy(
        {
            "targets": ["read_file"],
            "effect": "allow",
            "conditions": {"arguments": {"path": {"glob": "docs/*"}, "mode": ["r", "rb"]}},
        }
    )
    assert policy.decide(ALICE, "read_file", {"path": "docs/a.md", "mode": "r"}).allowed
    assert policy.decide(ALICE, "read_file", {"path": "etc/passwd", "mode": "r"}).denied
    assert policy.decide(ALICE, "read_file", {"path": "docs/a.md", "mode": "w"}).denied


# Ten allow rules on another argument: enough conditional rules that the plan indexes them.
INDEXED = [
    {"targets": ["deploy"], "effect": "allow", "conditions": {"arguments": {"team": {"eq": t}}}}
    for t in range(10)
]


@pytest.mark.parametrize("padding", [[], INDEXED], ids=["scanned", "indexed"])
def test_eq_and_in_conditions_compare_json_types_not_what_the_tool_coerces_to(
    padding: list[dict[str, object]],
) -> None:
    """The tool is handed pydantic's lax reading ("true" -> True, "0" -> 0) of the value the
    policy decides on: a value of another JSON type cannot be said to differ from a deny's."""
    policy = _policy(
        {"targets": ["deploy"], "effect": "deny", "conditions": {"arguments": {"force": True}}},
        {"targets": ["deploy"], "effect": "deny", "conditions": {"arguments": {"replicas": [0]}}},
        *padding,
        {"targets": ["deploy"], "effect": "allow", "conditions": {"arguments": {"env": "prod"}}},
    )
    base = {"env": "prod", "force": False, "replicas": 3}
    assert policy.decide(ALICE, "deploy", base).allowed
    for force in (True, "true", "1", 1):
        assert policy.decide(ALICE, "deploy", {**base, "force": force}).denied, force
    for replicas in (0, 0.0, "0", " 0", False):
        assert policy.decide(ALICE, "deploy", {**base, "replicas": replicas}).denied, replicas
    assert policy.decide(ALICE, "deploy", {**base, "env": ["prod"]}).denied


def test_a_value_of_another_json_type_never_satisfies_an_allow_condition() -> None:
    policy = _policy(
        {
            "targets": ["scale"],
            "effect": "allow",
            "conditions": {"arguments": {"n": {"in": [1, 2]}, "dry": {"ne": False}}},
        }
    )
    assert policy.decide(ALICE, "scale", {"n": 1.0, "dry": True}).allowed
    assert policy.decide(ALICE, "scale", {"n": True, "dry": True}).denied
    assert policy.decide(ALICE, "scale", {"n": 1, "dry": "false"}).denied
    assert policy.decide(ALICE, "scale", {"n": 1, "dry": None}).denied


def test_a_yaml_no_in_a_deny_list_denies_the_string_no() -> None:
    """YAML 1.1 reads an unquoted NO as false: the list is no longer all strings, so a string
    it does not hold cannot be said to be outside it, and the deny holds."""
    policy = Policy.from_yaml(
        "rules:\n"
        "  - {targets: [ship], effect: deny, conditions: {arguments: {country: {in: [NO, SE]}}}}\n"
        "  - {targets: [ship], effect: allow}\n"
    )
    assert policy.decide(ALICE, "ship", {"country": "SE"}).denied
    assert policy.decide(ALICE, "ship", {"country": "NO"}).denied


@pytest.mark.parametrize(
    "arguments", ["day: 2026-01-01", "day: {ne: 2026-01-01T10:00:00Z}", "day: [2026-01-01]"]
)
def test_an_unquoted_date_operand_is_refused_at_load(arguments: str) -> None:
    """YAML 1.1 reads it as a date, which no JSON argument ever equals: the deny never held."""
    rule = "rules:\n  - targets: [ship]\n    effect: deny\n    conditions:\n      arguments:\n"
    with pytest.raises(PolicyError, match=r"line 6: day\.(eq|ne|in).*YAML date or time: quote it"):
        Policy.from_yaml(f"{rule}        {arguments}\n")
    quoted = Policy.from_yaml(f"{rule}        day: '2026-01-01'\n")
    assert quoted.decide(ALICE, "ship", {"day": "2026-01-01"}).denied


def test_reason_names_only_the_applied_rule() -> None:
    policy = _policy(
        {"description": "secret ops rule", "targets": ["ops_*"], "effect": "allow"},
        {"description": "readers", "targets": ["read"], "effect": "allow"},
    )
    reason = policy.decide(BOB, "crm_delete", {}).reason
    assert "secret ops rule" not in reason
    assert "readers" not in reason


def test_visible_is_false_only_when_no_arguments_could_allow() -> None:
    policy = _policy(
        {
            "targets": ["pay"],
            "effect": "allow",
            "conditions": {"arguments": {"amount": {"max": 1}}},
        },
        {"targets": ["crm_delete"], "effect": "deny"},
    )
    assert policy.visible(ALICE, "pay")
    assert not policy.visible(ALICE, "crm_delete")


def test_from_yaml_text_and_file_agree(tmp_path: Path) -> None:
    text = "default_effect: deny\nrules:\n  - targets: [crm_read]\n    effect: allow\n"
    path = tmp_path / "p.yaml"
    path.write_text(text)
    for policy in (Policy.from_yaml(text), Policy.from_yaml(path), Policy.from_yaml(str(path))):
        assert policy.decide(BOB, "crm_read", {}).allowed
        assert policy.decide(BOB, "crm_delete", {}).denied


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("default_effect: deny\nrules:\n  - targets: [a]\n    effect: permit\n", 4, "effect"),
        (
            "rules:\n  - targets: [a]\n    effect: allow\n    condition: {roles: [x]}\n",
            4,
            "unknown key 'condition'",
        ),
        ("rules:\n  - targets: [a]\n    effect: allow\n  - effect: allow\n", 4, "needs targets"),
        ("rules:\n  - targets: [a\n    effect: allow\n", 3, "line"),
        ("default_effect: deny\ndefault_effect: allow\n", 2, "duplicate key"),
        ("limits:\n  - rate: lots\n", 2, "rate"),
        (
            "rules:\n  - targets: [a]\n    effect: allow\n    conditions:\n"
            "      arguments: {amount: {maximum: 3}}\n",
            5,
            "unknown operator",
        ),
        (
            "rules:\n  - targets: [a]\n    effect: deny\n    conditions:\n"
            "      arguments: {tags: {eq: [a, b]}}\n",
            5,
            "tags.eq must be a string, a number, true, false or null",
        ),
        (
            "rules:\n  - targets: [a]\n    effect: deny\n    conditions:\n"
            "      arguments: {n: {not_in: [1, {a: 1}]}}\n",
            5,
            "n.not_in item must be a string",
        ),
        (
            "rules:\n  - targets: [a]\n    effect: allow\n    description: [a, b]\n",
            4,
            "description must be a string",
        ),
    ],
)
def test_malformed_policy_names_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_yaml(text)
    assert f"line {line}" in str(info.value)
    assert fragment in str(info.value)


def test_malformed_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("default_effect: maybe\n")
    with pytest.raises(PolicyError, match=r"bad\.yaml: line 1"):
        Policy.from_yaml(path)


def test_policy_reloads_when_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("default_effect: deny\n")
    policy = Policy.from_yaml(path, reload_interval=0.0)
    assert policy.decide(BOB, "t", {}).denied
    path.write_text("default_effect: allow\n")
    os.utime(path, ns=(1, 10**18))
    assert policy.decide(BOB, "t", {}).allowed
    assert policy.version == 1


def test_broken_reload_keeps_the_last_good_rules(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("default_effect: deny\nrules: [{targets: [t], effect: allow}]\n")
    policy = Policy.from_yaml(path, reload_interval=0.0)
    path.write_text("default_effect: allow\nrules: [oops\n")
    os.utime(path, ns=(1, 10**18))
    assert policy.decide(BOB, "t", {}).allowed
    assert policy.decide(BOB, "u", {}).denied  # the last good rules, not the broken file's
    assert policy.error is not None and "line" in policy.error and policy.loaded


def test_a_file_broken_from_the_start_refuses_everything_until_fixed(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("default_effect: allow\nrules: [oops\n")
    policy = Policy.from_yaml(path, reload_interval=0.0, strict=False)
    assert policy.decide(BOB, "t", {}).denied and policy.refusing()
    path.write_text("default_effect: allow\n")
    os.utime(path, ns=(1, 10**18))
    assert not policy.refusing() and policy.decide(BOB, "t", {}).allowed


@pytest.mark.parametrize("planted", ["policy.yaml", "rules"], ids=["the-file", "its-folder"])
def test_a_link_planted_on_a_data_configs_policy_path_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, planted: str
) -> None:
    """An agent's config in its workspace names its own policy (checked, once, to lie in its
    folder); the agent then swaps the policy file, or the folder holding it, for a link to a
    host file: every reload read the host file, and the error (logged, and sent by ``serve``
    to every MCP client) quoted its values. The link is refused on a reload, by a copy sent to
    a worker whose environment names no root, and on a first load; the last good rules stay."""
    secret = "sk-live-HOST-SECRET-123"
    host = tmp_path / "host"
    host.mkdir()
    (host / "policy.yaml").write_text(f"rules: [{{targets: [t], effect: {secret}}}]\n")
    root = tmp_path / "workspaces"
    (root / "team1" / "rules").mkdir(parents=True)
    (root / ROOTS_MARKER).touch()
    (root / "team1" / "rules" / "policy.yaml").write_text("default_effect: allow\n")
    (root / "team1" / "toolcards.yaml").write_text("policy: rules/policy.yaml\naudit: null\n")
    monkeypatch.setenv(ROOT_ENV, str(root))
    config = load_config(root / "team1" / "toolcards.yaml")
    policy = Policy.from_yaml(config.policy_path, reload_interval=0)
    copy = pickle.loads(pickle.dumps(policy))
    loaded = config.policy_path.stat().st_mtime_ns
    if planted == "policy.yaml":
        config.policy_path.unlink()
        config.policy_path.symlink_to(host / "policy.yaml")
    else:
        shutil.rmtree(config.policy_path.parent)
        config.policy_path.parent.symlink_to(host)
    os.utime(host / "policy.yaml", ns=(loaded, loaded + 10**9))  # a change a reload sees
    monkeypatch.delenv(ROOT_ENV)
    (root / ROOTS_MARKER).unlink()
    with caplog.at_level(logging.ERROR):
        assert policy.decide(BOB, "t", {}).allowed and copy.decide(BOB, "t", {}).allowed
    refused = f"'{planted}' on the policy file's path is a link, which is not followed"
    assert policy.error is not None and policy.error.endswith(refused)
    assert copy.error == policy.error and secret not in caplog.text
    monkeypatch.setenv(ROOT_ENV, str(root))
    with pytest.raises(PolicyError, match=f"{refused}$"):
        Policy.from_yaml(config.policy_path)


def test_decisions_are_cached_per_principal_and_tool() -> None:
    policy = _policy({"targets": ["t"], "effect": "allow"})
    first = policy.decide(ALICE, "t", {})
    assert policy.decide(Identity("alice", roles=["data_admin"]), "t", {}) is first


def test_a_pickled_policy_decides_the_same_and_keeps_watching_its_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("default_effect: deny\nrules:\n  - targets: [crm_read]\n    effect: allow\n")
    policy = Policy.from_yaml(path, reload_interval=0)
    copy = pickle.loads(pickle.dumps(policy))  # as sent to a worker process
    assert copy.decide(ALICE, "crm_read", {}).effect == "allow"
    assert copy.decide(ALICE, "crm_write", {}).effect == "deny"
    path.write_text("default_effect: allow\n")
    os.utime(path, (time.time() + 5, time.time() + 5))
    copy.refresh(force=True)
    assert copy.decide(ALICE, "crm_write", {}).effect == "allow"
    path.unlink()  # another machine: the rules travel without the file
    gone = pickle.loads(pickle.dumps(_policy({"targets": ["a"], "effect": "allow"})))
    assert gone.decide(ALICE, "a", {}).effect == "allow"


@pytest.mark.parametrize(
    ("last_rule_targets", "reads"),
    [
        (["*"], False),
        (["context:*"], True),
        (["context:PlanningTool"], True),
        (["cont*"], False),
        (["*", "context:KnowledgeGraphTool"], False),  # the `*` beside it matched
        (["*", "context:Planning*"], True),
    ],
)
def test_the_card_read_right_is_a_rule_naming_context_targets(
    last_rule_targets: list[str], reads: bool
) -> None:
    """``default_effect: deny`` with a last catch-all ``*`` allow is the same policy as an
    allow by default: it handed the board of a card whose every tool the caller is denied."""
    policy = Policy.from_dict(
        {
            "default_effect": "deny",
            "rules": [
                {"callers": ["guest"], "targets": ["*_planning", "*_planning_*"], "effect": "deny"},
                {"callers": ["*"], "targets": last_rule_targets, "effect": "allow"},
            ],
        }
    )
    guest = Identity("guest")
    tools = ["get_planning", "update_planning"]
    assert not any(policy.visible(guest, tool) for tool in tools)
    assert may_read_card(policy, guest, "PlanningTool", tools) is reads


def test_the_card_read_right_is_decided_on_the_rules_after_a_reload(tmp_path: Path) -> None:
    """The first check after the file changed looked the new decision's rule up in the old
    rules (an explicit ``context:`` rule there), granting the board once more."""
    path = tmp_path / "policy.yaml"
    path.write_text(
        "default_effect: deny\nrules:\n- targets: ['context:PlanningTool']\n  effect: allow\n"
    )
    policy = Policy.from_yaml(path, reload_interval=0)
    who = Identity("agent.x", "agent")
    assert policy.grants_by_name(who, "context:PlanningTool")
    path.write_text("default_effect: deny\nrules:\n- targets: ['*']\n  effect: allow\n")
    later = time.time() + 5
    os.utime(path, (later, later))
    assert not policy.grants_by_name(who, "context:PlanningTool")
