"""Calls through the toolset: identity for the ACL, hostile arguments, errors the run survives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apcore import Identity
from apcore.decorator import module

from bridges._apcore_support import Who, allow_agents, build_crm, executor_for, returns_of, run
from toolcards.bridges.apcore import ApcoreToolset
from toolcards.core.errors import RetriableError


def _by_id(result: Any) -> dict[str, Any]:
    return {part.tool_call_id: part for part in returns_of(result)}


def test_allowed_caller_gets_the_module_result() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.sales"))
    result = run(toolset, [("crm_read", {"customer": "c1"})])
    assert _by_id(result)["c0_0"].content == {"customer": "c1", "plan": "gold"}
    assert result.output == "done"


def test_acl_denial_is_a_readable_failure_and_the_run_continues() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("guest.bob"))
    result = run(toolset, [("crm_read", {"customer": "c1"})])
    part = _by_id(result)["c0_0"]
    assert part.outcome == "failed"
    assert "Access denied" in str(part.content)
    assert crm.executed == []
    assert result.output == "done"


def test_roles_reach_the_acl_condition() -> None:
    crm = build_crm()
    executor = executor_for(crm, acl=allow_agents(roles=["data_admin"]))
    admin = ApcoreToolset(crm.registry, executor, identity=Who("agent.a", roles=("data_admin",)))
    plain = ApcoreToolset(crm.registry, executor, identity=Who("agent.b", roles=("viewer",)))
    assert _by_id(run(admin, [("crm_read", {"customer": "c1"})]))["c0_0"].outcome == "success"
    assert _by_id(run(plain, [("crm_read", {"customer": "c1"})]))["c0_0"].outcome == "failed"


def test_no_identity_is_anonymous_and_denied_by_default_deny() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm))
    assert _by_id(run(toolset, [("crm_read", {"customer": "c1"})]))["c0_0"].outcome == "failed"


@dataclass
class Deps:
    caller: str
    roles: tuple[str, ...]


def test_identity_resolver_reads_the_run_context_and_wins_over_identity() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(
        crm.registry,
        executor_for(crm, acl=allow_agents(roles=["ops"])),
        identity=Who("guest.fixed"),
        identity_resolver=lambda ctx: Who(ctx.deps.caller, roles=ctx.deps.roles),
    )
    ok = run(toolset, [("crm_read", {"customer": "c1"})], deps=Deps("agent.x", ("ops",)))
    denied = run(toolset, [("crm_read", {"customer": "c1"})], deps=Deps("agent.x", ()))
    assert _by_id(ok)["c0_0"].outcome == "success"
    assert _by_id(denied)["c0_0"].outcome == "failed"


def test_async_resolver_and_apcore_identity_are_accepted() -> None:
    crm = build_crm()

    async def resolve(ctx: Any) -> Identity:
        return Identity(id="agent.async", type="agent")

    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity_resolver=resolve)
    assert _by_id(run(toolset, [("crm_read", {"customer": "c1"})]))["c0_0"].outcome == "success"


def test_identity_smuggled_in_arguments_is_refused() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("guest.bob"))
    forged = {"customer": "c1", "identity": {"id": "agent.root", "roles": ["data_admin"]}}
    result = run(toolset, [("crm_read", forged)], [("crm_read", {"customer": "c1"})])
    parts = _by_id(result)
    assert parts["c0_0"].outcome == "retried"
    assert "identity" in str(parts["c0_0"].content)
    assert parts["c1_0"].outcome == "failed"  # still guest.bob, still denied
    assert crm.executed == []


def test_control_fields_are_stripped_before_apcore_sees_them() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.a"))
    args = {"customer": "c1", "_apcore.mw.retry.count": 9, "_anything": 1}
    result = run(toolset, [("crm_read", args)])
    assert _by_id(result)["c0_0"].outcome == "success"
    assert crm.executed == [("crm.read", {"customer": "c1"})]


def test_invalid_arguments_become_a_retry_and_the_model_can_fix_them() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.a"))
    result = run(toolset, [("crm_read", {"customer": 42})], [("crm_read", {"customer": "c2"})])
    parts = _by_id(result)
    assert parts["c0_0"].outcome == "retried"
    assert "/customer" in str(parts["c0_0"].content)
    assert parts["c1_0"].outcome == "success"


def test_invalid_arguments_after_the_retry_budget_fail_without_ending_the_run() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.a"), max_retries=1)
    bad = [("crm_read", {"customer": 42})]
    result = run(toolset, bad, bad, bad)
    outcomes = [part.outcome for part in returns_of(result)]
    assert outcomes == ["retried", "failed", "failed"]
    assert result.output == "done"


def test_module_exception_is_a_readable_failure() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.a"))
    result = run(toolset, [("crm_crash", {"customer": "c1"})])
    part = _by_id(result)["c0_0"]
    assert part.outcome == "failed"
    assert "database offline for c1" in str(part.content)
    assert result.output == "done"


def test_non_object_arguments_are_sent_back_for_a_retry() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.a"))
    result = run(toolset, [("crm_read", '["c1"]')], [("crm_read", {"customer": "c1"})])
    parts = _by_id(result)
    assert parts["c0_0"].outcome == "retried"
    assert parts["c1_0"].outcome == "success"


def test_identity_without_an_id_is_rejected_at_construction() -> None:
    crm = build_crm()
    try:
        ApcoreToolset(crm.registry, executor_for(crm), identity=Who(""))
    except TypeError as exc:
        assert "id" in str(exc)
    else:
        raise AssertionError("an identity without id was accepted")


def test_retriable_module_error_becomes_a_retry() -> None:
    crm = build_crm()
    attempts: list[str] = []

    @module(id="crm.flaky", registry=crm.registry)
    def flaky(customer: str) -> dict[str, Any]:
        """Fails until asked for an upper-case id.

        Args:
            customer: Customer id.
        """
        attempts.append(customer)
        if customer != customer.upper():
            raise RetriableError("customer ids are upper-case, e.g. C1")
        return {"customer": customer}

    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.a"))
    result = run(toolset, [("crm_flaky", {"customer": "c1"})], [("crm_flaky", {"customer": "C1"})])
    parts = _by_id(result)
    assert parts["c0_0"].outcome == "retried"
    assert "upper-case" in str(parts["c0_0"].content)
    assert parts["c1_0"].content == {"customer": "C1"}


def test_governance_identity_is_mapped_for_the_acl() -> None:
    from toolcards.governance import Identity as GovernanceIdentity

    crm = build_crm()
    toolset = ApcoreToolset(
        crm.registry,
        executor_for(crm, acl=allow_agents(roles=["ops"])),
        identity=GovernanceIdentity("agent.gov", type="agent", roles=["ops"]),
    )
    assert _by_id(run(toolset, [("crm_read", {"customer": "c1"})]))["c0_0"].outcome == "success"
