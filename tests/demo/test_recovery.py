"""The main job never keeps a half-made team: a failed first run leaves nothing, the remains of
one are cleared with a note, and a model that cannot run is refused before anything is made."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from toolcards.demo import team_job
from toolcards.demo.state import MARKER, STORE, DemoError, clear, has_leftovers
from toolcards.demo.team_job import ENGINEER, LEAD, TEAM_ID, run_job
from toolcards.runtime import ModelUnavailable, RoleProfile, Team


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "workspaces"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path / "state"


def test_a_model_without_its_key_is_refused_before_the_state_exists(state: Path) -> None:
    with pytest.raises(ModelUnavailable, match="OPENAI_API_KEY"):
        run_job(state, model="openai:gpt-4o")
    assert not state.exists()


def test_a_failing_first_run_leaves_no_team_behind(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("the model went away")

    monkeypatch.setattr(team_job, "_talk", broken)
    with pytest.raises(RuntimeError, match="went away"):
        run_job(state)
    assert not has_leftovers(state)
    monkeypatch.undo()
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(state.parent / "workspaces"))
    summary = run_job(state)
    assert not summary["resumed"] and summary["notes"] == []
    assert {LEAD, ENGINEER} <= set(summary["members"])


def test_remains_of_an_interrupted_run_are_cleared_with_a_note(state: Path) -> None:
    state.mkdir()
    with Team(TEAM_ID, state / STORE) as team:  # a team recorded, nobody hired, no marker
        team.events()
    summary = run_job(state)
    assert not summary["resumed"]
    assert "was incomplete" in summary["notes"][0]
    assert summary["members"] == [LEAD, ENGINEER]


def test_a_stored_team_without_its_members_starts_over(state: Path) -> None:
    state.mkdir()
    with Team(TEAM_ID, state / STORE) as team:
        team.events()
    (state / MARKER).write_text("{}")  # claims to be complete
    summary = run_job(state)
    assert "its team has no members" in summary["notes"][0]
    assert summary["members"] == [LEAD, ENGINEER]
    assert run_job(state)["resumed"]


def test_clear_removes_only_the_jobs_files(tmp_path: Path) -> None:
    (tmp_path / STORE).write_text("x")
    (tmp_path / "workspaces" / TEAM_ID).mkdir(parents=True)
    (tmp_path / "mine.txt").write_text("keep me")
    clear(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_clear_refuses_while_another_holder_has_the_store(tmp_path: Path) -> None:
    with (
        Team(TEAM_ID, tmp_path / STORE),
        pytest.raises(DemoError, match="in use by another process"),
    ):
        clear(tmp_path)
    assert (tmp_path / STORE).exists()


def test_hiring_with_a_model_that_cannot_run_records_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    profile = RoleProfile(role="writer", model="anthropic:claude-sonnet-4-5")
    with Team("hire-check", ":memory:", profiles=[profile]) as team:
        with pytest.raises(ModelUnavailable, match="ANTHROPIC_API_KEY"):
            team.hire("writer")
        assert team.members() == []
        assert team.state_of("~members").get("counter:writer") is None


def test_a_profile_model_without_a_provider_is_refused_with_an_example() -> None:
    with pytest.raises(ValueError, match=r"'gpt-4o' is not a pydantic-ai model spec.*openai:"):
        RoleProfile(role="writer", model="gpt-4o")


def test_an_unknown_provider_says_what_a_spec_looks_like() -> None:
    from toolcards.runtime import check_model

    with pytest.raises(ModelUnavailable, match=r"unknown model 'nosuch:model'.*openai:gpt-4o"):
        check_model("nosuch:model")


def test_a_resumed_run_does_not_report_an_old_reminder_again(state: Path) -> None:
    said = [dict(run_job(state)["log"]) for _ in range(3)]
    reminder = "#NotificationTool -> @lead-1"
    assert reminder in said[0] or reminder in said[1]  # delivered once, in run 1 or 2
    assert reminder not in said[2]


def test_a_corrupt_store_is_one_line_naming_the_fix(state: Path) -> None:
    run_job(state)
    (state / STORE).write_bytes(b"garbage" * 1000)
    for suffix in ("-wal", "-shm"):
        (state / f"{STORE}{suffix}").unlink(missing_ok=True)
    with pytest.raises(DemoError, match=r"not a toolcards store.*--fresh") as caught:
        run_job(state)
    assert "\n" not in str(caught.value)
    assert not isinstance(caught.value.__cause__, sqlite3.Error)  # raised from None


def test_a_key_removed_after_a_successful_check_is_noticed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolcards.runtime import check_model

    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-sent-anywhere")
    check_model("openai:gpt-4o")  # builds the provider client, sends nothing
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ModelUnavailable, match="OPENAI_API_KEY"):
        check_model("openai:gpt-4o")
