"""A policy file whose YAML aliases expand to billions of values (a 1 KB "billion laughs") is
refused at load and at hot reload, fast and naming the file and line, and a running executor
keeps deciding with the next good file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolcards.governance import CapabilityRegistry, Executor, Identity, Policy, PolicyError

pytestmark = pytest.mark.anyio

ALICE = Identity("alice")
LEVELS = 7
"""Nine-fold per level: 9**7 (4.8 million) strings. The code before the bound built the rule
description from them (33 MB of text); two more levels (the reported attack) never finish."""


def alias_bomb(levels: int = LEVELS) -> str:
    """A valid-looking policy: each rule's description is a list of nine aliases of the
    description before it, so the last one stands for ``9**levels`` strings."""
    lines = ["default_effect: allow", "rules:"]
    for n in range(levels):
        items = ",".join(['"lol"'] * 9 if n == 0 else [f"*l{n - 1}"] * 9)
        lines += [f"  - description: &l{n} [{items}]", "    targets: [t]", "    effect: allow"]
    return "\n".join(lines) + "\n"


def ping() -> str:
    """Answers pong."""
    return "pong"


def _changed(path: Path, text: str, stamp: int) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stamp, stamp))


def test_alias_bomb_policy_file_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")
    assert path.stat().st_size < 1024
    with pytest.raises(PolicyError, match=r"bomb\.yaml: line \d+: .*aliases") as caught:
        Policy.from_yaml(path)
    assert "\n" not in str(caught.value)


def test_shared_anchor_for_a_target_list_still_loads() -> None:
    policy = Policy.from_yaml(
        "rules:\n"
        "  - targets: &writing [write, edit]\n    callers: [alice]\n    effect: allow\n"
        "  - targets: *writing\n    effect: deny\n"
    )
    assert policy.decide(ALICE, "edit", {}).allowed
    assert policy.decide(Identity("bob"), "write", {}).denied


async def test_alias_bomb_hot_reload_is_refused_and_the_next_good_file_applies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    _changed(path, "default_effect: allow\n", 10**18)
    policy = Policy.from_yaml(path, reload_interval=0.0)
    executor = Executor(CapabilityRegistry.from_tools([ping]), policy)
    assert (await executor.call("ping", {}, ALICE)).ok

    _changed(path, alias_bomb(), 2 * 10**18)
    await executor.call("ping", {}, ALICE)  # the reload happens inside this call
    assert policy.error is not None
    assert "policy.yaml: line" in policy.error and "aliases" in policy.error

    _changed(path, "default_effect: deny\n", 3 * 10**18)
    denied = await executor.call("ping", {}, ALICE)  # hidden: reads like an unknown tool
    assert not denied.ok and denied.decision is not None and denied.decision.effect == "deny"
    assert policy.error is None
