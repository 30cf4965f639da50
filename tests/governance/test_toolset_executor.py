"""GovernedToolset and its executor: a given executor is shared as it is, never changed; the
options that belong to an executor go to the one the toolset builds itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent

from support.scripted import SequenceScript as Script
from toolcards.governance import (
    AuditLog,
    CapabilityRegistry,
    Executor,
    GovernedToolset,
    Identity,
    Policy,
    Telemetry,
)

from .conftest import POLICY_PATH, Recorder

ALICE = Identity("alice", roles=["data_admin"])
BOB = Identity("bob", roles=["sales"])


def _shared() -> Executor:
    return Executor(CapabilityRegistry(), Policy.from_yaml(POLICY_PATH))


def test_an_audit_log_beside_a_shared_executor_leaves_the_executor_unchanged(
    recorder: Recorder, tmp_path: Path
) -> None:
    executor = _shared()
    with AuditLog(tmp_path / "audit.db") as audit, pytest.raises(TypeError, match="audit"):
        GovernedToolset(recorder.toolset, executor=executor, audit=audit)
    assert executor.audit is None
    assert executor.approvals.audit is None


def test_a_policy_beside_a_shared_executor_is_a_type_error(recorder: Recorder) -> None:
    with pytest.raises(TypeError, match="not both"):
        GovernedToolset(recorder.toolset, executor=_shared(), policy=Policy.allow_all())


def test_with_policy_builds_an_executor_with_its_options(recorder: Recorder) -> None:
    toolset = GovernedToolset.with_policy(
        recorder.toolset, Policy.allow_all(), timeout=5.0, telemetry=Telemetry(enabled=False)
    )
    assert toolset.executor.timeout == 5.0
    assert toolset.executor.telemetry.enabled is False


def test_a_toolset_over_a_shared_executor_decides_by_the_executors_policy(
    recorder: Recorder,
) -> None:
    toolset = GovernedToolset(recorder.toolset, executor=_shared(), identity=BOB, hide_denied=False)
    agent: Agent[None, Any] = Agent(Script([("crm_delete", {"id": 1})]).model, toolsets=[toolset])
    result = agent.run_sync("delete record 1")
    assert result.output == "crm_delete: success: denied: crm_delete is not permitted for bob"
    assert recorder.calls == []


def test_a_toolset_needs_a_policy_or_an_executor(recorder: Recorder) -> None:
    with pytest.raises(TypeError, match="policy="):
        GovernedToolset(recorder.toolset)


def test_the_toolsets_own_executor_writes_to_the_given_audit_log(
    recorder: Recorder, tmp_path: Path
) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        toolset = GovernedToolset(
            recorder.toolset, policy=Policy.from_yaml(POLICY_PATH), identity=ALICE, audit=audit
        )
        agent: Agent[None, Any] = Agent(Script([("crm_read", {"id": 7})]).model, toolsets=[toolset])
        agent.run_sync("read record 7")
        rows = audit.query()
    assert [(r.tool, r.outcome) for r in rows] == [("crm_read", "ok")]
