"""Text the model reads about the board."""

from __future__ import annotations

from collections.abc import Sequence

from toolcards.governance.approvals.view import escaped_line as shown
from toolcards.tools.planning.board import BoardView
from toolcards.tools.planning.models import STATUSES, Task

MAX_OWNERS = 20
"""Owners named in the summary (those with the most tasks); the rest are counted."""


def at(name: str | None) -> str:
    """A member name as shown to the model (``@alice``)."""
    if not name:
        return "unassigned"
    return shown(name if name.startswith("@") else "@" + name)


def task_line(task: Task) -> str:
    """One task on one line."""
    line = f"ID {task.id} [{task.status}] {shown(task.description)}"
    if task.output:
        line += f" — Output: {shown(task.output)}"
    meta = f"Owner: {at(task.owner)}, Creator: {at(task.creator)}"
    if task.depends_on:
        meta += ", after: " + ", ".join(str(d) for d in task.depends_on)
    return f"{line} ({meta})"


def task_detail(task: Task, dependencies: Sequence[Task]) -> str:
    """Everything about one task, including the state of its dependencies."""
    lines = [
        f"ID {task.id} [{task.status}] version {task.version}",
        f"Description: {shown(task.description)}",
        f"Owner: {at(task.owner)} | Creator: {at(task.creator)}",
    ]
    if dependencies:
        deps = ", ".join(f"{d.id} [{d.status}]" for d in dependencies)
        lines.append(f"Depends on: {deps}")
    lines.append(f"Output: {shown(task.output) if task.output else '(none yet)'}")
    return "\n".join(lines)


def planning_summary(
    view: BoardView,
    member: str | None,
    filter_by_agent: bool,
    max_tasks: int,
    hint_tools: Sequence[str],
) -> str:
    """Totals, owners, the tasks in scope and a hint naming only the exposed tools."""
    by_status = ", ".join(f"{view.by_status[s]} {s}" for s in STATUSES if view.by_status.get(s))
    header = f"**Team planning:** {view.total} task{'' if view.total == 1 else 's'} total"
    lines = [header + (f" ({by_status})" if by_status else "")]
    owners: dict[str, int] = {}
    for owner, count in view.owners.items():
        key = at(owner)
        owners[key] = owners.get(key, 0) + count
    if owners:
        unassigned = owners.pop("unassigned", 0)
        named = sorted(owners.items())
        if len(named) > MAX_OWNERS:  # owners are free text: the ones with most tasks
            named = sorted(sorted(named, key=lambda kv: -kv[1])[:MAX_OWNERS])
        parts = [f"{name}: {n}" for name, n in named]
        if len(owners) > MAX_OWNERS:
            parts.append(f"{len(owners) - MAX_OWNERS} more owners")
        if unassigned:
            parts.append(f"unassigned: {unassigned}")
        lines.append("Owners: " + " | ".join(parts))
    if filter_by_agent and member:
        lines += ["", f"**Your tasks** (owner or creator: {at(member)}):"]
    else:
        lines += ["", "**All tasks:**"]
    lines += [f"- {task_line(t)}" for t in view.scoped[:max_tasks]] or ["(none)"]
    if view.scoped_total > max_tasks:
        lines.append(f"... {view.scoped_total - max_tasks} more")
    hints = []
    if "get_planning_task" in hint_tools:
        hints.append("get_planning_task(id) for exact ID lookup")
    if "search_planning" in hint_tools:
        hints.append("search_planning(...) to filter tasks")
    if "update_planning" in hint_tools:
        hints.append("update_planning(...) to create, change or delete tasks")
    if hints:
        lines += ["", "Use " + ", ".join(hints) + "."]
    return "\n".join(lines)
