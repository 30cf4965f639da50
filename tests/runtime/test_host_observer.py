"""A host observer (``ToolFactory(cards, observer=host)``, not a team member) hears the events
its cards' calls cause, through ``notify_event``, typed as the log keeps them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from toolcards import KnowledgeGraphTool, PlanningTool, ToolFactory, ToolStateEvent
from toolcards.runtime import Team
from toolcards.tools.knowledge_graph.models import GraphDelta
from toolcards.tools.planning.models import PlanningDelta


class Host:
    """An agent-like owner that only implements ``notify_event``."""

    def __init__(self) -> None:
        self.events: list[ToolStateEvent] = []
        self.threads: list[str] = []

    def notify_event(self, event: ToolStateEvent) -> None:
        self.events.append(event)
        self.threads.append(threading.current_thread().name)


class RaisingHost(Host):
    def notify_event(self, event: ToolStateEvent) -> None:
        super().notify_event(event)
        raise RuntimeError("observer broke")


def _tools(host: object, *cards: Any) -> dict[str, Any]:
    return {fn.__name__: fn for fn in ToolFactory(list(cards), observer=host).get_tools()}


def _add_task(host: object, description: str) -> str:
    plan = _tools(host, PlanningTool(vector_store=False))
    result: str = plan["update_planning"](create=[{"description": description}])
    return result


def _in_log(event_id: str) -> ToolStateEvent:
    (found,) = [e for e in Team.implicit().events() if e.id == event_id]
    return found


def test_a_host_observer_hears_the_planning_event_of_its_call_typed() -> None:
    host = Host()
    _add_task(host, "host hears planning")
    (event,) = host.events
    assert event.tool_id == "#PlanningTool"
    assert isinstance(event.payload, PlanningDelta)
    assert event.payload.created[0].description == "host hears planning"
    assert event == _in_log(event.id)


def test_a_host_observer_hears_the_graph_event_of_its_call_typed() -> None:
    host = Host()
    graph = _tools(host, KnowledgeGraphTool(vector_store=False))
    graph["update_graph"](
        create_entities=[{"name": "host-node", "entity_type": "t", "description": "d"}]
    )
    (event,) = host.events
    assert isinstance(event.payload, GraphDelta)
    assert event.payload.entities_added[0].name == "host-node"
    assert event == _in_log(event.id)


def test_the_event_arrives_on_the_actor_thread_before_the_tool_returns() -> None:
    host = Host()
    _add_task(host, "thread of delivery")
    assert len(host.events) == 1  # already there when the call returned: no wait
    assert host.threads[0] != threading.current_thread().name


def test_a_raising_observer_does_not_break_the_tool_call(caplog: pytest.LogCaptureFixture) -> None:
    host = RaisingHost()
    assert "created ids" in _add_task(host, "observer raises")
    (event,) = host.events
    assert _in_log(event.id).payload == event.payload  # recorded all the same
    assert "observer broke" in caplog.text


def test_a_host_observer_hears_only_the_calls_of_its_own_cards() -> None:
    mine, other = Host(), Host()
    _tools(other, PlanningTool(vector_store=False))  # bound, but never called
    _add_task(mine, "only mine")
    assert len(mine.events) == 1
    assert other.events == []
