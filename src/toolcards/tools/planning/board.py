"""The planning board: tasks, validation, optimistic concurrency and keyword ranking.

Pure logic with no threads: the tool actor owns one board and persists what it reports.
A batch is validated as a whole and then applied, so a rejected batch changes nothing.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolcards.core.errors import RetriableError
from toolcards.tools._common.fusion import rrf_fuse
from toolcards.tools._common.keyword_index import KeywordIndex
from toolcards.tools.planning.models import (
    MAX_EVENT_ITEMS,
    PlanningDelta,
    Task,
    TaskCreate,
    TaskUpdate,
    TaskVersion,
)


def member_key(name: str) -> str:
    """The form under which member names compare (``@Alice`` and ``alice`` share one)."""
    return name.strip().lstrip("@").casefold()


def filter_key(arg: str, name: str) -> str:
    """The compared form of a name a search filters by, refused when spelled otherwise than as
    that form, with or without one leading ``@``: the policy decided on the name as sent, so
    ``Boss``, `` boss`` or ``boſs`` must not reach the tasks of ``boss`` past a deny on it."""
    bare = name[1:] if name.startswith("@") else name
    key = member_key(bare)
    if bare != key:
        who = "an owner" if arg == "owner" else "a creator"
        raise RetriableError(
            f"{arg} {name!r:.80} refused: {who} is written as its member name, with or without "
            f"a leading @, in its compared form (here {key!r:.80})"
        )
    return key


def same_member(a: str | None, b: str | None) -> bool:
    """Whether two member names designate the same member (``@Alice`` is ``alice``)."""
    if a is None or b is None:
        return False
    return member_key(a) == member_key(b)


def _tally(counter: Counter[Any], key: Any, sign: int) -> None:
    counter[key] += sign
    if counter[key] <= 0:
        del counter[key]


@dataclass
class BoardView:
    """What the plan summary shows, read from the board's running totals in O(shown).

    ``scoped`` holds the first ``max_tasks`` tasks in scope (by id) out of ``scoped_total``;
    ``owners`` counts tasks by their raw owner (``None``: unassigned).
    """

    total: int
    by_status: dict[str, int]
    owners: dict[str | None, int]
    scoped: list[Task]
    scoped_total: int


@dataclass
class BoardChange:
    """What one batch did; ``is_empty`` when nothing changed. ``updated`` holds the tasks the
    batch updated, ``unlinked`` the others its deletes changed (they depended on a deleted
    task): one delete may change every task on the board."""

    created: list[Task] = field(default_factory=list)
    updated: list[Task] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    unlinked: list[Task] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.created or self.updated or self.deleted or self.unlinked)

    def payload(self) -> PlanningDelta:
        """The delta as the ``#PlanningTool`` event payload: the tasks the batch named whole,
        the first :data:`MAX_EVENT_ITEMS` unlinked by id and version, the rest counted."""
        unlinked = self.unlinked[:MAX_EVENT_ITEMS]
        left = len(self.unlinked) - len(unlinked)
        return PlanningDelta(
            created=list(self.created),
            updated=list(self.updated),
            deleted=list(self.deleted),
            unlinked=[TaskVersion(id=t.id, version=t.version) for t in unlinked],
            more={"unlinked": left} if left else {},
        )


class Board:
    """Tasks by id, with a keyword index over descriptions and outputs.

    ``tasks`` iterates in id order (new ids are always the largest). Counts by status and
    owner, and each member's task ids (owner or creator, sorted), are kept up to date on every
    change, so :meth:`view` costs what it shows, not the size of the board.
    """

    def __init__(self, tasks: Iterable[Task] = (), next_id: int = 1) -> None:
        self.tasks: dict[int, Task] = {}
        self.next_id = next_id
        self._index = KeywordIndex(("description", "output"), weights=(1.0, 0.5))
        self._status: Counter[str] = Counter()
        self._owners: Counter[str | None] = Counter()
        self._members: dict[str, list[int]] = {}
        for task in sorted(tasks, key=lambda t: t.id):
            self._put(task)
            self.next_id = max(self.next_id, task.id + 1)

    def _put(self, task: Task, reindex: bool = True) -> None:
        """Insert or replace ``task``, keeping the index and the running totals in step."""
        old = self.tasks.get(task.id)
        if old is not None:
            self._count(old, -1)
        self.tasks[task.id] = task
        self._count(task, +1)
        if reindex:
            self._index.upsert(str(task.id), task.description, task.output)

    def _drop(self, task_id: int) -> None:
        self._count(self.tasks.pop(task_id), -1)
        self._index.remove(str(task_id))

    def _count(self, task: Task, sign: int) -> None:
        _tally(self._status, task.status, sign)
        _tally(self._owners, task.owner, sign)
        keys = {member_key(task.creator)}
        if task.owner is not None:
            keys.add(member_key(task.owner))
        for key in keys:
            ids = self._members.setdefault(key, [])
            if sign > 0:
                bisect.insort(ids, task.id)
            else:
                del ids[bisect.bisect_left(ids, task.id)]
                if not ids:
                    del self._members[key]

    def merge(self, tasks: Iterable[Task], deleted: Iterable[int], next_id: int) -> None:
        """Take in rows another writer stored: ``tasks`` as they are now, ``deleted`` ids
        gone; ids stay in order and ``next_id`` never moves back."""
        for task_id in deleted:
            if task_id in self.tasks:
                self._drop(task_id)
        tail = max(self.tasks, default=0)
        out_of_order = False
        for task in sorted(tasks, key=lambda t: t.id):
            out_of_order = out_of_order or (task.id < tail and task.id not in self.tasks)
            self._put(task)
            self.next_id = max(self.next_id, task.id + 1)
        self.next_id = max(self.next_id, next_id)
        if out_of_order:  # a row written around the actor under an old id
            self.tasks = dict(sorted(self.tasks.items()))

    def view(self, member: str | None, filter_by_agent: bool, max_tasks: int) -> BoardView:
        """Totals, owners and the first ``max_tasks`` tasks in scope: the member's own tasks
        (owner or creator) when ``filter_by_agent`` and ``member`` are given, else all."""
        if filter_by_agent and member:
            ids = self._members.get(member_key(member), [])
            scoped = [self.tasks[i] for i in ids[:max_tasks]]
            scoped_total = len(ids)
        else:
            scoped = list(itertools.islice(self.tasks.values(), max_tasks))
            scoped_total = len(self.tasks)
        return BoardView(
            total=len(self.tasks),
            by_status=dict(self._status),
            owners=dict(self._owners),
            scoped=scoped,
            scoped_total=scoped_total,
        )

    def get(self, task_id: int) -> Task:
        """The task ``task_id``; RetriableError naming the valid ids when unknown."""
        task = self.tasks.get(task_id)
        if task is None:
            raise RetriableError(f"no task with id {task_id}; {self.ids_hint()}")
        return task

    def ids_hint(self) -> str:
        """The first 30 ids, for an error about an unknown one."""
        ids = sorted(self.tasks)
        if not ids:
            return "the board is empty"
        shown = ", ".join(str(i) for i in ids[:30])
        return f"existing ids: {shown}{', ...' if len(ids) > 30 else ''}"

    def apply(
        self,
        creator: str,
        create: Sequence[TaskCreate] = (),
        update: Sequence[TaskUpdate] = (),
        delete: Sequence[int] = (),
    ) -> BoardChange:
        """Validate the whole batch, then apply it: creates, updates, deletes, in that order.

        Any error (unknown id, stale version, missing dependency, cycle) rejects the batch with
        one RetriableError listing every problem; nothing is changed.
        """
        errors: list[str] = []
        deleting = set()
        for task_id in delete:
            if task_id not in self.tasks:
                errors.append(f"delete: no task with id {task_id}")
            deleting.add(task_id)
        seen_updates: set[int] = set()
        for upd in update:
            current = self.tasks.get(upd.id)
            if current is None:
                errors.append(f"update: no task with id {upd.id}")
            elif upd.id in seen_updates:
                errors.append(f"update: task {upd.id} appears twice in one batch")
            elif upd.version != current.version:
                errors.append(
                    f"conflict: task {upd.id} is at version {current.version}, not "
                    f"{upd.version}; read it again with get_planning_task({upd.id}) and retry"
                )
            elif upd.id in deleting:
                errors.append(f"update: task {upd.id} is also being deleted")
            elif not upd.model_dump(exclude={"id", "version"}, exclude_none=True):
                errors.append(f"update: task {upd.id} names no field to change")
            seen_updates.add(upd.id)
            for dep in upd.depends_on or ():
                if dep not in self.tasks or dep in deleting:
                    errors.append(f"update: task {upd.id} depends on unknown task {dep}")
                elif dep == upd.id:
                    errors.append(f"update: task {upd.id} cannot depend on itself")
        for i, new in enumerate(create):
            for dep in new.depends_on:
                if dep not in self.tasks or dep in deleting:
                    errors.append(f"create[{i}]: depends on unknown task {dep}")
        if not errors:
            cycle = self._cycle_after(update)
            if cycle:
                long = len(cycle) > 13  # the cycle's ends, and how many between
                shown = [*cycle[:12], f"... ({len(cycle) - 13} more)", cycle[-1]] if long else cycle
                errors.append("update: dependency cycle " + " -> ".join(map(str, shown)))
        if errors:
            raise RetriableError("update_planning rejected, nothing changed: " + "; ".join(errors))
        return self._commit(creator, create, update, sorted(deleting))

    def _cycle_after(self, update: Sequence[TaskUpdate]) -> list[int]:
        """A dependency cycle the batch's updates would close, or ``[]``. The board has none
        and a created task depends only on older ones, so a new cycle runs through a task
        whose dependencies the batch changes: the search starts from those alone."""
        changed = {upd.id: list(upd.depends_on) for upd in update if upd.depends_on is not None}
        state: dict[int, int] = {}  # 1: on the path walked now, 2: done (no cycle below)

        def deps(node: int) -> Iterator[int]:
            task = self.tasks.get(node)
            return iter(changed.get(node, task.depends_on if task is not None else ()))

        for start in changed:  # a walk with its own stack: chains of any length
            if start in state:
                continue
            state[start] = 1
            path, walks = [start], [deps(start)]
            while walks:
                dep = next(walks[-1], None)
                if dep is None:
                    state[path.pop()] = 2
                    walks.pop()
                elif state.get(dep) == 1:
                    return [*path[path.index(dep) :], dep]
                elif dep not in state:
                    state[dep] = 1
                    path.append(dep)
                    walks.append(deps(dep))
        return []

    def _commit(
        self,
        creator: str,
        create: Sequence[TaskCreate],
        update: Sequence[TaskUpdate],
        delete: Sequence[int],
    ) -> BoardChange:
        change = BoardChange()
        for new in create:
            task = Task(
                id=self.next_id,
                description=new.description,
                owner=new.owner,
                creator=creator,
                depends_on=sorted(set(new.depends_on)),
            )
            self.next_id += 1
            self._put(task)
            change.created.append(task)
        for upd in update:
            old = self.tasks[upd.id]
            fields = upd.model_dump(exclude={"id", "version"}, exclude_none=True)
            if "depends_on" in fields:
                fields["depends_on"] = sorted(set(fields["depends_on"]))
            task = old.model_copy(update={**fields, "version": old.version + 1})
            self._put(task)
            change.updated.append(task)
        named = {t.id: i for i, t in enumerate(change.updated)}
        for task_id in delete:
            self._drop(task_id)
            change.deleted.append(task_id)
        if delete:
            gone = set(delete)
            for task in list(self.tasks.values()):
                if gone.intersection(task.depends_on):
                    kept = [d for d in task.depends_on if d not in gone]
                    fixed = task.model_copy(
                        update={"depends_on": kept, "version": task.version + 1}
                    )
                    self._put(fixed, reindex=False)
                    if task.id in named:
                        change.updated[named[task.id]] = fixed
                    else:
                        change.unlinked.append(fixed)
        return change

    def filter(
        self,
        status: str | None = None,
        owner: str | None = None,
        creator: str | None = None,
    ) -> list[Task]:
        """Tasks matching every given filter, by id; RetriableError for a name not written
        in its compared form (see :func:`filter_key`). The names are put in that form once, not
        once per task: a long one cost tasks × length on the actor's thread."""
        owner_key = None if owner is None else filter_key("owner", owner)
        creator_key = None if creator is None else filter_key("creator", creator)
        found = []
        for task in sorted(self.tasks.values(), key=lambda t: t.id):
            if status is not None and task.status != status:
                continue
            if owner_key is not None and (
                task.owner is None or member_key(task.owner) != owner_key
            ):
                continue
            if creator_key is not None and member_key(task.creator) != creator_key:
                continue
            found.append(task)
        return found

    def search(
        self,
        tasks: Sequence[Task],
        query: str,
        vector_hits: Sequence[tuple[str, float]] | None,
        top_k: int,
        rrf_k: float = 10.0,
    ) -> list[Task]:
        """Rank ``tasks`` for ``query``: keyword hits fused with ``vector_hits`` when given."""
        allowed = {str(t.id) for t in tasks}
        keyword = self._index.search(query, top_k=max(top_k * 3, 30), allowed=allowed)
        rankings: list[Sequence[tuple[str, float]]] = [keyword]
        if vector_hits:
            rankings.append([hit for hit in vector_hits if hit[0] in allowed])
        fused = rrf_fuse(rankings, k=rrf_k)
        return [self.tasks[int(doc_id)] for doc_id, _ in fused[:top_k]]
