"""The SQLite files that hold audit rows, approval requests and recorded call results are
created private to their user (0600), with their -wal and -shm files, whatever the umask: a
pending call's arguments may hold a password."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.identity import Identity
from toolcards.governance import AuditLog, AuditRecord, SqliteApprovalStore
from toolcards.stores.call_results import SqliteCallResults


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that lets everyone read new files (the common 022)."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _modes(folder: Path, stem: str) -> dict[str, int]:
    return {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir() if p.name.startswith(stem)
    }


@pytest.mark.parametrize("durability", ["sync", "batched"])
def test_an_audit_file_and_its_wal_are_private(
    tmp_path: Path, open_umask: None, durability: str
) -> None:
    with AuditLog(tmp_path / "audit.db", durability=durability) as audit:  # type: ignore[arg-type]
        audit.record(
            AuditRecord(time.time(), "alice", "user", (), "cli", "login", "c1",
                        {"password": "hunter2"}, decision="allow", outcome="ok")
        )  # fmt: skip
        audit.flush()
        modes = _modes(tmp_path, "audit.db")
    assert {"audit.db", "audit.db-wal", "audit.db-shm"} <= set(modes)
    assert set(modes.values()) == {0o600}


def test_an_approvals_file_holding_a_pending_password_is_private(
    tmp_path: Path, open_umask: None
) -> None:
    store = SqliteApprovalStore(tmp_path / "approvals.db", "crm")
    try:
        store.add(
            ApprovalRequest(
                call_id="c1", tool_id="login", args_digest="d", principal="alice",
                args={"password": "hunter2"}, reason="needs a human", expires_at=time.time() + 60,
                surface="cli", identity=Identity("alice"), created_at=time.time(),
            ),
            time.time(),
        )  # fmt: skip
        modes = _modes(tmp_path, "approvals.db")
    finally:
        store.close()
    assert {"approvals.db", "approvals.db-wal", "approvals.db-shm"} <= set(modes)
    assert set(modes.values()) == {0o600}


def test_a_call_results_file_is_private(tmp_path: Path, open_umask: None) -> None:
    results = SqliteCallResults(tmp_path / "calls.db")
    try:
        results.claim("k", "login", "d", "alice", "c1")
        modes = _modes(tmp_path, "calls.db")
    finally:
        results.close()
    assert set(modes) >= {"calls.db"} and set(modes.values()) == {0o600}


def test_an_existing_files_mode_is_left_as_its_owner_set_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    path.touch(mode=0o640)
    os.chmod(path, 0o640)
    with AuditLog(path, durability="sync"):
        pass
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
