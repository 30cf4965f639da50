"""Planning data: tasks and the argument shapes the model sends."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt

from toolcards.core.events import event_payload
from toolcards.tools._common.batch import one_line

TaskStatus = Literal["pending", "started", "completed", "failed", "cancelled"]
STATUSES: tuple[str, ...] = ("pending", "started", "completed", "failed", "cancelled")

MAX_DESCRIPTION = 300
MAX_OUTPUT = 150
MAX_DEPENDENCIES = 50
MAX_OWNER = 100


def _truncate_output(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_OUTPUT:
        return value[: MAX_OUTPUT - 1] + "…"
    return value


Description = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_DESCRIPTION,
        description=f"What the task is about, at most {MAX_DESCRIPTION} characters.",
    ),
]
Output = Annotated[
    str,
    BeforeValidator(_truncate_output),
    Field(
        max_length=MAX_OUTPUT,
        description=f"The task's result, at most {MAX_OUTPUT} characters (longer is truncated).",
    ),
]
Owner = Annotated[
    str,
    AfterValidator(one_line),
    Field(
        min_length=1,
        max_length=MAX_OWNER,
        description="The team member responsible for the task.",
    ),
]
Dependencies = Annotated[
    list[StrictInt],
    Field(
        max_length=MAX_DEPENDENCIES,
        description="Ids of existing tasks that must be done before this one.",
    ),
]
"""Ids and versions are strict ints: the policy and the approver see the raw value, so
``"1_0"``, ``true`` or ``1.0`` must not act as task 10, 1 or 1."""


class Task(BaseModel):
    """One task on the board. ``id`` is assigned by the board; ``version`` grows per change."""

    model_config = ConfigDict(extra="forbid")

    id: int
    description: str
    status: TaskStatus = "pending"
    owner: str | None = None
    creator: str
    output: str = ""
    depends_on: list[int] = Field(default_factory=list)
    version: int = 1


MAX_EVENT_ITEMS = 100
"""Tasks one ``PlanningDelta`` lists in ``unlinked`` at most (the rest are counted in
``more``): deleting a task thousands of tasks depend on changes every one of them."""


class TaskVersion(BaseModel):
    """A task an event names without copying it: its id and new version (its state row
    holds the rest)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    version: int


@event_payload
class PlanningDelta(BaseModel):
    """What one ``update_planning`` batch changed: the ``#PlanningTool`` event payload
    (``team.events()`` reads it back as this model). The tasks the batch named are copied
    whole (at most a batch of each); the tasks a delete changed on its own are named by id
    and version, the first :data:`MAX_EVENT_ITEMS`: every subscriber reads the event, and
    the tasks as they are now are in the team's state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    created: list[Task] = Field(default_factory=list)
    updated: list[Task] = Field(default_factory=list)
    deleted: list[int] = Field(default_factory=list)
    unlinked: list[TaskVersion] = Field(default_factory=list)
    """Tasks that only lost a dependency on a deleted task."""
    more: dict[str, int] = Field(default_factory=dict)
    """Items left out of a list past :data:`MAX_EVENT_ITEMS`, by the list's name."""


class TaskCreate(BaseModel):
    """A task to create; the board assigns its id and records you as its creator."""

    model_config = ConfigDict(extra="forbid")

    description: Description
    owner: Owner | None = None
    depends_on: Dependencies = Field(default_factory=list)


class TaskUpdate(BaseModel):
    """A change to an existing task; ``version`` must be the task's current version."""

    model_config = ConfigDict(extra="forbid")

    id: StrictInt = Field(description="The task id.")
    version: StrictInt = Field(description="The version you last read; a stale one is a conflict.")
    status: TaskStatus | None = None
    owner: Owner | None = None
    output: Output | None = None
    description: Description | None = None
    depends_on: Dependencies | None = None
