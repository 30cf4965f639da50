"""Tools of the OAuth tests (``tools: [oauth_tools:TOOLS]``): who the executor saw calling."""

from __future__ import annotations

from pathlib import Path

from toolcards.core.identity import calling_principal

POLICY = """\
default_effect: deny
rules:
  - description: Any known user may ask who they are
    targets: ["whoami"]
    effect: allow
    conditions: {identity_types: ["user"]}
  - description: Only alice's token, as a CRM admin, deletes records
    callers: ["oauth:alice"]
    targets: ["delete_record"]
    effect: allow
    conditions: {roles: ["crm_admin"]}
  - description: The static principal carol deletes records
    callers: ["carol"]
    targets: ["delete_record"]
    effect: allow
"""


def whoami() -> str:
    """The calling principal: id, type and roles."""
    who = calling_principal.get()
    if who is None:
        return "nobody"
    return f"{who.id} {who.type} {','.join(sorted(who.roles))}"


def delete_record(id: int) -> str:
    """Delete one record."""
    return f"deleted {id}"


TOOLS = [whoami, delete_record]


def write_policy(directory: Path) -> Path:
    path = directory / "policy.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return path
