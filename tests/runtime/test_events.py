from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from runtime.conftest import TeamMaker
from runtime.stateful_cards import COUNTER, CounterActor
from toolcards.core import ToolStateEvent
from toolcards.core.events import EVENT_PAYLOADS, event_payload
from toolcards.runtime import LIFECYCLE, Team, ToolActor, is_empty_delta
from toolcards.runtime.events import EventLog
from toolcards.runtime.process import open_location


class Pair(ToolActor):
    def put(self, value: Any) -> ToolStateEvent | None:
        return self.emit(value)


def _team_log(tmp_path: Path) -> tuple[Any, EventLog]:
    """A SQLite store holding team ``t``, and the team's event log."""
    store = open_location(str(tmp_path / "team.db"))
    store.open_team("t")
    return store, EventLog(store, "t")


def _tool_events(team: Team, tool_id: str) -> list[ToolStateEvent]:
    return [e for e in team.events() if e.tool_id == tool_id]


def test_emit_returns_the_recorded_event_with_seq_from_one_and_empty_deltas_leave_no_gap(
    make_team: TeamMaker,
) -> None:
    """Empty deltas before the first event and between two record nothing and take no seq."""
    with make_team("emit") as team:
        actor = team.tool_actor("#Pair", Pair)
        assert actor.ask(Pair.put, {"created": [], "deleted": []}) is None  # no event
        assert actor.ask(Pair.put, None) is None
        first = actor.ask(Pair.put, {"set": [1]})
        assert actor.ask(Pair.put, {}) is None
        second = actor.ask(Pair.put, {"set": [2]})
        assert (first.tool_id, first.seq, first.payload) == ("#Pair", 1, {"set": [1]})
        assert second.seq == 2
        assert first.team_id == "emit"
        assert _tool_events(team, "#Pair") == [first, second]
        assert [e.seq for e in _tool_events(team, "#Pair")] == [1, 2]


def test_is_empty_delta_keeps_falsy_scalars() -> None:
    assert is_empty_delta({}) and is_empty_delta([]) and is_empty_delta({"a": None})
    assert not is_empty_delta(0)
    assert not is_empty_delta({"count": 0})


def test_events_replay_in_order_with_gap_free_per_tool_seq(make_team: TeamMaker) -> None:
    with make_team("replay") as team:
        counter = team.tool_actor(COUNTER, CounterActor)
        pair = team.tool_actor("#Pair", Pair)

        def count() -> None:
            for i in range(60):
                counter.ask(CounterActor.add, f"v{i}")

        def pairs() -> None:
            for i in range(40):
                pair.ask(Pair.put, {"v": i})

        threads = [threading.Thread(target=count), threading.Thread(target=pairs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        events = team.events()
        assert [e.seq for e in events if e.tool_id == COUNTER] == list(range(1, 61))
        assert [e.payload["v"] for e in events if e.tool_id == "#Pair"] == list(range(40))
        assert events[2:] == team.events(since=2)


def test_lifecycle_events_share_the_log_and_reach_subscribers_at_stop(
    make_local_team: TeamMaker,
) -> None:
    got: list[ToolStateEvent] = []
    with make_local_team("life") as team:
        team.subscribe(got.append)
        team.tool_actor("#Pair", Pair)
    kinds = [(e.payload["event"], e.payload.get("name")) for e in got]
    assert kinds[0] == ("team_started", None)
    assert ("actor_started", "#Pair") in kinds
    assert ("actor_stopped", "#Pair") in kinds
    assert kinds[-1] == ("team_stopped", None)
    assert {e.tool_id for e in got} == {LIFECYCLE}
    assert [e.seq for e in got] == list(range(1, len(got) + 1))


def test_subscribe_replays_then_delivers_live_events_in_order_or_starts_from_a_position(
    make_team: TeamMaker,
) -> None:
    with make_team("live") as team:
        actor = team.tool_actor("#Pair", Pair)
        actor.ask(Pair.put, {"v": 0})
        got: list[ToolStateEvent] = []
        done = threading.Event()

        def on_event(event: ToolStateEvent) -> None:
            got.append(event)
            if event.tool_id == "#Pair" and event.payload["v"] == 9:
                done.set()

        sub = team.subscribe(on_event, since=0)
        for i in range(1, 10):
            actor.ask(Pair.put, {"v": i})
        assert done.wait(10)
        sub.close()
        assert [e.payload["v"] for e in got if e.tool_id == "#Pair"] == list(range(10))
        assert got == team.events()[: len(got)]

        seen = len(team.events())  # a subscription from a position skips what was seen
        actor.ask(Pair.put, {"v": 10})
        later: list[ToolStateEvent] = []
        arrived = threading.Event()
        sub = team.subscribe(lambda e: (later.append(e), arrived.set()), since=seen)
        assert arrived.wait(10)
        sub.close()
        assert [e.payload for e in later] == [{"v": 10}]


def test_a_failing_subscriber_does_not_stop_delivery(make_team: TeamMaker) -> None:
    with make_team("robust") as team:
        actor = team.tool_actor("#Pair", Pair)
        got: list[int] = []
        done = threading.Event()

        def flaky(event: ToolStateEvent) -> None:
            if event.tool_id != "#Pair":
                return
            got.append(event.seq)
            if event.seq == 1:
                raise RuntimeError("subscriber bug")
            done.set()

        sub = team.subscribe(flaky)
        actor.ask(Pair.put, {"v": 1})
        actor.ask(Pair.put, {"v": 2})
        assert done.wait(10)
        sub.close()
        assert got == [1, 2]


def test_notify_event_records_member_events_with_log_assigned_seq(make_team: TeamMaker) -> None:
    with make_team("notify") as team:
        observer = team.observer_for("erin")
        observer.notify_event({"note": "hello"})
        observer.notify_event(ToolStateEvent(tool_id="#Ext", seq=7, payload={"x": 1}))
        assert [(e.tool_id, e.seq) for e in team.events()[-2:]] == [("erin", 1), ("#Ext", 1)]


@event_payload
class Moved(BaseModel):
    """A payload model: restored to this class when events are read back."""

    item: str
    to: int


class Mover(ToolActor):
    def move(self, item: str, to: int) -> ToolStateEvent | None:
        return self.emit(Moved(item=item, to=to))


def test_registered_payload_models_come_back_as_models(make_team: TeamMaker) -> None:
    with make_team("typed") as team:
        mover = team.tool_actor("#Mover", Mover)
        live = mover.ask(Mover.move, "box", 3)
        assert live is not None and live.payload == Moved(item="box", to=3)
        got: list[ToolStateEvent] = []
        arrived = threading.Event()

        def on_event(event: ToolStateEvent) -> None:
            if event.tool_id == "#Mover":
                got.append(event)
                arrived.set()

        with team.subscribe(on_event):
            assert arrived.wait(10)
        (stored,) = _tool_events(team, "#Mover")
        assert isinstance(stored.payload, Moved) and stored.payload.to == 3
        assert isinstance(got[0].payload, Moved)


def test_an_unknown_payload_tag_reads_back_as_plain_json(make_local_team: TeamMaker) -> None:
    with make_local_team("untyped") as team:
        mover = team.tool_actor("#Mover", Mover)
        mover.ask(Mover.move, "crate", 5)  # stored with its tag
        tag = EVENT_PAYLOADS.tag_of(Moved(item="x", to=1))
        assert tag is not None
        EVENT_PAYLOADS.forget(tag)  # as in a process that never defined Moved
        try:
            (stored,) = _tool_events(team, "#Mover")
            assert stored.payload == {"item": "crate", "to": 5}
        finally:
            EVENT_PAYLOADS.register(Moved)


def test_the_event_committed_just_before_the_close_reaches_a_subscriber_reading_then(
    tmp_path: Path,
) -> None:
    """A stop records ``team_stopped``, then closes the log: a subscriber whose read found
    nothing just before that commit still delivers it (it saw the close and returned)."""
    store, log = _team_log(tmp_path)
    empty_read, go_on = threading.Event(), threading.Event()
    read_events = store.read_events

    def pausing_read(team_id: str, after: int) -> Any:  # the subscriber's empty read waits
        rows = read_events(team_id, after)
        if not rows and threading.current_thread().name == "events-t" and not go_on.is_set():
            empty_read.set()
            go_on.wait(10)
        return rows

    store.read_events = pausing_read  # type: ignore[method-assign]
    got: list[ToolStateEvent] = []
    sub = log.subscribe(got.append)
    assert empty_read.wait(10)
    log.lifecycle("team_stopped")
    log.close()
    go_on.set()
    sub.drain(10)
    assert [e.payload["event"] for e in got] == ["team_stopped"]
    store.close()


PLANTED = ("[" * 50_000 + "]" * 50_000, "{not json", "1" * 5_000)
"""Rows written into the store by hand: nested too deeply, bad text, an integer too long."""


def test_an_unreadable_stored_row_reads_as_a_marker_and_ends_no_subscription(
    tmp_path: Path,
) -> None:
    store, log = _team_log(tmp_path)
    log.lifecycle("team_started")
    for text in PLANTED:
        store.append_event("t", "#Planted", text, None, 0.0)
    log.lifecycle("after")
    expected = [
        {"event": "team_started"},
        *({"event": "unreadable", "seq": n} for n in (1, 2, 3)),
        {"event": "after"},
    ]
    assert [e.payload for e in log.events()] == expected
    assert [e.tool_id for e in log.events()][1:4] == ["#Planted"] * 3
    got: list[ToolStateEvent] = []
    done = threading.Event()

    def on_event(event: ToolStateEvent) -> None:
        got.append(event)
        if event.payload == {"event": "later"}:
            done.set()

    with log.subscribe(on_event) as sub:
        log.lifecycle("later")
        assert done.wait(10)
        assert sub.active and sub.error is None
    assert [e.payload for e in got] == [*expected, {"event": "later"}]
    log.close()
    store.close()
