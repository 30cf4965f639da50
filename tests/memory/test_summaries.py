"""The plan and graph summaries kept up to date on mutation render what a full scan renders.

Each test drives a board or a graph through random batches (creates, updates, owner and type
changes, deletions, a restart from the stored items) and compares, after every batch, the
incremental summary with one computed from scratch by the reference functions below.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from toolcards.tools.knowledge_graph.graph import Graph
from toolcards.tools.knowledge_graph.models import Entity, EntityCreate, EntityUpdate
from toolcards.tools.planning.board import Board, same_member
from toolcards.tools.planning.models import STATUSES, Task, TaskCreate, TaskUpdate
from toolcards.tools.planning.render import at, planning_summary, task_line

MEMBERS = ["alice", "@Alice", "bob", "@carol", "Carol", " dave "]
HINTS = ("get_planning_task", "search_planning", "update_planning")


def reference_planning_summary(
    tasks: Sequence[Task],
    member: str | None,
    filter_by_agent: bool,
    max_tasks: int,
    lines_of: dict[int, str] | None = None,
) -> str:
    """The plan summary computed from every task (the text the model must keep seeing).
    ``lines_of``: each task's :func:`task_line`, when already rendered for these tasks (a batch
    compares many summaries of one board)."""
    line_of = lines_of or {t.id: task_line(t) for t in tasks}
    counts = {s: sum(1 for t in tasks if t.status == s) for s in STATUSES}
    by_status = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    noun = "task" if len(tasks) == 1 else "tasks"
    head = f"**Team planning:** {len(tasks)} {noun} total"
    lines = [head + (f" ({by_status})" * bool(by_status))]
    owners: dict[str, int] = {}
    for owner, n in Counter(t.owner for t in tasks).items():  # ``at`` once per distinct owner
        owners[at(owner)] = owners.get(at(owner), 0) + n
    if owners:
        unassigned = owners.pop("unassigned", 0)
        parts = [f"{name}: {n}" for name, n in sorted(owners.items())]
        parts += [f"unassigned: {unassigned}"] if unassigned else []
        lines.append("Owners: " + " | ".join(parts))
    if filter_by_agent and member:
        scoped = [
            t for t in tasks if same_member(t.owner, member) or same_member(t.creator, member)
        ]
        lines += ["", f"**Your tasks** (owner or creator: {at(member)}):"]
    else:
        scoped = list(tasks)
        lines += ["", "**All tasks:**"]
    lines += [f"- {line_of[t.id]}" for t in scoped[:max_tasks]] or ["(none)"]
    if len(scoped) > max_tasks:
        lines.append(f"... {len(scoped) - max_tasks} more")
    lines += [
        "",
        "Use get_planning_task(id) for exact ID lookup, search_planning(...) to filter tasks, "
        "update_planning(...) to create, change or delete tasks.",
    ]
    return "\n".join(lines)


def random_board_batch(board: Board, rng: random.Random) -> None:
    creator = rng.choice(MEMBERS)
    ids = sorted(board.tasks)
    create = [
        TaskCreate(description=f"task {rng.random():.4f}", owner=rng.choice([None, *MEMBERS]))
        for _ in range(rng.randint(0, 4))
    ]
    picked = rng.sample(ids, k=min(len(ids), rng.randint(0, 3)))
    deleted = set(rng.sample(picked, k=min(len(picked), rng.randint(0, 1))))
    update = [
        TaskUpdate(
            id=i,
            version=board.tasks[i].version,
            status=rng.choice([None, *STATUSES]),
            owner=rng.choice([None, *MEMBERS]),
            output=rng.choice([None, "done"]),
        )
        for i in picked
        if i not in deleted
    ]
    update = [u for u in update if u.status or u.owner or u.output]
    if create or update or deleted:
        board.apply(creator, create=create, update=update, delete=sorted(deleted))


@pytest.mark.parametrize("seed", range(6))
def test_plan_summary_equals_the_full_scan_after_every_batch(seed: int) -> None:
    rng = random.Random(seed)
    board = Board()
    for step in range(60):
        random_board_batch(board, rng)
        if step == 30:  # a restart: the board is rebuilt from the stored tasks, in any order
            stored = list(board.tasks.values())
            rng.shuffle(stored)
            board = Board(stored, next_id=board.next_id)
        tasks = board.filter()  # unchanged until the next batch: each line rendered once
        lines_of = {t.id: task_line(t) for t in tasks}
        for member in (None, *MEMBERS[:4]):
            for filtered, limit in ((True, 3), (False, 5), (True, 500)):
                got = planning_summary(
                    board.view(member, filtered, limit), member, filtered, limit, HINTS
                )
                want = reference_planning_summary(tasks, member, filtered, limit, lines_of)
                assert got == want


def test_plan_view_lists_tasks_by_id_after_owner_changes() -> None:
    board = Board()
    board.apply("bob", create=[TaskCreate(description=f"t{i}") for i in range(4)])
    board.apply("alice", update=[TaskUpdate(id=3, version=1, owner="alice")])
    board.apply("alice", update=[TaskUpdate(id=1, version=1, owner="@Alice")])
    view = board.view("ALICE", True, 10)
    assert [t.id for t in view.scoped] == [1, 3]
    assert view.scoped_total == 2 and view.owners == {None: 2, "alice": 1, "@Alice": 1}


def reference_graph_summary(graph: Graph, max_roots: int) -> dict[str, Any]:
    entities = list(graph.entities.values())
    roots = [e for e in entities if e.is_root]
    return {
        "entities": len(entities),
        "relations": len(graph.relations),
        "types": Counter(e.entity_type for e in entities).most_common(),
        "roots": roots[:max_roots],
        "more_roots": max(0, len(roots) - max_roots),
    }


def random_graph_batch(graph: Graph, rng: random.Random, counter: list[int]) -> None:
    kinds = ["Service", "Person", "Team", "Host"]
    names = list(graph.entities)
    create = []
    for _ in range(rng.randint(0, 4)):
        counter[0] += 1
        create.append(
            EntityCreate(
                name=f"e{counter[0]}", entity_type=rng.choice(kinds), is_root=rng.random() < 0.3
            )
        )
    picked = rng.sample(names, k=min(len(names), rng.randint(0, 3)))
    deleted = picked[: rng.randint(0, 1)]
    update = [
        EntityUpdate(
            name=n, entity_type=rng.choice([None, *kinds]), is_root=rng.choice([None, True, False])
        )
        for n in picked[len(deleted) :]
    ]
    recreated = [EntityCreate(name=n, entity_type="Team") for n in deleted if rng.random() < 0.5]
    graph.apply(create_entities=create + recreated, update_entities=update, delete_entities=deleted)


@pytest.mark.parametrize("seed", range(6))
def test_graph_summary_equals_the_full_scan_after_every_batch(seed: int) -> None:
    rng = random.Random(seed)
    graph = Graph()
    counter = [0]
    for step in range(60):
        random_graph_batch(graph, rng, counter)
        if step == 30:  # a restart from the stored entities, in the store's key order
            stored = sorted(graph.entities.values(), key=lambda e: e.name)
            graph = Graph(stored, graph.relations.values())
        for max_roots in (0, 2, 50):
            got = graph.summary(max_roots)
            want = reference_graph_summary(graph, max_roots)
            assert (got.entities, got.relations, got.types) == (
                want["entities"],
                want["relations"],
                want["types"],
            )
            assert (got.roots, got.more_roots) == (want["roots"], want["more_roots"])


def test_graph_summary_lists_an_early_entity_made_root_in_its_place() -> None:
    graph = Graph()
    graph.apply(create_entities=[EntityCreate(name=n, entity_type="T") for n in "abc"])
    graph.apply(update_entities=[EntityUpdate(name="c", is_root=True)])
    graph.apply(update_entities=[EntityUpdate(name="a", is_root=True)])
    assert [e.name for e in graph.summary(5).roots] == ["a", "c"]
    assert isinstance(graph.summary(5).roots[0], Entity)


def test_the_plan_summary_names_at_most_twenty_owners() -> None:
    """Owners are free text: 2,000 tasks with 2,000 owners made a 197,000-character prompt
    line. The twenty with the most tasks are named, the rest counted."""
    board = Board()
    busy = [TaskCreate(description=f"b{i}", owner=f"busy{i % 20}") for i in range(60)]
    board.apply("alice", create=busy)
    for start in range(0, 2_000, 200):
        board.apply(
            "alice",
            create=[
                TaskCreate(description=f"t{i}", owner=f"o{i}") for i in range(start, start + 200)
            ],
        )
    text = planning_summary(board.view(None, False, 5), None, False, 5, HINTS)
    [owners] = [line for line in text.splitlines() if line.startswith("Owners:")]
    assert owners.count(": 3") == 20 and "@o1:" not in owners
    assert owners.endswith("| 2000 more owners") and len(owners) < 600
