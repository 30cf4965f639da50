"""The ``#PlanningTool`` team actor: one board per team, persisted task by task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolcards.runtime import ToolActor, ToolActorContext
from toolcards.tools._common.fusion import VectorLink, VectorSync
from toolcards.tools.planning.board import Board, BoardView
from toolcards.tools.planning.models import Task, TaskCreate, TaskUpdate

ACTOR_NAME = "#PlanningTool"
COLLECTION = "planning"
_TASK = "task:"
_NEXT_ID = "meta:next_id"


class PlanningConfig(BaseModel):
    """What makes two bindings of the board the same actor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vector_store: str | None = None
    """The vector store actor's name, or None for keyword-only search."""


def embed_text(task: Task) -> str:
    """The text embedded for a task."""
    return task.description if not task.output else f"{task.description}\n{task.output}"


class PlanningActor(ToolActor):
    """Owns the team's board; every method runs on the actor's own thread, one at a time."""

    config_type = PlanningConfig

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        super().__init__(ctx, config)
        self.settings = config if isinstance(config, PlanningConfig) else PlanningConfig()
        self.board = Board()
        self.vectors: VectorSync | None = None

    def on_start(self) -> None:
        state = self.ctx.state
        tasks = [Task.model_validate(value) for _, value in state.items(_TASK)]
        next_id = state.get(_NEXT_ID)
        self.board = Board(tasks, next_id=int(next_id) if next_id else 1)
        if self.settings.vector_store is not None:
            link = VectorLink(self.ctx.team, self.settings.vector_store, timeout=2.0)
            self.vectors = VectorSync(link, COLLECTION, state)
            self.vectors.load({str(t.id): embed_text(t) for t in tasks})

    def apply(
        self,
        creator: str,
        create: Sequence[TaskCreate],
        update: Sequence[TaskUpdate],
        delete: Sequence[int],
    ) -> dict[str, Any]:
        """Apply one batch atomically; returns the created ids and the new versions."""
        change = self.board.apply(creator, create, update, delete)
        if change.is_empty:
            return {"created": [], "updated": {}, "deleted": []}
        state = self.ctx.state
        with state.batch():
            for task in (*change.created, *change.updated):
                state.put(_TASK + str(task.id), task.model_dump())
                if self.vectors is not None:
                    self.vectors.changed(str(task.id), embed_text(task))
            for task_id in change.deleted:
                state.delete(_TASK + str(task_id))
                if self.vectors is not None:
                    self.vectors.removed(str(task_id))
            state.put(_NEXT_ID, self.board.next_id)
            if self.vectors is not None:
                self.vectors.flush()
            self.ctx.emit(change.payload(), sender=creator)
        return {
            "created": [t.id for t in change.created],
            "updated": {t.id: t.version for t in change.updated},
            "deleted": list(change.deleted),
        }

    def get(self, task_id: int) -> Task:
        """One task (RetriableError when unknown)."""
        return self.board.get(task_id)

    def tasks(self) -> list[Task]:
        """Every task, by id."""
        return self.board.filter()

    def head(self, limit: int) -> list[Task]:
        """The first ``limit`` tasks, by id."""
        return self.board.view(None, False, limit).scoped

    def summary(self, member: str | None, filter_by_agent: bool, max_tasks: int) -> BoardView:
        """What the plan summary shows (see :meth:`Board.view`); costs what it shows."""
        return self.board.view(member, filter_by_agent, max_tasks)

    def search(
        self,
        status: str | None = None,
        owner: str | None = None,
        creator: str | None = None,
        query: str | None = None,
        vector_hits: Sequence[tuple[str, float]] | None = None,
        top_k: int = 10,
        rrf_k: float = 10.0,
    ) -> tuple[list[Task], int]:
        """Filtered tasks (and how many passed the filters); with ``query``, ranked by
        keywords fused with ``vector_hits``."""
        found = self.board.filter(status, owner, creator)
        if query and query.strip():
            return self.board.search(found, query, vector_hits, top_k, rrf_k), len(found)
        return found[:top_k], len(found)
