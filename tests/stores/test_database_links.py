"""A SQLite file that lies where agents write (a data config's audit, approvals and store) is
opened with no link followed on its path; the operator's own files are opened through theirs."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.planted import host_approvals_with_a_pending_secret
from toolcards.core.host_files import ROOTS_MARKER
from toolcards.governance import AuditLog, SqliteApprovalStore
from toolcards.stores.errors import StoreError
from toolcards.stores.sqlite import connect
from toolcards.stores.sqlite.team import TeamStore
from toolcards.surfaces.config import load_config
from toolcards.surfaces.config.shared import open_shared

OPENERS: dict[str, Callable[[Path], Any]] = {
    "approvals": lambda path: SqliteApprovalStore(path, "toolcards"),
    "audit": lambda path: AuditLog(path, durability="sync", team_id="toolcards"),
    "audit-read-only": lambda path: AuditLog(path, read_only=True, team_id="toolcards"),
    "store": lambda path: TeamStore(path),
    "store-read-only": lambda path: TeamStore(path, read_only=True),
}


def _host_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _workspace(tmp_path: Path) -> Path:
    """A folder agents write: below a workspaces root (its marker)."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ROOTS_MARKER).write_text("")
    folder = tmp_path / "ws" / "w"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("planted", ["file", "folder"])
def test_a_data_config_opens_no_database_through_a_link_planted_after_it_was_read(
    tmp_path: Path, planted: str
) -> None:
    """Its files were checked at parse and opened later with links followed: an agent planted
    a link (as the approvals file or a folder on its path), and the config's approver listed
    the host's waiting calls (a secret in their arguments) and could grant them."""
    host = host_approvals_with_a_pending_secret(tmp_path / "host")
    before = _host_files(host.parent)
    folder = _workspace(tmp_path)
    (folder / "db").mkdir()
    (folder / "policy.yaml").write_text("default_effect: deny\n")
    (folder / "evil.yaml").write_text(
        "team_id: toolcards\npolicy: policy.yaml\naudit: null\napprovals: db/audit.approvals.db\n"
    )
    config = load_config(folder / "evil.yaml")
    if planted == "file":
        (folder / "db" / "audit.approvals.db").symlink_to(host)
        link = "it is a link"
    else:
        (folder / "db").rmdir()
        (folder / "db").symlink_to(host.parent)
        link = f"{folder / 'db'} on its path is a link"
    with pytest.raises(sqlite3.OperationalError, match=f"^database .* and {link}, which is not"):
        open_shared(config, audit=False)
    assert _host_files(host.parent) == before


@pytest.mark.parametrize("opener", list(OPENERS))
def test_every_opener_refuses_a_database_where_agents_write_through_a_folder_link(
    tmp_path: Path, opener: str
) -> None:
    host = host_approvals_with_a_pending_secret(tmp_path / "host")
    before = _host_files(host.parent)
    folder = _workspace(tmp_path)
    (folder / "db").symlink_to(host.parent)
    with pytest.raises(Exception, match=r"db on its path is a link, which is not followed"):
        OPENERS[opener](folder / "db" / host.name)
    assert _host_files(host.parent) == before


def test_a_link_planted_between_the_check_and_the_open_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name is checked, then SQLite opens it: an agent flipping it to a link in between
    had SQLite open the host's file."""
    host = host_approvals_with_a_pending_secret(tmp_path / "host")
    before = _host_files(host.parent)
    file = _workspace(tmp_path) / "approvals.db"

    def plant(path: str | Path) -> None:  # the agent's flip, right after the check
        file.symlink_to(host)

    monkeypatch.setattr(connect, "_create_private", plant)
    with pytest.raises(sqlite3.OperationalError, match="and it is a link, which is not followed"):
        SqliteApprovalStore(file, "toolcards")
    assert _host_files(host.parent) == before


@pytest.mark.parametrize("opener", list(OPENERS))
def test_the_operators_own_database_is_opened_through_its_links(
    tmp_path: Path, opener: str
) -> None:
    """Outside every workspaces root, a link on a database's path is followed, as before."""
    (tmp_path / "real").mkdir()
    OPENERS[opener.removesuffix("-read-only")](tmp_path / "real" / "x.db").close()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    OPENERS[opener](tmp_path / "link" / "x.db").close()


@pytest.mark.parametrize("where", ["workspace", "host"])
def test_a_lock_file_planted_as_a_link_is_not_written_through(tmp_path: Path, where: str) -> None:
    """A link planted at ``<store>.lock`` had the opener write its pid over the file it named
    (``HOSTDATA`` became ``5936``), a data config's store or the operator's alike."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"HOSTDATA")
    folder = _workspace(tmp_path) if where == "workspace" else tmp_path / "host"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "team.db.lock").symlink_to(victim)
    with pytest.raises(StoreError, match="lock file .* is a link, which is not followed"):
        TeamStore(folder / "team.db")
    assert victim.read_bytes() == b"HOSTDATA"
