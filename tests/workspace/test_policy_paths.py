"""The shipped examples/team policy ("nobody writes deployment configuration", "release/ needs a
human") holds for every spelling of a path and every writing tool, through a governed
pydantic-ai toolset in real agent runs: the policy decides on the names the tools act on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.tools import DeferredToolRequests

from support.scripted import SequenceScript
from toolcards.core.factory import ToolFactory
from toolcards.governance import GovernedToolset, Identity, Policy
from toolcards.tools.workspace.card import WorkspaceTool

REPO = Path(__file__).resolve().parents[2]
TEAM_POLICY = REPO / "examples" / "team" / "policy.yaml"
ALICE = Identity("alice", "user", ["writer"])
ENV = "KEY=1\n"

WRITE_SPELLINGS = ["./deploy/prod.env", ".//deploy/prod.env", "deploy/./prod.env",
                   " deploy/prod.env", "deploy//prod.env", "shortcut/prod.env"]  # fmt: skip
"""``shortcut`` is a link to ``deploy`` inside the workspace (as a command could plant)."""


MODIFY = "@@ -1 +1 @@\n-KEY=1\n+PWNED\n"


def _patch(old: str, new: str, body: str) -> str:
    return f"--- {old}\n+++ {new}\n{body}"


def _rename(old: str, new: str) -> str:
    header = f"diff --git a/{old} b/{new}\nsimilarity index 100%\n"
    return f"{header}rename from {old}\nrename to {new}\n"


def _edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"path": path, "old_string": old, "new_string": new}


NOTES_EDIT = _edit("notes/a.md", "hello", "bye")


DENIED_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    **{
        f"write {s!r}": ("workspace_write", {"path": s, "content": "PWNED\n"})
        for s in WRITE_SPELLINGS
    },
    "edit ./deploy": (
        "workspace_edit",
        {"path": "./deploy/prod.env", "old_string": "KEY=1", "new_string": "PWNED"},
    ),
    "multi_edit with one edit in deploy": (
        "workspace_multi_edit",
        {"edits": [NOTES_EDIT, _edit("deploy/./prod.env", "KEY=1", "PWNED")]},
    ),
    "patch modifying deploy": (
        "workspace_patch",
        {"patch_text": _patch("a/./deploy/prod.env", "b/./deploy/prod.env", MODIFY)},
    ),
    "patch creating in deploy": (
        "workspace_patch",
        {"patch_text": _patch("/dev/null", "b/deploy//new.env", "@@ -0,0 +1 @@\n+PWNED\n")},
    ),
    "patch renaming into deploy": (
        "workspace_patch",
        {"patch_text": _rename("notes/a.md", "deploy/a.env")},
    ),
    "patch renaming out of deploy": (
        "workspace_patch",
        {"patch_text": _rename("deploy/prod.env", "notes/prod.env")},
    ),
    "delete ./deploy": ("workspace_delete", {"path": "./deploy/prod.env"}),
    "mkdir ./deploy": ("workspace_mkdir", {"path": "./deploy/sub"}),
}

APPROVAL_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "write ./release": ("workspace_write", {"path": "./release/x.md", "content": "v1\n"}),
    "multi_edit with one edit in release": (
        "workspace_multi_edit",
        {"edits": [NOTES_EDIT, _edit("./release/notes.md", "v0", "v1")]},
    ),
    "patch renaming into release": (
        "workspace_patch",
        {"patch_text": _rename("notes/a.md", "release//a.md")},
    ),
}


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "workspaces"
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(root))
    path = root / "w"
    seed = {"deploy/prod.env": ENV, "notes/a.md": "hello\n", "release/notes.md": "v0\n"}
    for rel, text in seed.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    (path / "shortcut").symlink_to("deploy")
    return path


def tree(path: Path) -> dict[str, str]:
    """Every file below ``path`` and its text (what a denied call must leave unchanged)."""
    return {p.relative_to(path).as_posix(): p.read_text() for p in path.rglob("*") if p.is_file()}


def run(ws: Path, call: tuple[str, dict[str, Any]], policy: Policy | None = None) -> Any:
    toolset = GovernedToolset(
        ToolFactory([WorkspaceTool(workspace_id=ws.name)]).toolset(),
        policy=policy or Policy.from_yaml(TEAM_POLICY),
        identity=ALICE,
    )
    script = SequenceScript([call])
    agent = Agent(script.model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    return agent.run_sync("go").output


@pytest.mark.parametrize("case", list(DENIED_CALLS))
def test_no_spelling_or_writing_tool_writes_deployment_configuration(ws: Path, case: str) -> None:
    before = tree(ws)
    output = run(ws, DENIED_CALLS[case])
    assert isinstance(output, str) and "denied:" in output, output
    assert tree(ws) == before


@pytest.mark.parametrize("case", list(APPROVAL_CALLS))
def test_every_writing_tool_into_release_waits_for_a_human(ws: Path, case: str) -> None:
    before = tree(ws)
    output = run(ws, APPROVAL_CALLS[case])
    assert isinstance(output, DeferredToolRequests) and len(output.approvals) == 1, output
    assert tree(ws) == before


def test_the_approver_is_shown_the_canonical_path(ws: Path) -> None:
    output = run(ws, APPROVAL_CALLS["write ./release"])
    assert isinstance(output, DeferredToolRequests)
    assert output.metadata[output.approvals[0].tool_call_id]["args"]["path"] == "release/x.md"


def test_an_allow_rule_on_notes_does_not_allow_a_call_that_also_writes_elsewhere(
    ws: Path,
) -> None:
    notes_only = {"arguments": {"path": {"glob": "notes/*"}}}
    targets = ["workspace_multi_edit", "workspace_patch"]
    policy = Policy.from_dict(
        {"rules": [{"targets": targets, "effect": "allow", "conditions": notes_only}]}
    )
    before = tree(ws)
    both = DENIED_CALLS["multi_edit with one edit in deploy"]
    assert "denied:" in run(ws, both, policy)
    assert "denied:" in run(ws, DENIED_CALLS["patch renaming into deploy"], policy)
    assert tree(ws) == before
    assert "denied:" not in run(ws, ("workspace_multi_edit", {"edits": [NOTES_EDIT]}), policy)
    assert (ws / "notes" / "a.md").read_text() == "bye\n"


ALLOWED_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "write": ("workspace_write", {"path": ".//notes/./b.md", "content": "ok\n"}),
    "multi_edit": (
        "workspace_multi_edit",
        {"edits": [{"path": "./notes/a.md", "old_string": "hello", "new_string": "bye"}]},
    ),
    "patch": ("workspace_patch", {"patch_text": _rename("notes/a.md", "notes//b.md")}),
    "delete": ("workspace_delete", {"path": "notes/./a.md"}),
    "mkdir": ("workspace_mkdir", {"path": "./notes/sub"}),
}


@pytest.mark.parametrize("case", list(ALLOWED_CALLS))
def test_a_writing_tool_outside_deploy_and_release_runs(ws: Path, case: str) -> None:
    before = tree(ws)
    output = run(ws, ALLOWED_CALLS[case])
    assert "denied:" not in output and "error" not in output, output
    assert tree(ws) != before or (ws / "notes" / "sub").is_dir()
    assert tree(ws / "deploy") == {"prod.env": ENV}


BLANK_LINKS = {"blank": " deploy", "tab": "\tdeploy", "wide": "deploy/prod.env\u3000",
               "spaced": " release"}  # fmt: skip
"""Links a command could plant, to names with blank space at an end: the policy decided on
``" deploy/prod.env"`` and the tool, reading that name again stripped, wrote ``deploy/``."""

THROUGH_BLANK_LINKS: dict[str, tuple[str, dict[str, Any]]] = {
    "write blank/": ("workspace_write", {"path": "blank/prod.env", "content": "PWNED\n"}),
    "delete blank/": ("workspace_delete", {"path": "blank/prod.env"}),
    "edit wide": ("workspace_edit", _edit("wide", "KEY=1", "PWNED")),
    "multi_edit tab/": (
        "workspace_multi_edit",
        {"edits": [NOTES_EDIT, _edit("tab/prod.env", "KEY=1", "PWNED")]},
    ),
    "write spaced/ (release)": ("workspace_write", {"path": "spaced/x.md", "content": "v1\n"}),
}


@pytest.fixture
def blank_links(ws: Path) -> Path:
    for name, target in BLANK_LINKS.items():
        (ws / name).symlink_to(target)
    return ws


@pytest.mark.parametrize("case", list(THROUGH_BLANK_LINKS))
def test_a_link_to_a_blank_spelled_name_never_reaches_a_guarded_path(
    blank_links: Path, case: str
) -> None:
    before = tree(blank_links)
    output = run(blank_links, THROUGH_BLANK_LINKS[case])
    assert isinstance(output, str) and "no path argument spells" in output, output
    assert tree(blank_links) == before


def test_an_eq_rule_holds_through_a_link_to_a_blank_spelled_name(blank_links: Path) -> None:
    guarded = {"arguments": {"path": {"eq": "deploy/prod.env"}}}
    policy = Policy.from_dict(
        {
            "rules": [
                {"targets": ["workspace_edit"], "effect": "deny", "conditions": guarded},
                {"targets": ["*"], "effect": "allow"},
            ]
        }
    )
    before = tree(blank_links)
    direct = ("workspace_edit", _edit("deploy/prod.env", "KEY", "PWNED"))
    assert "denied:" in run(blank_links, direct, policy)
    output = run(blank_links, THROUGH_BLANK_LINKS["edit wide"], policy)
    assert "no path argument spells" in output, output
    assert tree(blank_links) == before
