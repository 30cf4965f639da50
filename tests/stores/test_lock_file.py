"""The SQLite store's lock file: one writing process, and no ``<store>.lock`` left behind by a
clean exit (the CLI's own exit included), without ever letting two processes think they
hold the store."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Any

import pytest

from toolcards.runtime import StoreLockedError, Team
from toolcards.stores.sqlite.file import LockFile
from toolcards.surfaces.main import main


def test_a_clean_exit_of_the_cli_leaves_no_lock_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n")
    config = tmp_path / "toolcards.yaml"
    config.write_text(
        "store: team.db\npolicy: policy.yaml\ncards: [{type: PlanningTool, vector_store: false}]\n"
    )
    monkeypatch.delenv("TOOLCARDS_CONFIG", raising=False)
    with pytest.raises(SystemExit) as ended:
        main(["-c", str(config), "call", "search_planning"])
    assert ended.value.code == 0, capsys.readouterr()
    assert (tmp_path / "team.db").exists() and not (tmp_path / "team.db.lock").exists()


def test_the_lock_holds_while_open_and_is_gone_after_a_stop(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "team.db"):
        assert (tmp_path / "team.db.lock").exists()
        with pytest.raises(StoreLockedError, match="open for writing by another process"):
            LockFile(tmp_path / "team.db.lock").acquire(tmp_path / "team.db")
    assert not (tmp_path / "team.db.lock").exists()


def test_a_lock_won_on_a_file_removed_meanwhile_is_taken_again_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder releases (removes the file, then unlocks) between another process's open
    and its flock: that process gets the lock of the removed file, which must not count, or a
    third process would lock a new file at the same path and two would write the store."""
    path, store = tmp_path / "team.db.lock", tmp_path / "team.db"
    holder = LockFile(path)
    holder.acquire(store)
    real_flock = fcntl.flock
    released: list[bool] = []

    def flock_after_the_release(fd: Any, operation: int) -> None:
        if not released:
            released.append(True)
            holder.release()  # the holder's clean exit, between our open and our flock
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_the_release)
    second = LockFile(path)
    second.acquire(store)
    monkeypatch.setattr(fcntl, "flock", real_flock)
    with pytest.raises(StoreLockedError):
        LockFile(path).acquire(store)  # the path's file is locked: by the second
    second.release()
    assert not path.exists()
