"""The ``#PlanningTool`` team actor: one board per team, persisted task by task."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolcards.core.errors import RetriableError
from toolcards.runtime import ToolActor, ToolActorContext
from toolcards.tools._common.batch import short_reason
from toolcards.tools._common.fusion import VectorLink, VectorSync
from toolcards.tools._common.vector_api import PLANNING_COLLECTION
from toolcards.tools.planning.board import Board, BoardView
from toolcards.tools.planning.models import Task, TaskCreate, TaskUpdate
from toolcards.tools.planning.stored import NEXT_ID, SUMMARY, TASK, StoredPlan, stored_task

logger = logging.getLogger(__name__)

ACTOR_NAME = "#PlanningTool"
COLLECTION = PLANNING_COLLECTION
MAX_BOARD_TASKS = 10_000
"""Tasks a board holds at most: a model creates them freely, call after call, and every one
is kept in memory and indexed once the board is loaded; a batch past it is refused."""
MAX_ANSWER_UPDATED = 30
"""New versions one ``apply`` result lists at most (the rest are counted): a one-id delete
changes every task that depended on it, and the result is recorded and read by the model."""


class PlanningConfig(BaseModel):
    """What makes two bindings of the board the same actor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vector_store: str | None = None
    """The vector store actor's name, or None for keyword-only search."""


def embed_text(task: Task) -> str:
    """The text embedded for a task."""
    return task.description if not task.output else f"{task.description}\n{task.output}"


def _task_id(key: str) -> int | None:
    """The id of a ``task:<id>`` key written as the actor writes it, else None."""
    digits = key.removeprefix(TASK)
    if digits == key or not digits.isdigit() or str(int(digits)) != digits:
        return None
    return int(digits)


def _check_room(board: Board, creating: int, delete: Sequence[int]) -> None:
    """RetriableError when a batch that creates tasks would leave more than
    :data:`MAX_BOARD_TASKS` (one that creates none is never refused for size: it adds none)."""
    kept = len(board.tasks) - len(board.tasks.keys() & set(delete))
    if creating and kept + creating > MAX_BOARD_TASKS:
        raise RetriableError(
            f"update_planning rejected, nothing changed: the board holds at most "
            f"{MAX_BOARD_TASKS} tasks and has {len(board.tasks)}: delete finished tasks first"
        )


class PlanningActor(ToolActor):
    """Owns the team's board; every method runs on the actor's own thread, one at a time.

    A restore reads only the summary row (:mod:`~toolcards.tools.planning.stored`): a task is
    read by key, and the board (every row, its keyword index and totals) is loaded on the
    first call that needs it (a change, a search, a member's view).
    """

    config_type = PlanningConfig

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        super().__init__(ctx, config)
        self.settings = config if isinstance(config, PlanningConfig) else PlanningConfig()
        self.stored = StoredPlan(ctx.state)
        self._board: Board | None = None
        self.vectors: VectorSync | None = None

    def on_start(self) -> None:
        self.stored.restore()

    @property
    def board(self) -> Board:
        """Every task in memory, loaded on first use (then kept up to date by each change)."""
        if self._board is None:
            self._board = self._load()
        return self._board

    def _load(self) -> Board:
        state = self.ctx.state
        self.stored.loading()
        tasks = self._stored_tasks()
        board = Board(tasks, next_id=self.stored.next_id_floor)
        if self.settings.vector_store is not None:
            link = VectorLink(self.ctx.team, self.settings.vector_store, timeout=2.0)
            self.vectors = VectorSync(link, COLLECTION, state, cap=MAX_BOARD_TASKS)
            self.vectors.load({str(t.id): embed_text(t) for t in tasks})
        return board

    def _stored_tasks(self) -> list[Task]:
        """The valid task rows (one that is not is skipped, its key logged), read a batch at a
        time up to :data:`MAX_BOARD_TASKS` rows: a million rows written around the tool were
        all loaded and indexed, and every search waited for it."""
        state = self.ctx.state
        tasks: list[Task] = []
        for read, (key, value) in enumerate(state.iter_items(TASK)):
            if read == MAX_BOARD_TASKS:
                left = state.count(TASK) - read
                logger.warning(
                    "%s: %d stored tasks past the cap of %d were not loaded",
                    ACTOR_NAME,
                    left,
                    MAX_BOARD_TASKS,
                )
                break
            try:
                tasks.append(stored_task(key, value))
            except ValueError as exc:
                logger.warning("%s: skipped stored row %r: %s", ACTOR_NAME, key, short_reason(exc))
        return tasks

    def apply_changes(self, upserts: Sequence[tuple[str, Any]], deleted: Sequence[str]) -> bool:
        """Take in the rows another process changed since this copy's version (called by the
        runtime); False, changing nothing, when they are not only tasks and the summary rows
        (the copy is then reloaded whole)."""
        if self.vectors is not None:
            return False  # the vector fingerprints are reloaded with the board
        tasks: list[Task] = []
        gone: list[int] = []
        try:
            for key, value in upserts:
                task_id = _task_id(key)
                if task_id is not None:
                    tasks.append(Task.model_validate(value))
                    if tasks[-1].id != task_id:
                        return False
                elif key not in (SUMMARY, NEXT_ID):
                    return False
            for key in deleted:
                task_id = _task_id(key)
                if task_id is not None:
                    gone.append(task_id)
                elif key not in (SUMMARY, NEXT_ID):
                    return False
        except ValueError:  # a row the board would not load either
            return False
        self.stored.restore({k: v for k, v in upserts if k in (SUMMARY, NEXT_ID)})
        if self._board is not None:
            self._board.merge(tasks, gone, self.stored.next_id_floor)
            self.stored.loading()
        return True

    def _reading(self) -> Board:
        """The board for a read; after a load that found the summary stale (rows written
        around the actor), the summary is written again, so the next restore trusts it."""
        board = self.board
        if self.stored.needs_save:
            with self.ctx.state.batch():
                self.stored.save(board)
        return board

    def apply(
        self,
        creator: str,
        create: Sequence[TaskCreate],
        update: Sequence[TaskUpdate],
        delete: Sequence[int],
    ) -> dict[str, Any]:
        """Apply one batch atomically; returns the created and deleted ids, the first
        :data:`MAX_ANSWER_UPDATED` new versions (updated, then unlinked) and how many more."""
        _check_room(self.board, len(create), delete)
        change = self.board.apply(creator, create, update, delete)
        if change.is_empty:
            return {"created": [], "updated": {}, "more_updated": 0, "deleted": []}
        state = self.ctx.state
        with state.batch():
            for task in (*change.created, *change.updated, *change.unlinked):
                state.put(TASK + str(task.id), task.model_dump())
                if self.vectors is not None:
                    self.vectors.changed(str(task.id), embed_text(task))
            for task_id in change.deleted:
                state.delete(TASK + str(task_id))
                if self.vectors is not None:
                    self.vectors.removed(str(task_id))
            self.stored.save(self.board)
            if self.vectors is not None:
                self.vectors.flush()
            self.ctx.emit(change.payload(), sender=creator)
        changed = [*change.updated, *change.unlinked]
        return {
            "created": [t.id for t in change.created],
            "updated": {t.id: t.version for t in changed[:MAX_ANSWER_UPDATED]},
            "more_updated": max(0, len(changed) - MAX_ANSWER_UPDATED),
            "deleted": list(change.deleted),
        }

    def get(self, task_id: int) -> Task:
        """One task (RetriableError when unknown): one read by key until the board is loaded."""
        if self._board is not None:
            return self._board.get(task_id)
        task = self.stored.task(task_id)
        if task is None:
            raise RetriableError(f"no task with id {task_id}; {self._ids_hint()}")
        return task

    def _ids_hint(self) -> str:
        summary = self.stored.summary
        first = self.stored.first(30)
        if summary is None or first is None:
            return self._reading().ids_hint()
        if not first:
            return "the board is empty"
        shown = ", ".join(str(t.id) for t in first)
        return f"existing ids: {shown}{', ...' if summary.total > 30 else ''}"

    def tasks(self) -> list[Task]:
        """Every task, by id."""
        return self._reading().filter()

    def head(self, limit: int) -> list[Task]:
        """The first ``limit`` tasks, by id."""
        if self._board is None:
            first = self.stored.first(limit)
            if first is not None:
                return first
        return self._reading().view(None, False, limit).scoped

    def summary(self, member: str | None, filter_by_agent: bool, max_tasks: int) -> BoardView:
        """What the plan summary shows (see :meth:`Board.view`); costs what it shows."""
        summary = self.stored.summary
        everyone = not (filter_by_agent and member)
        if self._board is None and everyone and summary is not None and summary.owners is not None:
            first = self.stored.first(max_tasks)
            if first is not None:
                return BoardView(
                    total=summary.total,
                    by_status=dict(summary.by_status),
                    owners=dict(summary.owners),
                    scoped=first,
                    scoped_total=summary.total,
                )
        return self._reading().view(member, filter_by_agent, max_tasks)

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
        board = self._reading()
        found = board.filter(status, owner, creator)
        if query and query.strip():
            return board.search(found, query, vector_hits, top_k, rrf_k), len(found)
        return found[:top_k], len(found)
