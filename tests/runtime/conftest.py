"""Teams on every backend: the runtime tests run once per store and actor system.

``make_team`` is parametrized over SQLite + Pykka (the embedded default), PostgreSQL + Pykka
(several processes on one store) and PostgreSQL + Ray (a real two-node cluster). Tests whose
actors share Python objects with the test (events, gates) use ``make_local_team``, which
leaves Ray out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolcards.runtime import Team

_namespaces = itertools.count(1)


class TeamMaker:
    """Builds teams on one backend and stops them (everywhere) at the end of the test."""

    def __init__(self, backend: str, store: str, system: Callable[[str], Any]) -> None:
        self.backend = backend
        self.store = store
        self._system = system
        self._teams: list[Team] = []

    def __call__(self, team_id: str, **kwargs: Any) -> Team:
        kwargs.setdefault("store", self.store)
        kwargs.setdefault("system", self._system(team_id))
        team = Team(team_id, **kwargs)
        self._teams.append(team)
        return team

    def resume(self, team_id: str, **kwargs: Any) -> Team:
        kwargs.setdefault("system", self._system(team_id))
        team = Team.resume(team_id, self.store, **kwargs)
        self._teams.append(team)
        return team

    @property
    def distributed(self) -> bool:
        return self.backend == "ray"

    def close(self) -> None:
        """Stop every team made so far (and, on Ray, its actors)."""
        teams, self._teams = self._teams, []
        for team in teams:
            team.stop(everywhere=True)


def _maker(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> TeamMaker:
    if backend == "sqlite":
        return TeamMaker(backend, str(tmp_path / "team.db"), lambda _: None)
    url = request.getfixturevalue("postgres_url")
    if backend == "postgres":
        return TeamMaker(backend, url, lambda _: None)
    request.getfixturevalue("ray_cluster")
    from toolcards.runtime import RayActorSystem

    run = next(_namespaces)
    return TeamMaker(backend, url, lambda team_id: RayActorSystem(namespace=f"r{run}-{team_id}"))


@pytest.fixture(params=["sqlite", "postgres", "ray"])
def make_team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamMaker]:
    maker = _maker(request, tmp_path, request.param)
    try:
        yield maker
    finally:
        maker.close()


@pytest.fixture(params=["sqlite", "postgres"])
def make_local_team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamMaker]:
    maker = _maker(request, tmp_path, request.param)
    try:
        yield maker
    finally:
        maker.close()
