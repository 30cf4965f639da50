"""The planning board as a view of the team's state (the card's RESOURCE channel): the MCP
resource ``toolcards://team/<team>/planning`` and the dashboard's Plan panel."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

from toolcards.core.views import Panel, TeamReader, TeamView
from toolcards.tools.planning.actor import ACTOR_NAME
from toolcards.tools.planning.models import STATUSES, Task
from toolcards.tools.planning.stored import TASK, StoredPlan

if TYPE_CHECKING:
    from toolcards.stores.base import StateNamespace

MAX_TASKS = 500
"""Tasks a read returns at most (the rest are counted)."""

PANEL = Panel("Plan", resources.files(__package__).joinpath("panel.html").read_text("utf-8"))


def board(team: TeamReader, variables: Mapping[str, str], query: str) -> dict[str, Any]:
    """The first :data:`MAX_TASKS` tasks by id with status, owner and dependencies, read from
    the planning actor's stored state (what it wrote before announcing a change): also of a
    team opened read-only, which runs no actor."""
    state = team.state_of(ACTOR_NAME)
    total = state.count(TASK)
    if total == 0 and team.actor(ACTOR_NAME) is None:
        return {"available": False, "tasks": [], "total": 0, "statuses": list(STATUSES)}
    return {
        "available": True,
        "tasks": [task.model_dump(mode="json") for task in _first(state)],
        "total": total,
        "statuses": list(STATUSES),
    }


def _first(state: StateNamespace) -> list[Task]:
    """The first :data:`MAX_TASKS` tasks by id, read by key while the summary row is current;
    else the first in key order (``task:10`` before ``task:2``), by id. Either way only the
    rows shown are read: a board holds thousands of tasks."""
    stored = StoredPlan(state)
    stored.restore()
    found = stored.first(MAX_TASKS)
    if found is None:
        rows = itertools.islice(state.iter_items(TASK, batch=MAX_TASKS), MAX_TASKS)
        found = sorted((Task.model_validate(value) for _, value in rows), key=lambda t: t.id)
    return found


BOARD = TeamView(
    "planning",
    "planning",
    "The team's planning board: every task with status, owner and dependencies.",
    board,
    (ACTOR_NAME,),
    PANEL,
    key="plan",
)
