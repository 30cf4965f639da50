"""The command lines the README and docs/surfaces.md show for `examples/team` work as printed:
each `toolcards` line (servers aside) is run from a copy of the repository's example (by the
entry point in process), and the MCP Inspector line lists the team's tools (when the Inspector
is installed)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import EXAMPLE_STATE, InProcessCli
from support.newcomer import inspector_missing

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def command_lines(page: Path) -> list[list[str]]:
    """The `toolcards` and `npx` lines of the bash blocks that use examples/team."""
    text = page.read_text(encoding="utf-8").replace("\\\n", " ")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        if "examples/team" not in block:
            continue
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] in ("toolcards", "npx"):
                found.append(words)
    return found


def expected_code(line: list[str]) -> int:
    """The pages say: a write to deploy/ is denied (exit 3); everything else succeeds."""
    return 3 if any(w.startswith("path=deploy/") for w in line) else 0


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory holding a fresh copy of examples/team, as the repository root would."""
    shutil.copytree(
        REPO / "examples" / "team", tmp_path / "examples" / "team", ignore=EXAMPLE_STATE
    )
    return tmp_path


def run(words: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cli = str(BIN / "toolcards")
    words = [cli if w in ("toolcards", ".venv/bin/toolcards") else w for w in words]
    return subprocess.run(
        words, cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_UPDATE_NOTIFIER": "1"},
    )  # fmt: skip


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", ["README.md", "docs/surfaces.md"])
def test_example_team_commands_run_as_printed(
    page: str, checkout: Path, toolcards_cli: InProcessCli
) -> None:
    lines = [w for w in command_lines(REPO / page) if w[0] == "toolcards" and w[1] != "serve"]
    assert len(lines) >= 4, lines
    for words in lines:  # the entry point in process, as the console script calls it
        done = toolcards_cli(*words[1:], cwd=checkout)
        assert done.returncode == expected_code(words), (words, done.stderr)
    tail = ["audit", "tail", "-c", "examples/team/toolcards.yaml"]
    listed = toolcards_cli(*tail, cwd=checkout)
    assert "workspace_write\tdeny\tdenied" in listed.stdout


@pytest.mark.timeout(180)
@pytest.mark.skipif(inspector_missing() is not None, reason=str(inspector_missing()))
def test_inspector_line_lists_the_example_tools(checkout: Path) -> None:
    line = next(w for w in command_lines(REPO / "docs/surfaces.md") if "--cli" in w)
    done = run(["npx", "--no-install", *line[1:]], checkout)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"name": "workspace_write"' in done.stdout and '"name": "update_graph"' in done.stdout


def test_the_example_policy_gives_an_anonymous_caller_nothing() -> None:
    """The README says so of an HTTP caller without a token; the release/ rule (for any
    caller) offered it every writing tool, to be asked for approval."""
    from toolcards.core.identity import ANONYMOUS
    from toolcards.governance import Policy

    policy = Policy.from_yaml(REPO / "examples" / "team" / "policy.yaml")
    tools = ["workspace_read", "workspace_write", "workspace_edit", "workspace_delete"]
    assert [t for t in tools if policy.visible(ANONYMOUS, t)] == []
    assert policy.decide(ANONYMOUS, "workspace_write", {"path": "release/a.md"}).denied
