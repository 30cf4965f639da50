"""The planning board as a view of the team's state (the card's RESOURCE channel): the MCP
resource ``toolcards://team/<team>/planning`` and the dashboard's Plan panel."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

from toolcards.core.views import Panel, TeamReader, TeamView
from toolcards.tools.planning.actor import ACTOR_NAME
from toolcards.tools.planning.models import STATUSES, Task
from toolcards.tools.planning.stored import TASK

MAX_TASKS = 500
"""Tasks a read returns at most (the rest are counted)."""

PANEL = Panel("Plan", resources.files(__package__).joinpath("panel.html").read_text("utf-8"))


def board(team: TeamReader, variables: Mapping[str, str], query: str) -> dict[str, Any]:
    """Every task (the first :data:`MAX_TASKS`, by id) with status, owner and dependencies,
    read from the planning actor's stored state (what it wrote before announcing a change):
    also of a team opened read-only, which runs no actor."""
    state = team.state_of(ACTOR_NAME)
    if state.count(TASK) == 0 and team.actor(ACTOR_NAME) is None:
        return {"available": False, "tasks": [], "total": 0, "statuses": list(STATUSES)}
    tasks = sorted((Task.model_validate(value) for _, value in state.iter_items(TASK)),
                   key=lambda task: task.id)  # fmt: skip
    return {
        "available": True,
        "tasks": [task.model_dump(mode="json") for task in tasks[:MAX_TASKS]],
        "total": len(tasks),
        "statuses": list(STATUSES),
    }


BOARD = TeamView(
    "planning",
    "planning",
    "The team's planning board: every task with status, owner and dependencies.",
    board,
    (ACTOR_NAME,),
    PANEL,
    key="plan",
)
