"""Budgets a whole team shares (the policy's ``budgets:``): governed calls counted per
principal, run or team, all or nothing, once per call key; a spent budget ends a call
``over_budget`` with one audit row and one line; fixed windows start afresh; the counters live
in the team's store (memory, a SQLite file, PostgreSQL) and PostgreSQL never lets many
processes call past a limit."""

from __future__ import annotations

import asyncio
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.launch import PYTHON
from toolcards.core.identity import Identity
from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Outcome, Policy
from toolcards.governance.executor.budget import Budgets
from toolcards.governance.policy.parse import PolicyError
from toolcards.stores.base import Spend
from toolcards.stores.errors import StoreUnavailable
from toolcards.stores.memory import MemoryBudgets
from toolcards.stores.open import open_budgets

CAROL = Identity("agent.carol", "agent")
DAVE = Identity("agent.dave", "agent")


def ping(n: int) -> str:
    """Ping."""
    return f"pong {n}"


def deploy(env: str) -> str:
    """Deploy."""
    return f"deployed {env}"


def policy(*budgets: dict[str, Any]) -> Policy:
    return Policy.from_dict({"default_effect": "allow", "budgets": list(budgets)})


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return ":memory:" if request.param == "memory" else str(tmp_path / "budgets.db")


@pytest.fixture
def store(location: str) -> Iterator[Any]:
    found, close = open_budgets(location, "t1")
    yield found
    if close is not None:
        close()


def executor(store: Any, rules: Policy, audit: AuditLog | None = None) -> Executor:
    registry = CapabilityRegistry.from_tools([ping, deploy])
    return Executor(registry, rules, budgets=store, audit=audit)


def outcomes(ex: Executor, tool: str, n: int, who: Identity = CAROL, **kw: Any) -> list[str]:
    return [
        str(
            asyncio.run(
                ex.call(tool, {"n": i} if tool == "ping" else {"env": "x"}, who, **kw)
            ).outcome
        )
        for i in range(n)
    ]


def test_a_calls_budget_per_principal_stops_the_call_past_it_with_one_row_and_one_line(
    store: Any, tmp_path: Path
) -> None:
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        ex = executor(store, policy({"name": "pings", "calls": 2, "period": "day"}), audit)
        assert outcomes(ex, "ping", 3) == ["ok", "ok", "over_budget"]
        stopped = asyncio.run(ex.call("ping", {"n": 9}, CAROL))
        assert outcomes(ex, "ping", 1, who=DAVE) == ["ok"]  # dave has his own
        rows = [e for e in audit.query(limit=100) if e.call_id == stopped.call_id]
    assert stopped.outcome is Outcome.OVER_BUDGET and "\n" not in stopped.message
    assert stopped.message.startswith(
        "over budget: 'pings' allows 2 calls per principal (agent.carol), until "
    )
    assert [(r.outcome, r.error) for r in rows] == [("over_budget", stopped.message)]


def test_a_team_budget_is_shared_by_every_principal(store: Any) -> None:
    ex = executor(store, policy({"name": "team", "per": "team", "calls": 3}))
    assert outcomes(ex, "ping", 2) + outcomes(ex, "ping", 2, who=DAVE) == [
        "ok", "ok", "ok", "over_budget"
    ]  # fmt: skip


def test_a_run_budget_counts_each_run_apart(store: Any) -> None:
    ex = executor(store, policy({"name": "per run", "per": "run", "calls": 1}))
    assert outcomes(ex, "ping", 2, run_id="r1") == ["ok", "over_budget"]
    assert outcomes(ex, "ping", 1, run_id="r2") == ["ok"]
    assert outcomes(ex, "ping", 2) == ["ok", "ok"]  # outside any run: no run budget applies


def test_targets_limit_which_calls_count(store: Any) -> None:
    ex = executor(store, policy({"name": "deploys", "targets": ["deploy"], "calls": 1}))
    assert outcomes(ex, "ping", 3) == ["ok"] * 3
    assert outcomes(ex, "deploy", 2) == ["ok", "over_budget"]


def test_a_call_is_counted_against_every_budget_or_none(store: Any) -> None:
    rules = policy({"name": "mine", "calls": 5}, {"name": "team", "per": "team", "calls": 2})
    ex = executor(store, rules)
    assert outcomes(ex, "ping", 3) == ["ok", "ok", "over_budget"]
    spent = {(line.budget, line.scope): line.spent for line in ex.budgets.report(rules)}
    assert spent == {("mine", CAROL.id): 2.0, ("team", ""): 2.0}  # the refused one took none


def test_the_same_call_key_counts_once(store: Any) -> None:
    ex = executor(store, policy({"name": "one", "calls": 1}))
    cap = ex.registry.get("ping")
    assert cap is not None
    for _ in range(3):  # a retry, a durable replay, a deferred call's second pass
        done = asyncio.run(ex.run(cap, {"n": 1}, CAROL, call_key="run-1/call-1"))
        assert done.ok
    assert asyncio.run(ex.run(cap, {"n": 2}, CAROL, call_key="run-1/call-2")).outcome is (
        Outcome.OVER_BUDGET
    )


def test_a_call_is_counted_once_approved_and_nobody_is_asked_for_one_past_its_budget(
    store: Any,
) -> None:
    """Before, a call that only asked for approval took the budget under its first key: its
    approved second pass (a deferred call resumed in a new run, under a new key) was over it."""
    rules = Policy.from_dict({
        "default_effect": "allow",
        "rules": [{"targets": ["deploy"], "effect": "approve"}],
        "budgets": [{"name": "one", "targets": ["deploy"], "calls": 1}],
    })  # fmt: skip
    ex = executor(store, rules)
    cap = ex.registry.get("deploy")
    assert cap is not None

    def deploy(env: str, run: str, approved: bool = False) -> Outcome:
        done = ex.run(cap, {"env": env}, CAROL, call_id=env, call_key=f"{run}/{env}",
                      approved=approved)  # fmt: skip
        return asyncio.run(done).outcome

    assert [deploy("a", "r1"), deploy("b", "r1")] == [Outcome.NEEDS_APPROVAL] * 2
    assert ex.budgets.report(rules) == []  # waiting for a human spends nothing
    assert deploy("a", "r2", approved=True) is Outcome.OK
    assert deploy("b", "r2", approved=True) is Outcome.OVER_BUDGET  # approved, but spent
    assert deploy("c", "r3") is Outcome.OVER_BUDGET
    assert ex.approvals.pending() == []  # b's request settled; nobody was asked for c
    assert [line.spent for line in ex.budgets.report(rules)] == [1.0]


def test_a_windowed_budget_starts_afresh_in_the_next_window(store: Any) -> None:
    now = [1_000_000.0]
    rules = policy({"name": "hourly", "calls": 1, "period": "hour"})
    budgets = Budgets(store, clock=lambda: now[0])
    assert budgets.take_call(rules, CAROL, "ping", None, None) is None
    assert budgets.take_call(rules, CAROL, "ping", None, None) is not None
    now[0] += 3600
    assert budgets.take_call(rules, CAROL, "ping", None, None) is None


def test_model_usage_is_counted_once_per_key_and_stops_only_once_spent(store: Any) -> None:
    rules = policy({"name": "tokens", "per": "team", "tokens": 1000, "cost": 0.5})
    budgets = Budgets(store)
    assert budgets.check_model(rules, CAROL, "r1") is None
    budgets.spend_model(rules, CAROL, "r1", "model/r1/1.1", 600, 0.1)
    budgets.spend_model(rules, CAROL, "r1", "model/r1/1.1", 600, 0.1)  # a replayed response
    assert budgets.check_model(rules, CAROL, "r1") is None
    budgets.spend_model(rules, DAVE, "r2", "model/r2/1.1", 600, 0.1)
    stop = budgets.check_model(rules, CAROL, "r3")
    assert stop == "over budget: 'tokens' allows 1000 tokens for the team, and it is spent"


def test_the_store_takes_all_or_nothing_and_never_past_a_limit(store: Any) -> None:
    a, b = Spend("a", 1, 2), Spend("b", 1, 1)
    assert store.take(None, [a, b], 0.0) is None
    assert store.take(None, [a, b], 0.0) == 1  # b is spent: a is not taken either
    assert store.spent(["a", "b", "c"]) == {"a": 1.0, "b": 1.0}
    store.add("k", [Spend("a", 5, 0)], 0.0)  # model usage: added whatever the limit, once
    store.add("k", [Spend("a", 5, 0)], 0.0)
    assert store.spent(["a"]) == {"a": 6.0}


class _Expiry(float):
    """An expiry that counts the comparisons made with it: how many counters a store reads."""

    compared = 0

    def _seen(self) -> None:
        _Expiry.compared += 1

    def __lt__(self, other: float) -> bool:
        self._seen()
        return float(self) < other

    def __le__(self, other: float) -> bool:
        self._seen()
        return float(self) <= other

    def __gt__(self, other: float) -> bool:
        self._seen()
        return float(self) > other

    def __ge__(self, other: float) -> bool:
        self._seen()
        return float(self) >= other


def test_a_full_memory_store_refuses_a_new_counter_without_reading_every_counter() -> None:
    store = MemoryBudgets(max_counters=1000)
    for run in range(1000):  # one counter per run, kept 7 days: none expires here
        assert store.take(None, [Spend(f"run {run}", 1, 3, _Expiry(1e9 + run))], 0.0) is None
    _Expiry.compared = 0
    with pytest.raises(StoreUnavailable, match="the budget store is full"):
        store.take("k", [Spend("run 0", 1, 3, _Expiry(1e9)), Spend("new run", 1, 3, 2e9)], 1.0)
    assert _Expiry.compared < 20  # the soonest expiry only: never a scan of the 1000
    with pytest.raises(StoreUnavailable):
        store.add(None, [Spend("model", 5, 0, 2e9)], 1.0)
    assert len(store.listing(1.0, limit=5000)) == 1000  # never past its cap
    assert store.spent(["run 0", "new run", "model"]) == {"run 0": 1.0}  # all or nothing
    assert store.take("k", [Spend("run 0", 1, 3, _Expiry(1e9))], 1.0) is None
    assert store.spent(["run 0"]) == {"run 0": 2.0}  # the refused use left no key behind


def test_a_full_memory_store_forgets_the_counter_that_expired_first() -> None:
    store = MemoryBudgets(max_counters=3)
    for counter, expires in [("a", 10.0), ("b", 20.0), ("team", None)]:
        store.add(None, [Spend(counter, 1, 0, expires)], 0.0)
    store.add(None, [Spend("b", 1, 0, 40.0)], 5.0)  # used again: kept longer
    store.add(None, [Spend("d", 1, 0, 50.0)], 15.0)
    assert store.spent(["a", "b", "team", "d"]) == {"b": 2.0, "team": 1.0, "d": 1.0}
    with pytest.raises(StoreUnavailable):  # b expires at 40 now, not 20
        store.add(None, [Spend("e", 1, 0, 60.0)], 25.0)
    store.add(None, [Spend("e", 1, 0, 60.0)], 45.0)
    assert store.spent(["b", "team", "d", "e"]) == {"team": 1.0, "d": 1.0, "e": 1.0}


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"name": "x", "per": "machine", "calls": 1}, "per must be principal, run or team"),
        ({"name": "x", "calls": -1}, "calls must be a whole number >= 0"),
        ({"name": "x", "tokens": 1.5}, "tokens must be a whole number >= 0"),
        ({"name": "x", "cost": "lots"}, "cost must be a number"),
        ({"name": "x"}, "needs tokens, cost or calls"),
        (
            {"name": "x", "calls": 1, "period": "fortnight"},
            "period must look like hour, day or 7day",
        ),
        ({"name": "x", "calls": 1, "limit": 2}, r"unknown key 'limit' in budgets\[0\]"),
    ],
)
def test_a_malformed_budget_is_one_clear_error(budget: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        policy(budget)


def test_two_budgets_of_one_name_are_refused() -> None:
    with pytest.raises(PolicyError, match="two budgets are named 'x'"):
        policy({"name": "x", "calls": 1}, {"name": "x", "tokens": 1})


RACER = textwrap.dedent(
    """
    import asyncio, sys
    from toolcards.governance import CapabilityRegistry, Executor, Identity, Policy
    from toolcards.stores.open import open_budgets

    def ping(n: int) -> str:
        "Ping."
        return "pong"

    policy = Policy.from_dict({"default_effect": "allow", "budgets": [
        {"name": "team", "per": "team", "calls": int(sys.argv[2])}]})
    store, _ = open_budgets(sys.argv[1], "t1")
    executor = Executor(CapabilityRegistry.from_tools([ping]), policy, budgets=store)
    sys.stdin.readline()  # start together
    done = [asyncio.run(executor.call("ping", {"n": i}, Identity(sys.argv[3]))).outcome.value
            for i in range(int(sys.argv[4]))]
    print(done.count("ok"), done.count("over_budget"), flush=True)
    """
)


@pytest.mark.timeout(180)
def test_many_processes_on_postgres_never_call_past_a_team_budget(
    postgres_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    limit, processes, each = 25, 4, 12  # 48 attempts for 25 calls
    racers = [
        subprocess.Popen(
            [PYTHON, str(script), postgres_url, str(limit), f"agent.{i}", str(each)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    counts = [racer.communicate(timeout=150)[0].split() for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert sum(int(ok) for ok, _ in counts) == limit
    assert sum(int(over) for _, over in counts) == processes * each - limit
    store, close = open_budgets(postgres_url, "t1")
    rules = Policy.from_dict({"default_effect": "allow", "budgets": [
        {"name": "team", "per": "team", "calls": limit}]})  # fmt: skip
    [line] = Budgets(store).report(rules)
    assert (line.spent, line.left) == (limit, 0)
    if close is not None:
        close()
