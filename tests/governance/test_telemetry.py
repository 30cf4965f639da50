"""OpenTelemetry: a span per governed call (GenAI attributes), events for denials and
approvals, counters and a latency histogram, arguments only when the policy allows."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.launch import PYTHON
from toolcards.core.spec import annotate
from toolcards.governance import (
    AuditLog,
    CapabilityRegistry,
    Executor,
    Identity,
    Outcome,
    Policy,
    Telemetry,
)
from toolcards.governance.approvals.grants import Remember
from toolcards.governance.telemetry import MAX_TOOL_NAMES

pytestmark = pytest.mark.anyio
ALICE = Identity("alice", roles=["admin"])
RITA = Identity("rita", roles=["approver"])


@dataclass
class Otel:
    tracer_provider: TracerProvider
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    @property
    def telemetry(self) -> Telemetry:
        meters = MeterProvider(metric_readers=[self.metrics])
        return Telemetry(self.tracer_provider, meters)

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def ours(self) -> list[ReadableSpan]:
        return [s for s in self.finished() if "toolcards.outcome" in (s.attributes or {})]


@pytest.fixture
def otel() -> Iterator[Otel]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield Otel(provider, spans, InMemoryMetricReader())
    provider.shutdown()


async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def login(user: str, password: str) -> str:
    """Log in."""
    return "ok"


def wire(amount: float) -> str:
    """Needs a human."""
    return "wired"


annotate(wire, requires_approval=True)


def _executor(otel: Otel, policy: Policy | None = None) -> Executor:
    registry = CapabilityRegistry.from_tools([add, login, wire])
    return Executor(registry, policy or Policy.allow_all(), telemetry=otel.telemetry)


async def test_each_call_is_one_execute_tool_span_with_genai_attributes(otel: Otel) -> None:
    executor = _executor(otel)
    await executor.call("add", {"a": 1, "b": 2}, ALICE, surface="mcp", call_id="call-7")
    (span,) = otel.ours()
    attrs = dict(span.attributes or {})
    assert span.name == "execute_tool add"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "add" and attrs["gen_ai.tool.call.id"] == "call-7"
    assert attrs["toolcards.principal"] == "alice" and attrs["toolcards.surface"] == "mcp"
    assert (attrs["toolcards.decision"], attrs["toolcards.outcome"]) == ("allow", "ok")
    assert isinstance(attrs["toolcards.duration_ms"], float)


async def test_a_denial_is_a_span_event(otel: Otel) -> None:
    policy = Policy.from_dict(
        {
            "rules": [
                {
                    "description": "small sums only",
                    "targets": ["add"],
                    "effect": "allow",
                    "conditions": {"arguments": {"a": {"max": 10}}},
                }
            ]
        }
    )
    result = await _executor(otel, policy).call("add", {"a": 99, "b": 1}, ALICE)
    assert result.outcome is Outcome.DENIED
    (span,) = otel.ours()
    assert dict(span.attributes or {})["toolcards.outcome"] == "denied"
    assert [e.name for e in span.events] == ["toolcards.denied"]


async def test_approval_steps_are_span_events(otel: Otel) -> None:
    executor = _executor(otel)
    pending = await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")
    assert pending.approval is not None
    executor.approvals.grant(pending.approval, approver=RITA)
    await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")
    asked, ran = otel.ours()
    assert [e.name for e in asked.events] == ["toolcards.approval_required"]
    assert [e.name for e in ran.events] == ["toolcards.approved"]
    event = asked.events[0]
    assert (event.attributes or {})["approval_id"] == pending.approval.approval_id


async def test_a_call_a_grant_lets_run_names_the_grant_on_its_span(otel: Otel) -> None:
    executor = _executor(otel)
    pending = await executor.call("wire", {"amount": 5}, ALICE)
    assert pending.approval is not None
    grant = executor.approvals.remember(pending.approval, approver=RITA, remember=Remember(60))
    ran = await executor.call("wire", {"amount": 5}, ALICE)
    assert ran.outcome is Outcome.OK and ran.grant_id == grant.grant_id
    span = otel.ours()[-1]
    assert [e.name for e in span.events] == ["toolcards.approved"]
    assert dict(span.events[0].attributes or {}) == {"grant_id": grant.grant_id}


async def test_the_span_nests_under_the_current_span_and_holds_the_tools_own(
    otel: Otel,
) -> None:
    tracer = otel.tracer_provider.get_tracer("test")

    async def traced(n: int) -> int:
        """Makes a span of its own."""
        with tracer.start_as_current_span("inside the tool"):
            return n

    executor = Executor(
        CapabilityRegistry.from_tools([traced]), Policy.allow_all(), telemetry=otel.telemetry
    )
    with tracer.start_as_current_span("caller") as caller:
        await executor.call("traced", {"n": 1}, ALICE)
    spans = {s.name: s for s in otel.finished()}
    governed, inside = spans["execute_tool traced"], spans["inside the tool"]
    assert governed.parent is not None
    assert governed.parent.span_id == caller.get_span_context().span_id
    assert inside.parent is not None and inside.parent.span_id == governed.context.span_id


async def test_arguments_stay_off_spans_by_default(otel: Otel) -> None:
    await _executor(otel).call("login", {"user": "bob", "password": "hunter2"}, ALICE)
    (span,) = otel.ours()
    assert "gen_ai.tool.call.arguments" not in (span.attributes or {})
    assert "hunter2" not in json.dumps(dict(span.attributes or {}))


async def test_the_policy_can_allow_redacted_arguments_on_spans(otel: Otel) -> None:
    policy = Policy.from_yaml("default_effect: allow\nredaction: {span_arguments: true}\n")
    await _executor(otel, policy).call("login", {"user": "bob", "password": "hunter2"}, ALICE)
    (span,) = otel.ours()
    args = json.loads(str((span.attributes or {})["gen_ai.tool.call.arguments"]))
    assert args == {"user": "bob", "password": "[REDACTED]"}


async def test_arguments_on_spans_are_cut_to_a_bound(otel: Otel) -> None:
    """The attribute held the whole redacted JSON: 100,000 items made a 10 MB attribute."""

    def note(items: list[str], api_key: str) -> int:
        """Store notes."""
        return len(items)

    policy = Policy.from_yaml("default_effect: allow\nredaction: {span_arguments: true}\n")
    executor = Executor(CapabilityRegistry.from_tools([note]), policy, telemetry=otel.telemetry)
    await executor.call("note", {"items": ["x" * 100] * 1_000, "api_key": "hunter2"}, ALICE)
    (span,) = otel.ours()
    shown = str((span.attributes or {})["gen_ai.tool.call.arguments"])
    assert len(shown) == 8_192 and shown.endswith("...[truncated]")
    assert shown.startswith('{"api_key":"[REDACTED]","items":["' + "x" * 100)


async def test_a_failure_outside_the_tool_reaches_its_span_redacted(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The span recorded the exception itself: its message and traceback repeated the
    password the audit row and the log hide."""
    secret = "hunter2-S3cret-4242"

    def evaluate(*args: Any) -> Any:
        raise KeyError(f"no rule for {secret}")

    monkeypatch.setattr(Policy, "evaluate", evaluate)
    with pytest.raises(KeyError):
        await _executor(otel).call("login", {"user": "bob", "password": secret}, ALICE)
    (span,) = otel.ours()
    (event,) = [e for e in span.events if e.name == "exception"]
    assert dict(event.attributes or {}) == {
        "exception.type": "KeyError",
        "exception.message": "KeyError: 'no rule for [REDACTED]'",
    }
    assert secret not in repr([dict(e.attributes or {}) for e in span.events])


async def test_unknown_tools_are_spans_with_their_own_outcome(otel: Otel) -> None:
    await _executor(otel).call("nope", {}, ALICE)
    (span,) = otel.ours()
    assert span.name == "execute_tool unknown_tool"
    attrs = dict(span.attributes or {})
    assert (attrs["gen_ai.tool.name"], attrs["toolcards.outcome"]) == ("unknown_tool",) * 2


def _series(otel: Otel) -> set[tuple[str, tuple[tuple[str, Any], ...]]]:
    """Every metric series recorded so far: (instrument, sorted labels)."""
    data = otel.metrics.get_metrics_data()
    assert data is not None
    return {
        (metric.name, tuple(sorted((point.attributes or {}).items())))
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
    }


async def test_made_up_tool_names_make_one_span_name_and_bounded_series(otel: Otel) -> None:
    executor = _executor(otel)
    for n in range(300):
        await executor.call(f"made_up_{n}", {}, ALICE)
    await executor.call("add", {"a": 1, "b": 2}, ALICE)
    assert {s.name for s in otel.ours()} == {"execute_tool unknown_tool", "execute_tool add"}
    assert {dict(labels)["gen_ai.tool.name"] for _, labels in _series(otel)} == {
        "unknown_tool",
        "add",
    }
    assert len(_series(otel)) == 4  # two instruments, two (tool, outcome) pairs


async def test_a_secret_shaped_tool_name_never_reaches_spans_or_metrics(
    otel: Otel, tmp_path: Path
) -> None:
    secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = _executor(otel)
        executor.audit = audit
        result = await executor.call(secret, {}, ALICE, call_id="c-9")
        (row,) = audit.tail(1)
    spans = [(s.name, dict(s.attributes or {}), [e.name for e in s.events]) for s in otel.ours()]
    assert result.outcome is Outcome.UNKNOWN_TOOL
    assert secret not in repr(spans) and secret not in repr(_series(otel))
    assert (row.tool, row.call_id) == ("[REDACTED]", "c-9")


async def test_a_hidden_tool_through_the_toolset_path_is_recorded_as_unknown(otel: Otel) -> None:
    executor = _executor(otel)
    executor.unknown("zz-" + "x" * 5000, {}, ALICE, surface="mcp", call_id=None, visible=[])
    (span,) = otel.ours()
    assert span.name == "execute_tool unknown_tool"
    assert {dict(labels)["gen_ai.tool.name"] for _, labels in _series(otel)} == {"unknown_tool"}


def _named(name: str) -> Any:
    def tool() -> str:
        """A tool a remote server named."""
        return "ok"

    tool.__name__ = name
    return tool


async def test_registered_tool_names_past_the_cap_are_recorded_as_other_tool(
    otel: Otel,
) -> None:
    # a wrapped MCP server names its tools: a fresh name per connection is a fresh registered tool
    names = [f"t_{n:04x}" for n in range(MAX_TOOL_NAMES + 40)]
    registry = CapabilityRegistry.from_tools([_named(name) for name in names])
    executor = Executor(registry, Policy.allow_all(), telemetry=otel.telemetry)
    for name in names:
        assert (await executor.call(name, {}, ALICE)).outcome is Outcome.OK
    span_names = {s.name for s in otel.ours()}
    labels = {dict(labels)["gen_ai.tool.name"] for _, labels in _series(otel)}
    assert len(span_names) == len(labels) == MAX_TOOL_NAMES + 1
    assert labels == {*names[:MAX_TOOL_NAMES], "other_tool"}
    assert "execute_tool other_tool" in span_names
    assert len(_series(otel)) == 2 * (MAX_TOOL_NAMES + 1)


async def test_metric_labels_are_the_tool_and_the_outcome_only(otel: Otel) -> None:
    executor = _executor(otel)
    for who in ("alice", "bob", "carol"):
        await executor.call("add", {"a": 1, "b": 2}, Identity(who), call_id=f"id-{who}")
    assert {tuple(k for k, _ in labels) for _, labels in _series(otel)} == {
        ("gen_ai.tool.name", "toolcards.outcome")
    }


async def test_calls_are_counted_and_timed_per_tool_and_outcome(otel: Otel) -> None:
    executor = _executor(otel)
    for _ in range(3):
        await executor.call("add", {"a": 1, "b": 2}, ALICE)
    await executor.call("add", {"a": "x", "b": 2}, ALICE)
    data = otel.metrics.get_metrics_data()
    assert data is not None
    points: dict[str, dict[tuple[Any, ...], Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (
                        point.attributes["gen_ai.tool.name"],
                        point.attributes["toolcards.outcome"],
                    )
                    points.setdefault(metric.name, {})[key] = point
    calls = points["toolcards.tool.calls"]
    assert calls[("add", "ok")].value == 3 and calls[("add", "invalid_args")].value == 1
    assert points["toolcards.tool.duration"][("add", "ok")].count == 3


def test_without_an_sdk_telemetry_is_off() -> None:
    assert Telemetry().active() is None
    assert Telemetry(enabled=False).active() is None


AGENT_RUN = textwrap.dedent(
    """
    import json
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset
    from toolcards.governance import GovernedToolset, Identity, Policy

    inner = FunctionToolset()

    @inner.tool_plain
    def add(a: int, b: int) -> int:
        "Add."
        return a + b

    def model(messages, info):
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2}, tool_call_id="c-1")])
        return ModelResponse(parts=[TextPart("done")])

    governed = GovernedToolset(inner, policy=Policy.allow_all(), identity=Identity("alice"))
    agent = Agent(FunctionModel(model), toolsets=[governed])
    agent.instrument = True
    agent.run_sync("go")
    print(json.dumps([
        {"name": s.name, "id": s.context.span_id, "parent": s.parent.span_id if s.parent else None,
         "attributes": {k: v for k, v in (s.attributes or {}).items() if isinstance(v, str)}}
        for s in exporter.get_finished_spans()
    ]))
    """
)


@pytest.mark.timeout(120)
def test_in_an_instrumented_agent_run_the_span_nests_under_the_agent_span() -> None:
    done = subprocess.run([PYTHON, "-c", AGENT_RUN], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    spans = json.loads(done.stdout.strip().splitlines()[-1])
    by_id = {s["id"]: s for s in spans}
    (ours,) = [s for s in spans if "toolcards.outcome" in s["attributes"]]
    assert ours["name"] == "execute_tool add"
    assert ours["attributes"]["gen_ai.tool.call.id"] == "c-1"
    ancestors = []
    parent = ours["parent"]
    while parent is not None:
        ancestors.append(by_id[parent]["name"])
        parent = by_id[parent]["parent"]
    assert ancestors[0] == "execute_tool add"  # pydantic-ai's own tool span
    assert ancestors[-1].startswith("invoke_agent")
