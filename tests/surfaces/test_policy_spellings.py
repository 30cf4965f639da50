"""`toolcards call` (the command line in process) against a copy of examples/team: the shipped
policy ("nobody writes deployment configuration", "release/ needs a human") holds for every
spelling of a path and for the writing tools whose paths sit in a list or inside a patch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from support.cli import EXAMPLE_STATE
from toolcards.surfaces.commands import app
from toolcards.surfaces.outcomes import ExitCode

REPO = Path(__file__).resolve().parents[2]
ENV = "KEY=1\n"

pytestmark = pytest.mark.timeout(60)


class Team:
    """A fresh copy of examples/team, its workspace seeded with deploy/, notes/ and release/."""

    def __init__(self, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        shutil.copytree(REPO / "examples" / "team", base / "team", ignore=EXAMPLE_STATE)
        self.config = base / "team" / "toolcards.yaml"
        self.root = base / "workspaces"
        self.ws = self.root / "example-team"
        for rel, text in {"deploy/prod.env": ENV, "notes/a.md": "hello\n"}.items():
            (self.ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.ws / rel).write_text(text)
        monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(self.root))

    def call(self, tool: str, *pairs: str) -> Result:
        return CliRunner().invoke(app, ["call", tool, *pairs, "-c", str(self.config)])

    def files(self) -> dict[str, str]:
        return {
            p.relative_to(self.ws).as_posix(): p.read_text()
            for p in self.ws.rglob("*")
            if p.is_file()
        }


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Team:
    return Team(tmp_path, monkeypatch)


SPELLINGS = {
    "./deploy/prod.env": ExitCode.DENIED,
    ".//deploy/prod.env": ExitCode.DENIED,
    "deploy/./prod.env": ExitCode.DENIED,
    " deploy/prod.env": ExitCode.DENIED,
    "notes/../deploy/prod.env": ExitCode.INVALID,  # refused before the policy and the tool
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_no_spelling_of_a_deploy_path_is_written(team: Team, spelling: str) -> None:
    before = team.files()
    done = team.call("workspace_write", f"path={spelling}", "content=PWNED")
    assert done.exit_code == SPELLINGS[spelling], done.output
    assert team.files() == before


def test_a_release_path_spelled_with_dot_needs_approval(team: Team) -> None:
    done = team.call("workspace_write", "path=./release/x.md", "content=v1")
    assert done.exit_code == ExitCode.APPROVAL, done.output
    assert not (team.ws / "release" / "x.md").exists()


def test_a_multi_edit_with_one_edit_in_deploy_is_denied(team: Team) -> None:
    edits = [
        {"path": "notes/a.md", "old_string": "hello", "new_string": "bye"},
        {"path": "./deploy/prod.env", "old_string": "KEY=1", "new_string": "PWNED"},
    ]
    before = team.files()
    done = team.call("workspace_multi_edit", f"edits={json.dumps(edits)}")
    assert done.exit_code == ExitCode.DENIED, done.output
    assert team.files() == before


PATCHES = {
    "modify": "--- a/./deploy/prod.env\n+++ b/./deploy/prod.env\n@@ -1 +1 @@\n-KEY=1\n+PWNED\n",
    "rename": "diff --git a/notes/a.md b/deploy/a.env\nsimilarity index 100%\n"
    "rename from notes/a.md\nrename to deploy/a.env\n",
}


@pytest.mark.parametrize("kind", list(PATCHES))
def test_a_patch_touching_deploy_is_denied(team: Team, kind: str) -> None:
    before = team.files()
    done = team.call("workspace_patch", f"patch_text={PATCHES[kind]}")
    assert done.exit_code == ExitCode.DENIED, done.output
    assert team.files() == before


def test_a_dot_spelling_outside_deploy_is_written_as_its_canonical_name(team: Team) -> None:
    done = team.call("workspace_write", "path=.//notes/./b.md", "content=ok")
    assert done.exit_code == ExitCode.OK, done.output
    assert "Created notes/b.md" in done.stdout
    assert (team.ws / "notes" / "b.md").read_text() == "ok"
