"""Budgets a whole team shares: the policy's ``budgets:`` counted in the team's store.

A budget limits model ``tokens``, model ``cost`` (US dollars, from pydantic-ai's usage and its
price data) and governed ``calls``, counted ``per`` principal, run or team, within a fixed
``period`` (UTC windows of that length; none: for as long as the counter lives)::

    budgets:
      - name: daily model spend
        callers: ["agent.*"]
        per: principal
        period: day
        tokens: 200000
        cost: 5.00
      - name: deploys per run
        targets: [deploy]
        per: run
        calls: 3

:class:`Budgets` is the executor's collaborator for them. A governed call takes one from every
``calls`` budget that applies to its caller and tool, at once and all or nothing, in one
operation of the store (one statement on PostgreSQL), so no process of the team ever calls past
a limit; the call's key (its durable key, else its call id) makes a replayed call count once.
A call that needs approval takes it only once admitted (a call left waiting for a human, then
approved in a later run under a new key, counts once), and is checked first without taking
(:meth:`Budgets.check_call`), so nobody is asked to approve a call already over budget.
Model usage is counted by the agent capability's model request hooks
(:class:`~toolcards.governance.toolset.budget.ModelBudget`): before a request, a ``tokens`` or
``cost`` budget already spent stops the run; after a response, what it used is added, once
per run step and attempt. So a team of many processes overspends a token or cost budget by at
most the model requests in flight when it ran out, one per process.

A budget that stops a call ends it ``over_budget`` with one audit row and one line for the
model and the caller (:data:`toolcards.governance.outcomes.OUTCOMES`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from toolcards.core.identity import Identity
from toolcards.governance.policy.parse import Budget
from toolcards.governance.policy.policy import Policy
from toolcards.stores.base import BudgetStore, Spend

__all__ = ["MODEL_METRICS", "RUN_COUNTER_TTL", "BudgetLine", "Budgets"]

log = logging.getLogger("toolcards.governance.budgets")

MODEL_METRICS = ("tokens", "cost")
RUN_COUNTER_TTL = 7 * 86400.0
"""How long a run's counter outlives its last use (a run is over long before)."""
_UNITS = {"tokens": "tokens", "cost": "USD", "calls": "calls"}


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """One counter of one budget as the dashboard and ``toolcards budgets`` show it."""

    budget: str
    metric: str
    per: str
    scope: str
    """The principal or run it counts (empty for the team)."""
    spent: float
    limit: float
    window: str
    """``"per day from 2026-12-06 00:00 UTC"`` style, or ``"total"``."""

    @property
    def left(self) -> float:
        return max(0.0, self.limit - self.spent)

    def as_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "metric": self.metric,
            "per": self.per,
            "scope": self.scope,
            "spent": self.spent,
            "limit": self.limit,
            "left": self.left,
            "unit": _UNITS[self.metric],
            "window": self.window,
        }


class Budgets:
    """The team's budget counters (in ``store``) as the executor and the model hooks use them,
    under the budgets of the policy each is given."""

    def __init__(self, store: BudgetStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._clock = clock
        self._mine: dict[tuple[int, int, str], tuple[Budget, ...]] = {}
        self._unpriced: set[str] = set()

    def of(self, policy: Policy, identity: Identity) -> tuple[Budget, ...]:
        """The budgets that apply to ``identity`` (cached per policy version)."""
        key = (id(policy), policy.version, identity.id)
        found = self._mine.get(key)
        if found is None:
            if len(self._mine) > 10_000:
                self._mine.clear()
            found = self._mine[key] = tuple(
                b for b in policy.budgets if b.callers.fullmatch(identity.id)
            )
        return found

    # -- governed calls ------------------------------------------------------------------------

    def take_call(
        self, policy: Policy, identity: Identity, tool_id: str, run: str | None, key: str | None
    ) -> str | None:
        """Count one call of ``tool_id`` against every ``calls`` budget of its caller (None:
        counted, or counted before under ``key``); else the line that stops it."""
        now = self._clock()
        counted = self._calls(policy, identity, tool_id, run, now)
        if not counted:
            return None
        over = self.store.take(key, [spend for _, spend in counted], now)
        if over is None:
            return None
        return stop_line(counted[over][0], "calls", identity, run, now)

    def check_call(
        self, policy: Policy, identity: Identity, tool_id: str, run: str | None
    ) -> str | None:
        """The line that would stop one more call of ``tool_id`` now, counting nothing (None:
        every ``calls`` budget of its caller has one left). Asked before a human is: nobody
        is asked to approve a call its budget already refuses."""
        now = self._clock()
        counted = self._calls(policy, identity, tool_id, run, now)
        if not counted:
            return None
        spent = self.store.spent([spend.counter for _, spend in counted])
        for budget, spend in counted:
            if spent.get(spend.counter, 0.0) + spend.amount > spend.limit:
                return stop_line(budget, "calls", identity, run, now)
        return None

    def _calls(
        self, policy: Policy, identity: Identity, tool_id: str, run: str | None, now: float
    ) -> list[tuple[Budget, Spend]]:
        """Each ``calls`` budget one call of ``tool_id`` counts against, with what it adds."""
        return [
            (b, spend)
            for b in self.of(policy, identity)
            if b.calls is not None
            and b.targets.fullmatch(tool_id)
            and (spend := _spend(b, "calls", identity, run, now, 1.0)) is not None
        ]

    # -- model usage ---------------------------------------------------------------------------

    def check_model(self, policy: Policy, identity: Identity, run: str | None) -> str | None:
        """None while every ``tokens`` and ``cost`` budget of the caller has some left; else
        the line that stops the next model request."""
        now = self._clock()
        counted = [
            (b, metric, spend)
            for b in self.of(policy, identity)
            for metric in MODEL_METRICS
            if b.limit(metric) is not None
            and (spend := _spend(b, metric, identity, run, now, 0.0)) is not None
        ]
        if not counted:
            return None
        spent = self.store.spent([spend.counter for _, _, spend in counted])
        for budget, metric, spend in counted:
            if spent.get(spend.counter, 0.0) >= spend.limit:
                return stop_line(budget, metric, identity, run, now)
        return None

    def spend_model(
        self,
        policy: Policy,
        identity: Identity,
        run: str | None,
        key: str | None,
        tokens: int,
        cost: float | None,
    ) -> None:
        """Add what one model response used to the caller's ``tokens`` and ``cost`` budgets,
        once per ``key``."""
        now = self._clock()
        used = {"tokens": float(tokens), "cost": cost}
        spends = [
            spend
            for b in self.of(policy, identity)
            for metric in MODEL_METRICS
            if b.limit(metric) is not None
            and (amount := used[metric]) is not None
            and (spend := _spend(b, metric, identity, run, now, amount)) is not None
        ]
        if spends:
            self.store.add(key, spends, now)

    def unpriced(self, model: str) -> None:
        """Say once per model that its responses count no cost (no price data for it)."""
        if model not in self._unpriced:
            self._unpriced.add(model)
            log.warning("no price data for model %s: its responses count no cost", model)

    # -- reports -------------------------------------------------------------------------------

    def report(self, policy: Policy, limit: int = 1000) -> list[BudgetLine]:
        """Every live counter of the policy's budgets (what is spent, what is left), and each
        team budget's counter of the current window even before its first use."""
        now = self._clock()
        by_name = {b.name: b for b in policy.budgets}
        lines: dict[str, BudgetLine] = {}
        for counter, spent, _updated in self.store.listing(now, limit):
            parsed = _parse(counter)
            if parsed is None or parsed[0] not in by_name:
                continue
            name, metric, per, scope, start = parsed
            budget = by_name[name]
            limit_of = budget.limit(metric)
            if limit_of is None or per != budget.per or start != _window(budget, now):
                continue
            lines[counter] = BudgetLine(name, metric, per, scope, spent, limit_of,
                                        _window_text(budget, start))  # fmt: skip
        for budget in policy.budgets:
            if budget.per != "team":
                continue
            for metric in ("tokens", "cost", "calls"):
                limit_of = budget.limit(metric)
                start = _window(budget, now)
                counter = _counter(budget, metric, "", start)
                if limit_of is not None and counter not in lines:
                    lines[counter] = BudgetLine(budget.name, metric, "team", "", 0.0, limit_of,
                                                _window_text(budget, start))  # fmt: skip
        order = {b.name: b.index for b in policy.budgets}
        return sorted(lines.values(), key=lambda x: (order[x.budget], x.metric, x.scope))


def stop_line(budget: Budget, metric: str, identity: Identity, run: str | None, now: float) -> str:
    """The one line that says which budget stopped a call, and until when."""
    limit = budget.limit(metric)
    amount = f"{limit:g} USD of model cost" if metric == "cost" else f"{limit:g} {metric}"
    who = {"principal": f"per principal ({identity.id})", "run": f"per run ({run})",
           "team": "for the team"}[budget.per]  # fmt: skip
    line = f"over budget: {budget.name!r} allows {amount} {who}"
    if budget.period is not None:
        ends = _window(budget, now) + budget.period
        line += f", until {datetime.fromtimestamp(ends, UTC):%Y-%m-%d %H:%M:%S} UTC"
    return line + ", and it is spent"


def _scope(budget: Budget, identity: Identity, run: str | None) -> str | None:
    """The principal or run a counter of ``budget`` counts ("" for the team; None: a per-run
    budget for a call made outside any run)."""
    if budget.per == "principal":
        return identity.id
    if budget.per == "run":
        return run or None
    return ""


def _window(budget: Budget, now: float) -> float:
    """The start of the current window (0 without a period)."""
    if budget.period is None:
        return 0.0
    return math.floor(now / budget.period) * budget.period


def _window_text(budget: Budget, start: float) -> str:
    if budget.period is None:
        return "total"
    return f"per {budget.period_text} from {datetime.fromtimestamp(start, UTC):%Y-%m-%d %H:%M} UTC"


def _counter(budget: Budget, metric: str, scope: str, start: float) -> str:
    """One counter's name: JSON, so no two (budget, metric, per, scope, window) share one."""
    return json.dumps([budget.name, metric, budget.per, scope, start])


def _parse(counter: str) -> tuple[str, str, str, str, float] | None:
    try:
        name, metric, per, scope, start = json.loads(counter)
        return str(name), str(metric), str(per), str(scope), float(start)
    except (ValueError, TypeError):
        return None


def _spend(
    budget: Budget, metric: str, identity: Identity, run: str | None, now: float, amount: float
) -> Spend | None:
    """What a use adds to ``budget``'s ``metric`` counter of this caller (None: none applies)."""
    scope = _scope(budget, identity, run)
    limit = budget.limit(metric)
    if scope is None or limit is None:
        return None
    start = _window(budget, now)
    if budget.period is not None:
        expires: float | None = start + budget.period
    elif budget.per == "run":
        expires = now + RUN_COUNTER_TTL
    else:
        expires = None
    return Spend(_counter(budget, metric, scope, start), amount, float(limit), expires)
