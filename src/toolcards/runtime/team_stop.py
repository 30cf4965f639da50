"""``Team.stop()``: members, then tool actors, each phase bounded; what it did as a report."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from toolcards.runtime import process
from toolcards.runtime.system import ActorSystem

__all__ = ["StopReport", "stop_team"]

logger = logging.getLogger("toolcards.runtime.team")


@dataclass
class StopReport:
    """What ``Team.stop()`` did: actors stopped cleanly and actors abandoned (still busy)."""

    stopped: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.abandoned


def stop_team(team: Any, bound: float, everywhere: bool) -> StopReport:
    """Stop ``team`` (a :class:`~toolcards.runtime.team.Team`, which calls this from
    :meth:`~toolcards.runtime.team.Team.stop`); each phase waits at most ``bound`` seconds."""
    with team._lock:
        done: StopReport | None = team._stop_report
        if done is not None:
            return done
        team._stop_report = report = StopReport()
    team._roster.retire_all()
    local = team._local.names()
    phases: list[tuple[ActorSystem, list[str]]] = [
        (team._local, [n for n in local if not n.startswith("#")]),
        (team._local, [n for n in local if n[:1] == "#"]),
    ]
    if team.system is not team._local:
        remote = team.system.names() if everywhere else []
        phases.insert(1, (team.system, [n for n in remote if n.startswith("@")]))
        phases.insert(2, (team.system, [n for n in remote if n.startswith("#")]))
    for system, phase in phases:
        abandoned = system.stop(phase, bound)
        report.abandoned.extend(abandoned)
        report.stopped.extend(n for n in phase if n not in abandoned)
    late = team._local.names()  # spawned while the phases ran (a cache's last worker)
    if late:
        abandoned = team._local.stop(late, min(bound, 0.5))
        report.abandoned.extend(abandoned)
        report.stopped.extend(n for n in late if n not in abandoned)
    if report.abandoned:
        logger.warning("team %s abandoned busy actors: %s", team.team_id, report.abandoned)
    if not team.read_only:  # a team opened to be looked at leaves no trace
        team.log.lifecycle("team_stopped", stopped=report.stopped, abandoned=report.abandoned)
        team._store.mark_stopped(team.team_id)
    team.log.close()
    deadline = time.monotonic() + bound
    for sub in team._subscriptions:
        sub.drain(timeout=max(deadline - time.monotonic(), 0.0))
    team._observers.clear()
    team._local.shutdown()
    if team._owns_system and team.system is not team._local:
        team.system.shutdown()
    process.unclaim(team)
    process.release_store(team._store)
    return report
