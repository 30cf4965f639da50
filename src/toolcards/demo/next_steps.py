"""What the main job leaves for the next step: a surfaces config serving the same team over MCP,
and the closing lines that say how to resume, start over, serve and watch the team."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from toolcards import dump_cards
from toolcards.demo.state import AUDIT, CONFIG, POLICY, STORE, WORKSPACES

PRINCIPAL = {"id": "agent.mcp-client", "type": "agent", "roles": ["member"]}
"""Who an MCP client of the served demo team is: a member, so the job's policy applies."""


def write_serve_config(state_dir: Path, team_id: str, cards: list[Any], policy: Any) -> Path:
    """Write ``toolcards.yaml`` and ``policy.yaml`` beside the store: ``toolcards serve`` on
    that config serves the job's team (same store, policy and audit log)."""
    (state_dir / POLICY).write_text(yaml.safe_dump(policy, sort_keys=False), encoding="utf-8")
    config = {
        "team_id": team_id,
        "store": STORE,
        "cards": dump_cards(cards),
        "policy": POLICY,
        "audit": AUDIT,
        "principals": {"local": PRINCIPAL},
    }
    path = state_dir / CONFIG
    head = "# Written by python -m toolcards.demo: serves the demo team (see next steps).\n"
    path.write_text(head + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _command(name: str, module: str) -> str:
    """How to run ``name`` from this shell: the bare name when it is on PATH and belongs to
    this interpreter, else the script beside the interpreter, else ``python -m``."""
    beside = Path(sys.executable).parent / name
    found = shutil.which(name)
    if found and beside.exists() and Path(found).resolve() == beside.resolve():
        return name
    if beside.exists():
        return _short(beside)
    return f"python -m {module}"


def _short(path: Path) -> str:
    """``path`` relative to the working directory when that is shorter (and not ``../``)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return rel if len(rel) < len(str(path)) and not rel.startswith("..") else str(path)


def print_next_steps(
    state_dir: Path, team_id: str, *, state_given: bool, console: Console | None = None
) -> None:
    """The closing lines of the job: resume, start over, where the state lives, MCP and the
    dashboard."""
    console = console or Console()
    python = _command("python", "python")
    cli = _command("toolcards", "toolcards.surfaces.main")
    state = shlex.quote(_short(state_dir.resolve()) if state_dir.is_absolute() else str(state_dir))
    demo = f"{python} -m toolcards.demo" + (f" --state {state}" if state_given else "")
    root = os.environ.get("TOOLCARDS_WORKSPACES_ROOT", f"{state}/{WORKSPACES}")
    steps = [
        ("run it again: the team resumes", demo + ("" if state_given else "   (or: make run)")),
        ("start over", f"{demo} --fresh"),
        ("the state lives in", f"{state}/ ({STORE}, {AUDIT}, {WORKSPACES}/, {CONFIG})"),
        (
            "serve this team over MCP (stdio)",
            f"TOOLCARDS_WORKSPACES_ROOT={shlex.quote(root)} {cli} serve --config {state}/{CONFIG}",
        ),
        (
            "open the dashboard on it",
            f"{cli} dashboard --store {state}/{STORE} --team {team_id} --audit {state}/{AUDIT}",
        ),
    ]
    console.print("[bold]Next steps[/]")
    for what, command in steps:
        console.print(f"  {what}:", highlight=False)
        console.print(f"    {command}", markup=False, highlight=False, soft_wrap=True)
