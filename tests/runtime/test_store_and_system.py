from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from runtime.stateful_cards import COUNTER, CounterActor
from toolcards.runtime import (
    ActorSystem,
    ActorUnavailable,
    PykkaActorSystem,
    StateNamespace,
    Team,
    TeamStore,
    ToolActor,
)


class Doc(BaseModel):
    title: str
    tags: list[str]


class Ledger(ToolActor):
    def write_then_fail(self, key: str) -> None:
        with self.state.batch():
            self.state.put(key, 1)
            self.emit({"wrote": [key]})
            raise RuntimeError("half-way")

    def write(self, key: str) -> int:
        with self.state.batch():
            self.state.put(key, 1)
            event = self.emit({"wrote": [key]})
        assert event is not None
        return event.seq


def _state(tmp_path: Path | None = None) -> tuple[TeamStore, StateNamespace]:
    store = TeamStore(":memory:" if tmp_path is None else tmp_path / "s.db")
    return store, StateNamespace(store, "t", "#A")


def test_state_round_trips_json_values_and_models() -> None:
    store, state = _state()
    state.put("doc", Doc(title="x", tags=["a"]))
    state.put("n", 3)
    assert state.get("doc") == {"title": "x", "tags": ["a"]}
    assert state.get("n") == 3
    assert state.get("missing") is None
    state.delete("n")
    state.delete("n")
    assert state.get("n") is None
    store.close()


def test_state_items_filter_by_prefix_in_key_order() -> None:
    store, state = _state()
    for key in ("task:2", "task:1", "other", "task:10"):
        state.put(key, key)
    assert [k for k, _ in state.items("task:")] == ["task:1", "task:10", "task:2"]
    assert len(list(state.items())) == 4
    store.close()


def test_state_namespaces_of_two_actors_are_separate() -> None:
    store, state = _state()
    other = StateNamespace(store, "t", "#B")
    state.put("k", "a")
    other.put("k", "b")
    assert (state.get("k"), other.get("k")) == ("a", "b")
    store.close()


def test_failed_batch_leaves_neither_state_nor_event_nor_seq_gap() -> None:
    with Team("rollback") as team:
        ledger = team.tool_actor("#Ledger", Ledger)
        with pytest.raises(RuntimeError, match="half-way"):
            ledger.ask(Ledger.write_then_fail, "lost")
        assert team.state_of("#Ledger").get("lost") is None
        assert [e for e in team.events() if e.tool_id == "#Ledger"] == []
        assert ledger.ask(Ledger.write, "kept") == 1


def test_store_survives_reopen_and_keeps_schema(tmp_path: Path) -> None:
    store, state = _state(tmp_path)
    state.put("k", [1, 2])
    store.close()
    store, state = _state(tmp_path)
    assert state.get("k") == [1, 2]
    store.close()


def test_two_teams_of_one_process_share_a_store_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with Team("a", store=path) as a, Team("b", store=path) as b:
        a.tool_actor(COUNTER, CounterActor).ask(CounterActor.add, "x")
        assert b.tool_actor(COUNTER, CounterActor).ask(CounterActor.value) == 0
        with pytest.raises(ValueError, match="already running"):
            Team("a", store=path)


def test_team_keeps_member_profiles_and_policy_for_members() -> None:
    policy = object()
    profile = {"role": "researcher", "model": "test"}
    with Team("members", profiles=[profile], policy=policy) as team:
        assert [p.role for p in team.profiles] == ["researcher"]
        assert team.policy is policy


class Slow(ToolActor):
    gate = threading.Event()

    def wait(self) -> None:
        self.gate.wait(30)


def test_ask_without_answer_in_time_raises_timeout_error() -> None:
    with Team("slow") as team:
        slow = team.tool_actor("#Slow", Slow)
        try:
            with pytest.raises(TimeoutError, match="#Slow.wait"):
                slow.within(0.05).ask(Slow.wait)
        finally:
            Slow.gate.set()


def test_ask_to_a_stopped_actor_raises_actor_unavailable() -> None:
    team = Team("dead")
    handle = team.tool_actor(COUNTER, CounterActor)
    team.stop()
    with pytest.raises(ActorUnavailable):
        handle.ask(CounterActor.value)


class BrokenStart(ToolActor):
    def on_start(self) -> None:
        raise OSError("cannot load state")


def test_failure_in_on_start_is_raised_to_the_creator() -> None:
    with Team("broken") as team:
        with pytest.raises(OSError, match="cannot load state"):
            team.tool_actor("#Broken", BrokenStart)
        assert team.actor("#Broken") is None


class Plain:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def note(self, value: Any) -> int:
        self.seen.append(value)
        return len(self.seen)


def test_pykka_system_implements_the_actor_system_interface() -> None:
    system = PykkaActorSystem()
    assert isinstance(system, ActorSystem)
    handle = system.spawn("plain", Plain)
    assert system.lookup("plain") is handle
    assert handle.ask(Plain.note, "a") == 1
    handle.tell(Plain.note, "b")
    assert handle.within(5.0).ask(Plain.note, "c") == 3
    with pytest.raises(ValueError, match="already running"):
        system.spawn("plain", Plain)
    assert system.stop(["plain"], timeout=5) == []
    assert system.lookup("plain") is None
    with pytest.raises(ActorUnavailable):
        handle.ask(Plain.note, "d")


def test_one_in_process_actor_system_serves_one_team_at_a_time(tmp_path: Path) -> None:
    # tool actors are found by name: team b's planning found team a's #PlanningTool and read
    # and wrote team a's board, in team a's rows
    from toolcards import PlanningTool

    system = PykkaActorSystem()
    store = tmp_path / "shared.db"
    a = Team("team-a", store, system=system)
    tools = {f.__name__: f for f in a.bind([PlanningTool(vector_store=False)]).get_tools()}
    tools["update_planning"](create=[{"description": "team a only"}])
    with pytest.raises(ValueError, match="serves team 'team-a'"):
        Team("team-b", store, system=system)
    a.stop(timeout=5)
    with pytest.raises(ValueError, match="serves team 'team-a'"):  # its actors live on in it
        Team("team-b", store, system=system)
    with Team("team-a", store, system=system) as again:  # the same team resumes on it
        board = {f.__name__: f for f in again.bind([PlanningTool(vector_store=False)]).get_tools()}
        assert "team a only" in board["search_planning"]()
    system.shutdown()


class Exiting(ToolActor):
    def leave(self) -> None:
        raise SystemExit(3)


def test_system_exit_in_one_actor_leaves_the_others_running() -> None:
    with Team("exit") as team:
        counter = team.tool_actor(COUNTER, CounterActor)
        exiting = team.tool_actor("#Exiting", Exiting)
        with pytest.raises(RuntimeError, match="SystemExit"):
            exiting.ask(Exiting.leave)
        assert counter.ask(CounterActor.add, "still") == 1
        assert exiting.is_alive()
