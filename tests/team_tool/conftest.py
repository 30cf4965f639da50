"""Teams with scripted members for the TeamTool tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.scripted import ScriptedMember
from toolcards.runtime import RoleProfile, Team


def tools_of(factory: Any) -> dict[str, Any]:
    return {fn.__name__: fn for fn in factory.get_tools()}


@pytest.fixture
def worker() -> ScriptedMember:
    return ScriptedMember()


@pytest.fixture
def team(worker: ScriptedMember) -> Iterator[Team]:
    quiet = ScriptedMember()
    profiles = [
        RoleProfile(role="lead", description="Runs the team", model=quiet.model),
        RoleProfile(role="worker", description="Does the work", model=worker.model),
        RoleProfile(role="boss", description="Owns the budget", model=quiet.model),
    ]
    with Team("team-tool-test", ":memory:", profiles=profiles) as t:
        yield t
