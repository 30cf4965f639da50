"""Fixtures for the exec card: a private workspaces root and a fresh service registry."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolcards.tools.exec.service import reset_services


@pytest.fixture(autouse=True)
def workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "workspaces"
    root.mkdir()
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(root))
    yield root
    reset_services()


@pytest.fixture
def marker() -> str:
    """A number unique to the test, usable as a ``sleep`` argument and found in /proc."""
    return f"{uuid.uuid4().int % 10**6 + 10**6}.{uuid.uuid4().int % 10**6:06d}"
