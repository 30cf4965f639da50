"""Fixtures for the agent-surface tests: a workspaces root and audit trails in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolcards.governance import AuditLog
from toolcards.runtime import Team


@pytest.fixture(autouse=True)
def fresh_implicit_team() -> Iterator[None]:
    """Cards bound without a team share the per-process in-memory team: each test starts
    with a new one, so no other test's tasks show in its prompts."""
    Team.implicit().stop()
    yield
    Team.implicit().stop()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The workspaces root (the default workspace is ``root / 'default'``)."""
    path = tmp_path / "workspaces"
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(path))
    return path


@pytest.fixture
def audit_path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "audit.db"


@pytest.fixture
def audit(audit_path: Path) -> Iterator[AuditLog]:
    with AuditLog(audit_path, durability="sync") as log:
        yield log
