"""ModelBudget: the budgets a team shares, applied to a pydantic-ai run's model requests.

Before each model request the run's caller is checked against its ``tokens`` and ``cost``
budgets (one read of the team's store): a spent budget stops the run with
:class:`BudgetExceeded` (a pydantic-ai ``UsageLimitExceeded``) and one clear line, and writes
one ``over_budget`` audit row. After each
response, what it used is added: its tokens (input and output), and its cost from pydantic-ai's
price data (``ModelResponse.cost()``; a model without price data counts no cost, said once),
once per run step and attempt, so a durable run's replayed response is not counted again.

``GovernedCards`` applies its executor's budgets this way; a team's members get one each; an agent
built otherwise adds ``ModelBudget(executor, identity)`` to its capabilities.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import AgentRunError, UsageLimitExceeded
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import ModelRequestContext

from toolcards.core.errors import ToolcardsError
from toolcards.core.identity import ANONYMOUS, Identity, joined_key
from toolcards.governance.audit.log import AuditRecord, made_by
from toolcards.governance.outcomes import Outcome

__all__ = ["BudgetExceeded", "ModelBudget"]

SURFACE = "pydantic-ai"
MODEL_REQUEST = "model_request"
"""The tool name of the audit row of a model request a budget stopped."""


class BudgetExceeded(ToolcardsError, UsageLimitExceeded):
    """A budget the team shares is spent: the run stops before its next model request. The
    message is one line naming the budget (pydantic-ai's usage-limit hint is not added: it is
    about the run's own limits)."""

    def __init__(self, message: str) -> None:
        AgentRunError.__init__(self, message)


@dataclass
class ModelBudget(AbstractCapability[Any]):
    """Counts a run's model usage against the budgets of ``executor``'s policy, in its budget
    store, for the caller ``identity`` (an :class:`Identity`, or a function of the run
    context)."""

    executor: Any = field(repr=False)
    """The :class:`~toolcards.governance.executor.pipeline.Executor` whose policy, budgets and
    audit log apply (not imported here: the toolset layer sits above the executor)."""
    identity: Identity | Callable[[RunContext[Any]], Identity | None] | None = None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # it holds live objects: built in code, never from a spec

    def caller(self, ctx: RunContext[Any]) -> Identity:
        found = self.identity
        if found is not None and not isinstance(found, Identity):
            found = found(ctx)
        return found if isinstance(found, Identity) else ANONYMOUS

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        executor = self.executor
        if not executor.policy.budgets:
            return request_context
        who = self.caller(ctx)
        stop = await anyio.to_thread.run_sync(
            executor.budgets.check_model, executor.policy, who, ctx.run_id
        )
        if stop is not None:
            self._audit(ctx, who, stop)
            raise BudgetExceeded(stop)
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        executor = self.executor
        if not executor.policy.budgets:
            return response
        usage = response.usage
        tokens = int(usage.input_tokens or 0) + int(usage.output_tokens or 0)
        priced = any(b.cost is not None for b in executor.policy.budgets)
        cost = self._cost(response) if priced else None
        step = f"{ctx.run_step}.{request_context.attempt}"
        key = joined_key("model", ctx.run_id or "", step) if ctx.run_id else None
        await anyio.to_thread.run_sync(
            executor.budgets.spend_model, executor.policy, self.caller(ctx), ctx.run_id, key,
            tokens, cost,
        )  # fmt: skip
        return response

    def _cost(self, response: ModelResponse) -> float | None:
        """The response's price in US dollars (None: no price data for its model)."""
        try:
            return float(response.cost().total_price)
        except (LookupError, ValueError):
            reported = getattr(response.usage, "cost", None)
            if reported is not None:
                return float(reported)
            self.executor.budgets.unpriced(response.model_name or "(unnamed)")
            return None

    def _audit(self, ctx: RunContext[Any], who: Identity, stop: str) -> None:
        audit = self.executor.audit
        if audit is None:
            return
        audit.record(
            AuditRecord(
                time.time(),
                *made_by(who),
                surface=SURFACE,
                tool=MODEL_REQUEST,
                call_id=joined_key("model", ctx.run_id or "", str(ctx.run_step)),
                args={"run_id": ctx.run_id, "run_step": ctx.run_step},
                decision="deny",
                outcome=Outcome.OVER_BUDGET.value,
                reason=stop,
                error=stop,
            )
        )
