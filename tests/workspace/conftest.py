from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolcards.tools.workspace.card import GrepParam, WorkspaceTool
from toolcards.tools.workspace.grep import find_rg

Tools = dict[str, Callable[..., Any]]


class Member:
    """A minimal observer with an address (the read ledger's agent key)."""

    def __init__(self, address: str, team_id: str = "team1") -> None:
        self.address = address
        self.team_id = team_id

    def notify_event(self, event: Any) -> None:
        pass


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The workspaces root; the default workspace is ``root / 'default'``."""
    path = tmp_path / "workspaces"
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(path))
    return path


@pytest.fixture
def ws(root: Path) -> Path:
    path = root / "default"
    path.mkdir(parents=True)
    return path


def tools_of(card: WorkspaceTool) -> Tools:
    return {fn.__name__: fn for fn in card.get_tools()}


def grep_tool(engine: str) -> Callable[..., Any]:
    """workspace_grep of a card using ``engine`` (the test is skipped when rg is missing)."""
    if engine == "rg" and find_rg() is None:
        pytest.skip("ripgrep (rg) is not installed")
    card = WorkspaceTool(workspace_grep=GrepParam(engine=engine))  # type: ignore[arg-type]
    return tools_of(card)["workspace_grep"]


@pytest.fixture
def tools(ws: Path) -> Tools:
    return tools_of(WorkspaceTool())


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the workspaces root holding a secret file."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("TOP SECRET\n")
    return path
