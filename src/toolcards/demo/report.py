"""The main job's summary: plan, files, graph, conversation and audit trail, printed with rich.

Every value in it is data a model or the team wrote (a task, an entity, a file name, an audit
row): each is printed escaped as rich Text (the command line's ``prose`` and ``cell``), never
read as markup.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from toolcards.surfaces.cli.state import cell, prose, shown
from toolcards.tools.knowledge_graph.actor import KnowledgeGraphActor
from toolcards.tools.planning.actor import PlanningActor
from toolcards.tools.workspace.access import AccessRefused, list_files

if TYPE_CHECKING:
    from toolcards.governance.audit.log import AuditLog
    from toolcards.runtime import Team


def collect(
    team: Team, audit: AuditLog, log: Any, *, resumed: bool, with_exec: bool
) -> dict[str, Any]:
    """Read the team's state through its tool actors and the audit log."""
    plan = team.actor("#PlanningTool")
    graph = team.actor("#KnowledgeGraphTool")
    tasks = plan.ask(PlanningActor.tasks) if plan is not None else []
    found = (
        graph.ask(
            KnowledgeGraphActor.search,
            "release",
            "keyword",
            20,
            include_neighbors=True,
            include_edges=True,
        )
        if graph
        else None
    )
    root = Path(os.environ["TOOLCARDS_WORKSPACES_ROOT"]) / team.team_id
    return {
        "resumed": resumed,
        "with_exec": with_exec,
        "members": [m.name for m in team.members()],
        "tasks": tasks,
        "entities": [e for e, _ in found.entities] if found else [],
        "neighbors": list(found.neighbors) if found else [],
        "relations": list(found.edges) if found else [],
        "files": workspace_files(root),
        "audit": audit.tail(40),
        "log": log.lines,
        "approvals": log.approvals,
        "notes": log.notes,
        "events": len(team.events()),
    }


MAX_LISTED_FILES = 200


def workspace_files(root: Path) -> list[str]:
    """The files of the workspace at ``root``, relative to it, through the workspace's
    containment walk (hidden names such as the ``.toolcards-cache`` are left out)."""
    try:
        return list_files(root, MAX_LISTED_FILES)
    except AccessRefused:
        return []


def render(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary."""
    console = console or Console()
    title = "resumed from the SQLite store" if summary["resumed"] else "first run"
    console.rule(f"[bold]toolcards main job: {title}")
    for note in summary.get("notes", []):
        console.print(Text.assemble(("note:", "yellow"), " ", prose(note)))
    conversation = Table(title="What happened", show_lines=False, expand=True)
    conversation.add_column("who", style="cyan", no_wrap=True)
    conversation.add_column("text")
    for who, text in summary["log"]:
        conversation.add_row(cell(who), prose(text))
    for line in summary["approvals"]:
        conversation.add_row("scripted human", prose(line))
    console.print(conversation)

    plan = Table(title="Planning board (#PlanningTool)", expand=True)
    for col in ("id", "status", "owner", "description", "output"):
        plan.add_column(col)
    for task in summary["tasks"]:
        style = "green" if task.status == "completed" else None
        written = (prose(task.description), prose(task.output))
        plan.add_row(str(task.id), task.status, cell(task.owner or "-"), *written, style=style)
    console.print(plan)

    graph = Table(title="Knowledge graph (#KnowledgeGraphTool)", expand=True)
    graph.add_column("entity")
    graph.add_column("type")
    graph.add_column("description")
    for entity in [*summary["entities"], *summary["neighbors"]]:
        graph.add_row(cell(entity.name), cell(entity.entity_type), prose(entity.description))
    for edge in summary["relations"]:
        graph.add_row(cell(f"{edge.from_entity} -> {edge.to_entity}"), cell(edge.relation_type))
    console.print(graph)

    files = "\n".join(f"  {shown(f)}" for f in summary["files"]) or "  (none)"
    console.print(Text.assemble(("Workspace files", "bold"), "\n", files))
    if not summary["with_exec"]:
        console.print("[yellow]bwrap is not installed: the sandboxed command step was skipped[/]")

    trail = Table(
        title="Audit trail (governance)",
        expand=True,
        box=None,
        pad_edge=False,
        header_style="bold underline",
    )
    trail.add_column("who", no_wrap=True)
    trail.add_column("tool", no_wrap=True)
    trail.add_column("decision", no_wrap=True)
    trail.add_column("outcome", no_wrap=True)
    trail.add_column("arguments", no_wrap=True, overflow="ellipsis", ratio=1)
    for row in summary["audit"]:
        style = {"deny": "red", "approve": "yellow"}.get(row.decision)
        who = row.principal.removeprefix("agent.")
        values = (who, row.tool, row.decision, row.outcome, brief(row.args))
        trail.add_row(*map(cell, values), style=style)
    console.print(trail)
    members = ", ".join(map(shown, summary["members"]))
    console.print(Text(f"members: {members} · events in the log: {summary['events']}"))


def brief(args: Any, limit: int = 200) -> str:
    """Arguments on one line as ``key=value``, shortest values first (so a path is seen before
    a file's content); strings with spaces or line breaks are quoted as JSON."""
    if not isinstance(args, dict):
        return json.dumps(args, default=str)[:limit]
    parts = []
    for key, value in args.items():
        plain = isinstance(value, str) and value and not any(c.isspace() for c in value)
        parts.append(f"{key}={value if plain else json.dumps(value, default=str)}")
    return " ".join(sorted(parts, key=len))[:limit]
