"""The main job: an offline team that plans, writes, remembers, is governed and resumes.

Two members driven by scripted models (no API key) share one planning board, one knowledge
graph, one vector store and one workspace. A policy denies one call, a scripted human approves
another, every decision lands in the audit log, and the whole state lives in one SQLite file:
run it twice and the second run resumes from it. ``--model openai:gpt-4o`` swaps the scripts
for a real provider.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolcards import (
    ExecTool,
    KnowledgeGraphTool,
    NotificationTool,
    PlanningTool,
    VectorStoreTool,
    WorkspaceTool,
)
from toolcards.demo.next_steps import write_serve_config
from toolcards.demo.reminder import delivered_reminder
from toolcards.demo.report import collect
from toolcards.demo.script import Scene, first_int, scripted_model
from toolcards.demo.state import (
    AUDIT,
    STORE,
    WORKSPACES,
    DemoError,
    clear,
    has_leftovers,
    in_use,
    is_complete,
    mark_complete,
    prepare,
)
from toolcards.demo.steps import Steps
from toolcards.governance import AuditLog, Policy
from toolcards.runtime import RoleProfile, StoreError, StoreLockedError, Team, check_model

TEAM_ID = "release-team"
LEAD, ENGINEER = "@lead-1", "@engineer-1"
START_OVER = "run with --fresh to start over, or pass --state with another directory"

WRITING = [
    "workspace_write",
    "workspace_edit",
    "workspace_multi_edit",
    "workspace_patch",
    "workspace_delete",
    "workspace_mkdir",
]
"""Every tool that writes the workspace: a path rule must name them all."""

POLICY: dict[str, Any] = {
    "default_effect": "deny",
    "rules": [
        {
            "description": "Nobody writes deployment configuration",
            "callers": ["*"],
            "targets": WRITING,
            "effect": "deny",
            "conditions": {"arguments": {"path": {"glob": "deploy/*"}}},
        },
        {
            "description": "Publishing into release/ needs a human",
            "callers": ["agent.*"],
            "targets": WRITING,
            "effect": "approve",
            "conditions": {"arguments": {"path": {"glob": "release/*"}}},
        },
        {
            "description": "Team members use the team's tools",
            "callers": ["agent.*"],
            "targets": ["*"],
            "effect": "allow",
            "conditions": {"roles": ["member"]},
        },
    ],
}

NOTES = """# Release notes (Draft)

## Governance
- One executor for every call: identity, ACL, approval, validation, audit.

## Team state
- Plans and graphs survive a restart.
"""


@dataclass
class JobLog:
    """What happened, for the summary."""

    lines: list[tuple[str, str]] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: Steps = field(default_factory=Steps)
    """Each step as it happens (stderr), before the summary."""

    def add(self, who: str, text: str) -> None:
        self.lines.append((who, text))


def _lead_scenes() -> list[Scene]:
    return [
        Scene(
            trigger="plan the release",
            calls=[
                (
                    "update_planning",
                    {
                        "create": [
                            {"description": "Draft the release notes", "owner": ENGINEER},
                            {"description": "Review the published notes", "owner": LEAD},
                        ]
                    },
                ),
                (
                    "update_graph",
                    {
                        "create_entities": [
                            {
                                "name": "toolcards 0.1",
                                "entity_type": "release",
                                "description": "First release of the governed tool catalog",
                                "is_root": True,
                            },
                            {
                                "name": "governed executor",
                                "entity_type": "feature",
                                "description": "Identity, ACL, approvals and audit on every call",
                            },
                            {
                                "name": "team state",
                                "entity_type": "feature",
                                "description": "Shared plan and graph that survive a restart",
                            },
                        ],
                        "create_relations": [
                            {
                                "from_entity": "toolcards 0.1",
                                "to_entity": "governed executor",
                                "relation_type": "ships",
                            },
                            {
                                "from_entity": "toolcards 0.1",
                                "to_entity": "team state",
                                "relation_type": "ships",
                            },
                        ],
                    },
                ),
                (
                    "register_notification",
                    {"content": "Check that the release notes are published", "delay_seconds": 2},
                ),
            ],
            reply="Planned two tasks, recorded the release in the graph, set a reminder.",
        )
    ]


def _engineer_scenes(with_exec: bool) -> list[Scene]:
    calls: list[tuple[str, Any]] = [
        ("search_graph", {"query": "what ships in the release", "include_neighbors": True}),
        ("workspace_write", {"path": "notes/RELEASE.md", "content": NOTES}),
        ("workspace_read", {"path": "notes/RELEASE.md"}),
        (
            "workspace_edit",
            {"path": "notes/RELEASE.md", "old_string": "(Draft)", "new_string": "(Final)"},
        ),
    ]
    if with_exec:
        calls.append(("exec_command", {"command": "wc -l notes/RELEASE.md"}))
    calls += [
        ("workspace_write", {"path": "deploy/prod.env", "content": "RELEASE=0.1\n"}),
        ("workspace_write", {"path": "release/NOTES.md", "content": NOTES.replace("Draft", "1")}),
        ("search_planning", {"query": "release notes draft"}),
        ("get_planning_task", lambda r: {"id": first_int(r[-1].split("ID", 1)[-1])}),
        (
            "update_planning",
            lambda r: {
                "update": [
                    {
                        "id": first_int(r[-1]),
                        "version": int(r[-1].split("version", 1)[1].split()[0]),
                        "status": "completed",
                        "output": "Published release/NOTES.md",
                    }
                ]
            },
        ),
    ]
    return [
        Scene(
            trigger="write the release notes",
            calls=calls,
            reply="Notes written, edited and published; task completed.",
        )
    ]


def build_profiles(model: str | None, with_exec: bool) -> list[Any]:
    """The two roles; scripted models unless ``model`` names a real provider."""
    store = VectorStoreTool(provider=_embedding_provider())
    shared: list[Any] = [store, PlanningTool(), KnowledgeGraphTool()]
    engineer_cards: list[Any] = [*shared, WorkspaceTool()]
    if with_exec:
        engineer_cards.append(ExecTool(mode="bwrap", allowed_commands=["wc", "ls", "cat"]))
    return [
        RoleProfile(
            role="lead",
            description="Plans the work and keeps the team's memory",
            instructions="You lead a small release team. Plan, record facts, set reminders.",
            model=model or scripted_model(_lead_scenes(), name="lead"),
            cards=[*shared, NotificationTool()],
            roles=["member", "lead"],
        ),
        RoleProfile(
            role="engineer",
            description="Writes and publishes files in the workspace",
            instructions="You write the files the plan asks for and mark tasks done.",
            model=model or scripted_model(_engineer_scenes(with_exec), name="engineer"),
            cards=[*engineer_cards],
            roles=["member"],
        ),
    ]


def _embedding_provider() -> Literal["local", "hash"]:
    try:
        # lazy: extra vector; the probe that picks the embedding provider
        import numpy  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return "hash"
    return "local"


def _scripted_human(log: JobLog) -> Any:
    async def approve(request: Any) -> bool:
        path = str(request.args.get("path", ""))
        ok = path.startswith("release/")
        verdict = "approved" if ok else "refused"
        log.approvals.append(f"{verdict}: {request.tool_id}({path}) for {request.principal}")
        return ok

    return approve


def run_job(state_dir: Path, model: str | None = None) -> dict[str, Any]:
    """Run (or resume) the team in ``state_dir``; returns what the summary shows.

    A first run that fails leaves nothing behind; a directory holding the remains of a run
    that stopped early (or a team without its members) is cleared, with a note in the
    summary, and the job starts over. Problems the user can fix raise :class:`DemoError` or
    :class:`~toolcards.runtime.ModelUnavailable` (one line each).
    """
    if model is not None:
        check_model(model)  # before anything is created
    prepare(state_dir)
    os.environ.setdefault("TOOLCARDS_WORKSPACES_ROOT", str(state_dir / WORKSPACES))
    with_exec = shutil.which("bwrap") is not None
    log = JobLog()
    resumed = is_complete(state_dir)
    if not resumed and has_leftovers(state_dir):
        _start_over(state_dir, log, "an earlier run stopped before the team was set up")
    with log.steps.opening():
        team, audit = _open(state_dir, log, model, with_exec, resumed)
    if resumed and not {LEAD, ENGINEER} <= {m.name for m in team.members()}:
        team.stop()
        audit.close()
        _start_over(state_dir, log, "its team has no members")
        resumed = False
        team, audit = _open(state_dir, log, model, with_exec, resumed)
    log.steps.note(f"team {TEAM_ID} open, its store in {state_dir}")
    settled = resumed
    try:
        if not resumed:
            for role in ("lead", "engineer"):
                log.add("team", f"hired {team.hire(role)}")
                log.steps.note(log.lines[-1][1])
            _talk(team, log, LEAD, "Please plan the release of toolcards 0.1.")
            _talk(team, log, ENGINEER, "Please write the release notes and publish them.")
            engineer = next(p for p in team.profiles if p.role == "engineer")
            write_serve_config(state_dir, TEAM_ID, list(engineer.cards), POLICY)
            mark_complete(state_dir, team=TEAM_ID, model=model or "scripted")
            settled = True
            _wait_for_notification(team, log, timeout=0.0)  # shown now if it already fired
        else:
            log.add("team", f"resumed with members {', '.join(m.name for m in team.members())}")
            log.steps.note(log.lines[-1][1])
            _wait_for_notification(team, log)
            _talk(team, log, LEAD, "/get_planning", command=True)

        return collect(team, audit, log, resumed=resumed, with_exec=with_exec)
    finally:
        team.stop()
        audit.close()
        if not settled:  # never keep a half-made team
            with contextlib.suppress(DemoError):
                clear(state_dir)


def _start_over(state_dir: Path, log: JobLog, why: str) -> None:
    clear(state_dir)
    prepare(state_dir)
    log.notes.append(f"the saved state in {state_dir} was incomplete ({why}): started over")


def _open(
    state_dir: Path, log: JobLog, model: str | None, with_exec: bool, resume: bool
) -> tuple[Team, AuditLog]:
    """The team and its audit log; store problems become one-line :class:`DemoError`s."""
    path = state_dir / AUDIT
    try:
        audit = AuditLog(path, durability="sync", team_id=TEAM_ID)
    except sqlite3.Error as exc:
        raise DemoError(f"cannot open the audit log {path}: {exc}; {START_OVER}") from None
    options: dict[str, Any] = {
        "profiles": build_profiles(model, with_exec),
        "policy": Policy.from_dict(POLICY),
        "audit": audit,
        "approver": _scripted_human(log),
    }
    store = state_dir / STORE
    try:
        if resume:
            return Team.resume(TEAM_ID, store, **options), audit
        return Team(TEAM_ID, store, **options), audit
    except StoreLockedError:
        audit.close()
        raise in_use(state_dir, _holder(state_dir)) from None
    except StoreError as exc:
        audit.close()
        raise DemoError(f"{exc}; {START_OVER}") from None
    except BaseException:
        audit.close()
        raise


def _holder(state_dir: Path) -> str:
    try:
        return (state_dir / f"{STORE}.lock").read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def _talk(team: Team, log: JobLog, to: str, text: str, *, command: bool = False) -> None:
    log.add(f"user -> {to}", text)
    with log.steps.turn(to, text):
        answer = team.send(to, text, timeout=120, command=command)
    log.add(f"{to} -> user", answer)


def _wait_for_notification(team: Team, log: JobLog, timeout: float = 15.0) -> None:
    """Log the reminder if it is delivered during this run (see :func:`delivered_reminder`)."""
    found = delivered_reminder(team, timeout)
    if found is not None:
        log.add(f"#NotificationTool -> {found[0]}", found[1])
