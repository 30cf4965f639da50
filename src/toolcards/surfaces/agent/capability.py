"""GovernedCards: governed cards as one pydantic-ai capability, in code and in agent specs.

```python
agent = Agent(model, capabilities=[GovernedCards([WorkspaceTool()], policy=policy, identity=me)])
agent = Agent.from_file("agent.yaml", custom_capability_types=[GovernedCards])
```

The tools are a :class:`~toolcards.governance.GovernedToolset` over the factory's toolset: the
same executor, policy, approvals and audit rows as ``GovernedToolset(factory.toolset(), ...)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic_ai import AgentRunResult, RunContext
from pydantic_ai.capabilities import WrapRunHandler
from pydantic_ai.messages import Authority, ModelResponse
from pydantic_ai.models import ModelRequestContext

from toolcards.core.agent_capability import CardsCapability
from toolcards.core.card import ToolCard
from toolcards.core.factory import ToolFactory
from toolcards.core.identity import Identity
from toolcards.core.trust import HostTrust
from toolcards.governance.approvals.broker import Approver
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.card_reads import CardReads
from toolcards.governance.executor.pipeline import Executor
from toolcards.governance.guardrails import ToolHook
from toolcards.governance.policy.policy import Policy
from toolcards.governance.toolset.budget import ModelBudget
from toolcards.governance.toolset.governed import GovernedToolset
from toolcards.stores.base import BudgetStore
from toolcards.stores.call_results import CallResults
from toolcards.surfaces.agent.spec_args import (
    SPEC_KEYS,
    SpecPaths,
    known_keys,
    spec_audit,
    spec_bounded,
    spec_call_results,
    spec_cards,
    spec_folder,
    spec_hooks,
    spec_identity,
    spec_policy,
)

SPEC_NAME = "toolcards"
"""The capability's name in agent specs (``capabilities: [{toolcards: {...}}]``)."""
_MAX_RUNS = 1024  # runs whose last model request is kept until they end


@dataclass(init=False)
class GovernedCards(CardsCapability):
    """Cards as a capability: their tools (governed when a ``policy`` or ``executor`` is
    given), and before each request each card's summary and per-turn context as team state:
    data (``none`` authority) unless the host's code passes ``authority="operator"`` (an agent
    spec cannot: :meth:`from_spec` takes no such key). Governed, a
    card's state reaches the caller only when the policy lets it call one of the card's tools
    or allows it ``context:<CardType>`` (:mod:`toolcards.governance.card_reads`).

    ``cards`` are cards or a bound :class:`~toolcards.ToolFactory` (``team.bind(...)``).
    ``identity`` is the caller every call is decided for (never read from arguments);
    ``audit``, ``approver`` (or ``"defer"``, ``"refuse"``), ``hooks`` (guardrails, see
    :mod:`toolcards.governance.guardrails`) and ``call_results`` (durable runs: a call runs
    once per run id and tool call id) mean what they mean on ``GovernedToolset``; ``budgets``
    is the store the policy's budgets are counted in (default: this process's memory; a
    team's shared store, see ``toolcards.stores.open.open_budgets``): calls are counted by the
    executor, model tokens and cost by this capability's model request hooks. With an
    ``executor``, its own policy, audit, hooks and budgets apply. Without ``policy`` and
    ``executor`` the tools are not governed (``identity``, ``audit``, ``approver``, ``hooks``,
    ``call_results`` and ``budgets`` are then a ``TypeError``).
    """

    policy: Policy | None = None
    identity: Identity | None = None
    executor: Executor | None = field(default=None, repr=False)
    budget: ModelBudget | None = field(default=None, repr=False)
    """The model request hooks of the executor's budgets (None: not governed)."""
    host_trust: ClassVar[HostTrust | None] = None
    """What cards of an agent spec may do on this host (see :meth:`trusting`); None: nothing."""

    def __init__(
        self,
        cards: Iterable[ToolCard] | ToolFactory,
        *,
        policy: Policy | None = None,
        identity: Identity | None = None,
        audit: AuditLog | None = None,
        executor: Executor | None = None,
        approver: Approver | Literal["defer", "refuse"] = "defer",
        hooks: Sequence[ToolHook] = (),
        call_results: CallResults | None = None,
        budgets: BudgetStore | None = None,
        authority: Authority = "none",
        id: str | None = None,
        description: str | None = None,
    ) -> None:
        factory = cards if isinstance(cards, ToolFactory) else ToolFactory(cards)
        governed: GovernedToolset | None = None
        if policy is not None or executor is not None:
            if executor is None:
                assert policy is not None
                executor = Executor(
                    CapabilityRegistry(), policy, audit=audit, hooks=hooks, budgets=budgets
                )
            elif hooks or audit is not None or policy is not None or budgets is not None:
                raise TypeError(
                    "GovernedCards: with executor=, its policy, audit, hooks and budgets apply"
                )
            governed = GovernedToolset(
                factory.toolset(),
                executor=executor,
                identity=identity,
                approver=approver,
                call_results=call_results,
            )
        else:
            given = {
                "identity": identity,
                "audit": audit,
                "approver": None if approver == "defer" else approver,
                "hooks": hooks or None,
                "call_results": call_results,
                "budgets": budgets,
            }
            named = [name for name, value in given.items() if value is not None]
            if named:
                raise TypeError(f"GovernedCards: {', '.join(named)} need policy= or executor=")
        readable = None
        if governed is not None:
            readable = CardReads(governed.policy, governed.resolve_identity)
        super().__init__(factory, governed, authority, readable, id=id, description=description)
        self.policy = governed.policy if governed is not None else None
        self.identity = identity
        self.executor = executor
        self.budget = None
        self.last_requests: dict[str | None, RunContext[Any]] = {}
        """The context of each running run's last model request, by run id (bounded)."""
        if governed is not None:
            self.budget = ModelBudget(executor, governed.resolve_identity)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """A spent model budget stops the run here; then the cards' state (see
        :class:`~toolcards.core.agent_capability.CardsCapability`)."""
        if self.budget is not None:
            request_context = await self.budget.before_model_request(ctx, request_context)
        return await super().before_model_request(ctx, request_context)

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        """What the response used is counted against the caller's model budgets; the request's
        context is kept for :meth:`wrap_run` (its live messages will hold the response)."""
        if self.budget is None:
            return response
        last = self.last_requests
        last.pop(ctx.run_id, None)  # newest last: the oldest goes first
        if len(last) >= _MAX_RUNS:  # a run that never reached wrap_run (loaded mid-run)
            del last[next(iter(last))]
        last[ctx.run_id] = ctx
        return await self.budget.after_model_request(
            ctx, request_context=request_context, response=response
        )

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """However the run ends (an output, a failure), the governed toolset writes the hidden
        calls of its last response, which no next step will (``GovernedToolset.record_run_end``),
        with the context of the last model request: this hook's own keeps the run's first
        messages and tool manager, not the ones that answered that response."""
        try:
            return await handler()
        finally:
            last = self.last_requests.pop(ctx.run_id, None)
            if last is not None and isinstance(self.toolset, GovernedToolset):
                await self.toolset.record_run_end(last)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return SPEC_NAME

    @classmethod
    def trusting(cls, trust: HostTrust | object) -> type[GovernedCards]:
        """``GovernedCards`` for agent specs whose cards may do on this host what ``trust`` allows
        (a :class:`~toolcards.HostTrust`): ``Agent.from_spec(spec, custom_capability_types=
        [GovernedCards.trusting(HostTrust(execution=["local"]))])``. The trust is the host's
        choice, made in code: a spec cannot name one."""
        decided = HostTrust.of(trust)
        named = type(cls.__name__, (cls,), {"__module__": cls.__module__, "host_trust": decided})
        return dataclass(init=False)(named)

    @classmethod
    def from_spec(
        cls,
        cards: list[dict[str, Any]] | None = None,
        policy: str | dict[str, Any] | None = None,
        identity: str | dict[str, Any] | None = None,
        audit: str | None = None,
        secret_scanner: bool | dict[str, Any] | None = None,
        call_results: str | None = None,
        team: str | None = None,
        **unknown: Any,
    ) -> GovernedCards:
        """From an agent spec: ``cards`` as tagged mappings, ``policy`` a file or a mapping,
        ``identity`` an id or ``{id, type, roles}``, ``audit`` a database path or URL,
        ``secret_scanner`` true or ``{action, tools}`` (the built-in output guardrail; a spec
        names no code), ``call_results`` a database path or URL (durable runs; see
        :func:`~toolcards.surfaces.agent.spec_args.spec_store` for what a spec may name),
        ``team`` the team whose rows ``audit`` and ``call_results`` hold (needed with a shared
        database, which holds many teams). Files lie in the spec file's folder under
        ``Agent.from_file`` (a spec given as a mapping names none); an unknown key is refused
        with the closest known one.

        The cards load with :attr:`host_trust` (see :meth:`trusting`). A spec without a
        ``policy`` is refused: the tools a spec names are governed (for ungoverned tools, build
        ``ToolFactory(cards).capability()`` in code)."""
        known_keys(unknown, SPEC_KEYS, "toolcards")
        spec_bounded(
            cards=cards, policy=policy, identity=identity, audit=audit, team=team,
            secret_scanner=secret_scanner, call_results=call_results,
        )  # fmt: skip
        paths = SpecPaths(spec_folder())
        loaded = spec_cards(cards, cls.host_trust)
        governed = spec_policy(policy, paths)
        caller = spec_identity(identity)
        hooks = spec_hooks(secret_scanner)
        if governed is None:
            raise ValueError(
                "toolcards: needs a policy (a file path or a mapping of rules): the tools a "
                "spec names are governed; ungoverned tools are built in code "
                "(ToolFactory(cards).capability())"
            )
        return cls(
            loaded,
            policy=governed,
            identity=caller,
            audit=spec_audit(audit, cls.host_trust, team, paths),
            hooks=hooks,
            call_results=spec_call_results(call_results, cls.host_trust, team, paths),
        )
