"""``toolcards init``: a minimal, commented ``toolcards.yaml`` and ``policy.yaml`` in the
current folder. Only what differs from the defaults is written; the comments name the rest."""

from __future__ import annotations

import getpass
import re
from pathlib import Path
from typing import Annotated

import typer

from toolcards.surfaces.cli.state import err, fail
from toolcards.surfaces.outcomes import ExitCode

CONFIG_TEXT = """\
# toolcards config (docs/surfaces.md). Paths are relative to this file. Not written here, so
# at their defaults: team_id toolcards, store team.db and audit audit.db beside this file,
# workspaces under workspaces/, approval_timeout 300 s, a 60 s timeout per call.
cards:
  - {{type: WorkspaceTool}}                     # files in workspaces/toolcards/
  - {{type: PlanningTool, vector_store: false}} # a shared task board
policy: policy.yaml
principals:
  # Who `toolcards list|call` and `toolcards serve` (stdio) call as; as a viewer, it signs in
  # to `toolcards dashboard` with the one-time link the command prints.
  local: {{id: {user}, type: user, roles: [writer, viewer]}}
  # HTTP callers (`toolcards serve --transport http`) and more dashboard sign-ins: run
  # `toolcards hash-token`, keep the token, and add its digest here, e.g.
  # tokens:
  #   - {{token_sha256: "sha256:...", id: agent.bot, type: agent, roles: [writer]}}
  #   - {{token_sha256: "sha256:...", id: {user}-browser, type: user, roles: [viewer, approver]}}
"""

POLICY_TEXT = """\
# Who may call which tool (docs/governance.md): the first matching rule wins; a call no rule
# matches is denied (default_effect: deny).
rules:
  # - description: Deleting files needs a human (toolcards approvals grant ID)
  #   callers: ["*"]
  #   targets: [workspace_delete]
  #   effect: approve
  - description: Writers use every tool
    callers: ["*"]
    targets: ["*"]
    effect: allow
    conditions: {roles: [writer]}
"""

CONFIG_NAME = "toolcards.yaml"
POLICY_NAME = "policy.yaml"


def _user() -> str:
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        name = ""
    name = re.sub(r"[^A-Za-z0-9_.-]", "", name)
    return name or "me"


def init(
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite toolcards.yaml and policy.yaml.")
    ] = False,
) -> None:
    """Write a minimal, commented toolcards.yaml and policy.yaml here.

    Existing files are left alone unless --force is given."""
    here = Path.cwd()
    files = {here / CONFIG_NAME: CONFIG_TEXT.format(user=_user()), here / POLICY_NAME: POLICY_TEXT}
    present = [path.name for path in files if path.exists()]
    if present and not force:
        fail(f"{' and '.join(present)} already here (--force overwrites)", ExitCode.USAGE)
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    err().print(
        f"wrote {CONFIG_NAME} and {POLICY_NAME}; try: toolcards list", markup=False, emoji=False
    )
