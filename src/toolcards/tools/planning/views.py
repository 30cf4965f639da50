"""The planning board as a view of the team's state (the card's RESOURCE channel): the MCP
resource ``toolcards://team/<team>/planning`` and the dashboard's Plan panel."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

from toolcards.core.views import Panel, TeamReader, TeamView
from toolcards.tools.planning.actor import ACTOR_NAME, PlanningActor
from toolcards.tools.planning.models import STATUSES

MAX_TASKS = 500
"""Tasks a read returns at most (the rest are counted)."""
ASK_TIMEOUT = 10.0

PANEL = Panel("Plan", resources.files(__package__).joinpath("panel.html").read_text("utf-8"))


def board(team: TeamReader, variables: Mapping[str, str], query: str) -> dict[str, Any]:
    """Every task (the first :data:`MAX_TASKS`) with status, owner and dependencies, from the
    running planning actor (none started: no board yet)."""
    handle = team.actor(ACTOR_NAME)
    if handle is None:
        return {"available": False, "tasks": [], "total": 0, "statuses": list(STATUSES)}
    tasks = handle.within(ASK_TIMEOUT).ask(PlanningActor.tasks)
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
