"""A governed ``register_notification`` runs once per call id: a retry of a committed call
(its answer lost, the caller retrying under the same id) schedules nothing more and answers
the recorded result, also after a restart; another call id schedules another one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from toolcards import NotificationTool
from toolcards.governance import Identity, Policy
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import ExecutionResult, Executor, Outcome
from toolcards.runtime import Team
from toolcards.tools.notification.models import ACTOR_NAME

ARGS = {"content": "check the build", "delay_seconds": 60}


def _call(team: Team, call_id: str) -> ExecutionResult:
    factory = team.bind([NotificationTool()], "alice")
    executor = Executor(CapabilityRegistry.from_factory(factory), Policy.allow_all())
    return asyncio.run(
        executor.call("register_notification", ARGS, Identity("alice"), call_id=call_id)
    )


def _stored(team: Team) -> list[str]:
    return [value["content"] for _, value in team.state_of(ACTOR_NAME).items("entry:")]


def test_a_retry_with_the_same_call_id_schedules_nothing_more(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "t.db") as team:
        first = _call(team, "c-1")
        retry = _call(team, "c-1")
        assert retry.outcome is Outcome.OK
        assert retry.value == first.value == "notification #1 scheduled in 60s"
        assert _stored(team) == ["check the build"]


def test_a_retry_after_a_restart_schedules_nothing_more(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "t.db") as team:
        _call(team, "c-1")
    with Team.resume("t", store=tmp_path / "t.db") as team:
        assert _call(team, "c-1").value == "notification #1 scheduled in 60s"
        assert _stored(team) == ["check the build"]


def test_another_call_id_schedules_another_notification(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "t.db") as team:
        _call(team, "c-1")
        assert _call(team, "c-2").value == "notification #2 scheduled in 60s"
        assert _stored(team) == ["check the build", "check the build"]
