"""What the planning actor reads from its state without loading the board.

The summary row (``meta:summary``: the next id, the number of tasks, counts by status and by
owner) is written in the same transaction as every change of the board and records the state
version that transaction commits at (:meth:`StateNamespace.version`). On restore one read of
the row and one of the version tell whether it still describes the rows: a row written around
the actor (``team.state_of("#PlanningTool").put``, another writer) moves the version, and the
summary is then rebuilt when the board is next loaded. Tasks are read by key (``task:<id>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolcards.tools.planning.board import Board
from toolcards.tools.planning.models import Task

if TYPE_CHECKING:
    from toolcards.stores.base import StateNamespace

TASK = "task:"
NEXT_ID = "meta:next_id"
SUMMARY = "meta:summary"
MAX_OWNERS = 1000
"""Owners kept in the summary row; with more, the summary view loads the board."""
PROBE_BUDGET = 200
"""Ids read by key, beyond those found, when listing the first tasks without the board."""


def stored_task(key: str, value: Any) -> Task:
    """The row ``key`` as a task; ValueError when it is none, or another id's (a row written
    around the actor: one of wrong types made every search and update raise)."""
    task = Task.model_validate(value)
    if TASK + str(task.id) != key:
        raise ValueError(f"it holds task {task.id}")
    return task


def _first_id(stored: Any) -> int:
    """The stored next id, or 1 when the row is missing or no id (a list written around the
    actor made every start of it raise)."""
    if isinstance(stored, int) and not isinstance(stored, bool) and stored > 0:
        return stored
    return 1


@dataclass
class PlanSummary:
    """Running totals of the board; ``owners`` is None when there are too many to keep."""

    next_id: int
    total: int
    by_status: dict[str, int]
    owners: dict[str | None, int] | None

    @classmethod
    def of(cls, board: Board) -> PlanSummary:
        view = board.view(None, False, 0)
        owners = view.owners if len(view.owners) <= MAX_OWNERS else None
        return cls(board.next_id, view.total, view.by_status, owners)

    def to_json(self, version: int | None) -> dict[str, Any]:
        owners = None if self.owners is None else [[k, n] for k, n in self.owners.items()]
        return {
            "version": version,
            "next_id": self.next_id,
            "total": self.total,
            "by_status": self.by_status,
            "owners": owners,
        }

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> PlanSummary:
        owners = row.get("owners")
        return cls(
            next_id=int(row["next_id"]),
            total=int(row["total"]),
            by_status={str(k): int(n) for k, n in dict(row["by_status"]).items()},
            owners=None if owners is None else {k: int(n) for k, n in owners},
        )


class StoredPlan:
    """The board as the store holds it: the summary row, and tasks read by key."""

    def __init__(self, state: StateNamespace) -> None:
        self.state = state
        self.summary: PlanSummary | None = None
        """The summary, when it describes the stored rows (None: rebuild with the board)."""
        self.next_id_floor = 1
        """No id below this was ever handed out (from the last summary, even a stale one)."""
        self._known = 0
        """The state version the rows in memory (the summary, a loaded board) reflect."""
        self._stale = False
        """A writer changed rows since they were read: no summary of them is trusted."""

    def restore(self, rows: dict[str, Any] | None = None) -> None:
        """Read the summary row (three reads by key, whatever the number of tasks); the
        summary and next-id rows found in ``rows`` (the rows another copy just changed) are
        taken from there instead of read again."""
        given = rows or {}
        row = given[SUMMARY] if SUMMARY in given else self.state.get(SUMMARY)
        stored_next = given[NEXT_ID] if NEXT_ID in given else self.state.get(NEXT_ID)
        self._known, self._stale = self.state.version(), False
        self.summary = None
        self.next_id_floor = _first_id(stored_next)
        if not isinstance(row, dict):
            return
        try:
            summary = PlanSummary.from_json(row)
        except (KeyError, TypeError, ValueError):
            return
        self.next_id_floor = max(self.next_id_floor, summary.next_id)
        if row.get("version") == self._known and stored_next == summary.next_id:
            self.summary = summary

    @property
    def needs_save(self) -> bool:
        """True after a load found no current summary (rows written around the actor)."""
        return self.summary is None and not self._stale

    def loading(self) -> None:
        """Call before reading every row into a board: the board reflects this version."""
        self._known, self._stale = self.state.version(), False

    def save(self, board: Board) -> None:
        """Write the board's summary; call it inside the batch that changes the rows.

        The row records the version this batch commits at, unless a writer changed rows since
        the board was read (the board in memory misses them): then it records none, and the
        next restore summarizes the rows again.
        """
        summary = PlanSummary.of(board)
        current = self.state.version()
        self._stale = self._stale or current != self._known
        self.state.put(SUMMARY, summary.to_json(None if self._stale else current + 1))
        self.state.put(NEXT_ID, board.next_id)
        self._known = current + 1
        self.summary = None if self._stale else summary
        self.next_id_floor = board.next_id

    def task(self, task_id: int) -> Task | None:
        """The stored task ``task_id`` (one read by key), or None (also for a row that is no
        valid task: the board's load skips it too)."""
        key = TASK + str(task_id)
        value = self.state.get(key)
        try:
            return None if value is None else stored_task(key, value)
        except ValueError:
            return None

    def first(self, limit: int) -> list[Task] | None:
        """The first ``limit`` tasks by id, read by key; None when the summary is unknown or
        gaps (deleted ids) use up the probe budget before they are found."""
        summary = self.summary
        if summary is None:
            return None
        wanted = min(limit, summary.total)
        found: list[Task] = []
        task_id = 1
        misses = 0
        while len(found) < wanted and task_id < summary.next_id:
            task = self.task(task_id)
            if task is None:
                misses += 1
                if misses > PROBE_BUDGET:
                    return None
            else:
                found.append(task)
            task_id += 1
        return found if len(found) == wanted else None
