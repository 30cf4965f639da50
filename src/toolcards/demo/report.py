"""The main job's summary: plan, files, graph, conversation and audit trail, printed with rich."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolcards.tools.knowledge_graph.actor import KnowledgeGraphActor
from toolcards.tools.planning.actor import PlanningActor

if TYPE_CHECKING:
    from toolcards.governance.audit import AuditLog
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
    files = (
        sorted(
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and ".toolcards" not in str(p)
        )
        if root.exists()
        else []
    )
    return {
        "resumed": resumed,
        "with_exec": with_exec,
        "members": [m.name for m in team.members()],
        "tasks": tasks,
        "entities": [e for e, _ in found.entities] if found else [],
        "neighbors": list(found.neighbors) if found else [],
        "relations": list(found.edges) if found else [],
        "files": files,
        "audit": audit.tail(40),
        "log": log.lines,
        "approvals": log.approvals,
        "events": len(team.events()),
    }


def render(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary."""
    console = console or Console()
    title = "resumed from the SQLite store" if summary["resumed"] else "first run"
    console.rule(f"[bold]toolcards main job: {title}")
    conversation = Table(title="What happened", show_lines=False, expand=True)
    conversation.add_column("who", style="cyan", no_wrap=True)
    conversation.add_column("text")
    for who, text in summary["log"]:
        conversation.add_row(escape(who), escape(text))
    for line in summary["approvals"]:
        conversation.add_row("scripted human", escape(line))
    console.print(conversation)

    plan = Table(title="Planning board (#PlanningTool)", expand=True)
    for col in ("id", "status", "owner", "description", "output"):
        plan.add_column(col)
    for task in summary["tasks"]:
        style = "green" if task.status == "completed" else None
        plan.add_row(
            str(task.id), task.status, task.owner or "-", task.description, task.output, style=style
        )
    console.print(plan)

    graph = Table(title="Knowledge graph (#KnowledgeGraphTool)", expand=True)
    graph.add_column("entity")
    graph.add_column("type")
    graph.add_column("description")
    for entity in summary["entities"]:
        graph.add_row(entity.name, entity.entity_type, entity.description)
    for entity in summary["neighbors"]:
        graph.add_row(entity.name, entity.entity_type, entity.description)
    for edge in summary["relations"]:
        graph.add_row(f"{edge.from_entity} -> {edge.to_entity}", edge.relation_type, "")
    console.print(graph)

    files = "\n".join(f"  {f}" for f in summary["files"]) or "  (none)"
    console.print(f"[bold]Workspace files[/]\n{files}")
    if not summary["with_exec"]:
        console.print("[yellow]bwrap is not installed: the sandboxed command step was skipped[/]")

    trail = Table(title="Audit trail (governance)", expand=True)
    for col in ("principal", "tool", "decision", "outcome", "args"):
        trail.add_column(col)
    for row in summary["audit"]:
        style = {"deny": "red", "approve": "yellow"}.get(row.decision)
        args = json.dumps(row.args, default=str)
        args = args if len(args) <= 60 else args[:57] + "..."
        trail.add_row(row.principal, row.tool, row.decision, row.outcome, escape(args), style=style)
    console.print(trail)
    console.print(
        f"members: {', '.join(summary['members'])} · events in the log: {summary['events']}"
    )
