from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from runtime.conftest import TeamMaker
from runtime.stateful_cards import COUNTER, CounterActor, CounterCard, CounterConfig
from toolcards.core import (
    ActorToolObserver,
    TeamManagementToolObserver,
    ToolFactory,
    ToolObserver,
    ToolObserverGone,
)
from toolcards.runtime import (
    ActorHandle,
    Team,
    TeamObserver,
    TeamStopped,
)
from toolcards.tools._common.team import team_observer


def _tools(factory: ToolFactory) -> dict[str, object]:
    return {t.__name__: t for t in factory.get_tools()}


def test_two_bound_factories_in_one_team_share_one_state(make_team: TeamMaker) -> None:
    with make_team("shared") as team:
        alice = _tools(team.bind([CounterCard()], member="alice"))
        bob = _tools(team.bind([CounterCard()], member="bob"))
        alice["counter_add"]("a")  # type: ignore[operator]
        bob["counter_add"]("b")  # type: ignore[operator]
        assert alice["counter_value"]() == 2  # type: ignore[operator]
        assert bob["counter_value"]() == 2  # type: ignore[operator]
        assert team.actor_names() == [COUNTER]


def test_sixteen_threads_get_or_create_yield_one_actor(make_team: TeamMaker) -> None:
    handles: list[ActorHandle[CounterActor]] = []
    barrier = threading.Barrier(16)
    with make_team("race") as team:

        def bind() -> None:
            barrier.wait()
            handles.append(team.tool_actor(COUNTER, CounterActor, CounterConfig()))

        threads = [threading.Thread(target=bind) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(handles) == 16
        assert len({h.ask(CounterActor.identity) for h in handles}) == 1
        assert team.actor_names() == [COUNTER]


def test_same_config_returns_the_same_actor_and_a_different_one_is_an_error(
    make_team: TeamMaker,
) -> None:
    with make_team("same") as team:
        first = team.tool_actor(COUNTER, CounterActor, CounterConfig(step=2))
        again = team.tool_actor(COUNTER, CounterActor, CounterConfig(step=2))
        found = team.actor(COUNTER)
        assert found is not None
        identity = first.ask(CounterActor.identity)
        assert again.ask(CounterActor.identity) == found.ask(CounterActor.identity) == identity
        with pytest.raises(ValueError, match="already exists"):
            team.tool_actor(COUNTER, CounterActor, CounterConfig(step=5))


def test_tool_actor_names_must_start_with_hash() -> None:
    with Team("names") as team, pytest.raises(ValueError, match="start with '#'"):
        team.tool_actor("Counter", CounterActor)


def test_exception_in_actor_method_reraises_in_caller_and_private_methods_are_unreachable(
    make_team: TeamMaker,
) -> None:
    with make_team("errors") as team:
        handle = team.tool_actor(COUNTER, CounterActor)
        with pytest.raises(KeyError, match="boom"):
            handle.ask(CounterActor.fail, "boom")
        assert handle.ask(CounterActor.value) == 0
        with pytest.raises(ValueError, match="public method"):
            handle.ask(CounterActor._starts_lock)
        with pytest.raises(AttributeError):  # nor through the backend's raw transport
            handle._ask("_starts_lock", (), {}, 5.0)  # type: ignore[attr-defined]


def test_standalone_cards_share_the_implicit_team() -> None:
    first = _tools(ToolFactory([CounterCard()]))
    second = _tools(ToolFactory([CounterCard()]))
    start = second["counter_value"]()  # type: ignore[operator]
    first["counter_add"]("x")  # type: ignore[operator]
    assert second["counter_value"]() == start + 1  # type: ignore[operator]
    implicit = Team.implicit()
    assert team_observer(CounterCard()) is implicit.observer_for("user")
    assert Team.implicit() is implicit  # one per process until it is stopped


def test_card_bound_in_team_resolves_to_that_team() -> None:
    with Team("resolve") as team:
        card = CounterCard()
        team.bind([card], member="carol")
        observer = card.get_observer()
        assert team_observer(card) is observer
        assert isinstance(observer, TeamObserver)
        assert observer.address == "carol"
        assert observer.team_id == "resolve"


def test_weakly_held_observer_gone_raises_observer_gone() -> None:
    with Team("weak") as team:
        card = CounterCard()
        observer = TeamObserver(team, "ephemeral")
        ToolFactory([card], observer=observer)
        del observer
        gc.collect()
        with pytest.raises(ToolObserverGone):
            card.get_observer()
        with pytest.raises(ToolObserverGone):
            team_observer(card)


def test_observer_reaches_team_actors_with_typed_asks(make_team: TeamMaker) -> None:
    with make_team("proxy") as team:
        team.tool_actor(COUNTER, CounterActor).ask(CounterActor.add, "p")
        observer = team.observer_for("dave")
        handle = observer.actor(COUNTER)
        assert handle is not None
        assert handle.within(5.0).ask(CounterActor.value) == 1
        assert observer.actor("#Missing") is None


def test_stopped_team_refuses_new_actors() -> None:
    team = Team("gone")
    team.stop()
    with pytest.raises(TeamStopped):
        team.tool_actor(COUNTER, CounterActor)


def test_card_of_a_stopped_team_does_not_fall_back_to_another_team() -> None:
    team = Team("ended")
    card = CounterCard()
    factory = team.bind([card], member="frank")
    team.stop()
    gc.collect()
    assert factory.cards == [card]
    with pytest.raises(ToolObserverGone):  # the team released its members' observers
        team_observer(card)


def test_stopped_tool_actor_comes_back_with_its_state(make_team: TeamMaker) -> None:
    with make_team("retire") as team:
        team.tool_actor(COUNTER, CounterActor).ask(CounterActor.add, "a")
        assert team.stop_actor(COUNTER)
        assert team.actor(COUNTER) is None
        assert team.tool_actor(COUNTER, CounterActor).ask(CounterActor.value) == 1


def test_team_observer_implements_every_observer_protocol() -> None:
    with Team("protocols") as team:
        observer = team.observer_for("gina")
        assert isinstance(observer, ToolObserver)
        assert isinstance(observer, ActorToolObserver)
        assert isinstance(observer, TeamManagementToolObserver)
        handle = observer.tool_actor(COUNTER, CounterActor)
        assert handle is team.actor(COUNTER)


def test_a_team_opened_read_only_shows_its_store_and_starts_or_writes_nothing(
    tmp_path: Path,
) -> None:
    with Team("seen", store=tmp_path / "team.db") as team:
        _tools(team.bind([CounterCard()]))["counter_add"]("a")  # type: ignore[operator]
    view = Team.open_read_only("seen", tmp_path / "team.db")
    written = view.log.position
    assert view.actor_names() == [COUNTER] and view.state_of(COUNTER).get("total") == 1
    assert view.events(written - 1)[0].payload["event"] == "team_stopped"  # its last own
    with pytest.raises(TeamStopped, match="read-only"):
        view.bind([CounterCard()])
    view.stop()
    again = Team.open_read_only("seen", tmp_path / "team.db")
    try:
        assert again.log.position == written  # neither the opening nor the stop wrote
    finally:
        again.stop()
    with pytest.raises(LookupError, match="no team 'unseen'"):
        Team.open_read_only("unseen", tmp_path / "team.db")
