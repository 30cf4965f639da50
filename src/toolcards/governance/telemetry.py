"""OpenTelemetry for governed calls (``opentelemetry-api`` only).

Every governed call is a span ``execute_tool <name>`` with the GenAI attributes pydantic-ai
uses (``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``) plus
``toolcards.principal``, ``toolcards.surface``, ``toolcards.decision``, ``toolcards.outcome``
and ``toolcards.duration_ms``. It starts under the current span, so inside an instrumented
agent run it nests under pydantic-ai's own spans. Denials and approval steps are span events.
Two instruments count calls and time them per tool and outcome:
``toolcards.tool.calls`` and ``toolcards.tool.duration`` (seconds).

Names and labels stay few: a name no registered tool has is recorded as ``unknown_tool`` (the
name the caller sent is in the audit row, redacted), registered tools past the first
:data:`MAX_TOOL_NAMES` as ``other_tool``, outcomes and decisions are fixed words,
and the principal (a configured identity, never a tool argument) and call id are span
attributes only, never metric labels.

Without a configured SDK (the API's default providers) nothing is recorded and a call pays
one check. While nothing in the process has imported the OpenTelemetry API and the environment
names no provider, the providers are known to be the API's defaults without importing it (a
command line call does without it). Argument values go on spans only when the policy's
redaction allows it (``redaction: {span_arguments: true}``), and then redacted.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry import metrics, trace

TRACER_NAME = "toolcards.governance"
RECHECK = 1.0  # seconds between looks at the global providers
CALLS = "toolcards.tool.calls"
DURATION = "toolcards.tool.duration"
UNKNOWN_TOOL = "unknown_tool"
"""The tool name spans and metrics record for a tool that is not registered: the name a
caller sent is its own text (any number of names, secrets too) and stays in the audit row."""
OTHER_TOOL = "other_tool"
"""The tool name spans and metrics record for a registered tool past :data:`MAX_TOOL_NAMES`."""
MAX_TOOL_NAMES = 256
"""How many distinct tool names one :class:`Telemetry` records, first come first kept: a wrapped
MCP server names its own tools (a fresh name per connection would grow the span names and
metric series without end); the name of any call stays in its audit row."""
_MAX_ATTRIBUTE = 128  # a caller's call id is cut to this length on the span


@dataclass(frozen=True, slots=True)
class Instruments:
    """What one call records to: a tracer, a call counter and a latency histogram; ``names``
    the tool names recorded so far (shared by all instruments of one :class:`Telemetry`)."""

    tracer: trace.Tracer
    calls: metrics.Counter
    duration: metrics.Histogram
    names: set[str] = field(default_factory=set)

    def tool(self, tool_id: str | None) -> str:
        """The name to record ``tool_id`` under: itself while it is one of the first
        :data:`MAX_TOOL_NAMES`, else :data:`OTHER_TOOL` (:data:`UNKNOWN_TOOL` for None)."""
        if tool_id is None:
            return UNKNOWN_TOOL
        if tool_id not in self.names:
            if len(self.names) >= MAX_TOOL_NAMES:
                return OTHER_TOOL
            self.names.add(tool_id)
        return tool_id


_API_MODULES = ("opentelemetry.trace", "opentelemetry.metrics")
_PROVIDER_VARIABLES = ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")


def _api_untouched() -> bool:
    """True while no module of this process has imported the API's providers and the
    environment names none: the global providers are then the API's no-ops (setting another
    needs the API imported), known without importing it."""
    return not any(name in sys.modules for name in _API_MODULES) and not any(
        os.environ.get(name) for name in _PROVIDER_VARIABLES
    )


def _is_noop(provider: object) -> bool:
    """A provider of the API itself (a no-op, or the stand-in before an SDK is configured,
    whose meter class is not public) rather than an SDK's: the API defines it."""
    # lazy: opentelemetry, loaded only with a telemetry provider
    from opentelemetry import metrics, trace

    return isinstance(
        provider,
        trace.ProxyTracerProvider | trace.NoOpTracerProvider | metrics.NoOpMeterProvider,
    ) or type(provider).__module__.startswith(_API_MODULES)


class Telemetry:
    """Where governed calls are reported. ``tracer_provider``/``meter_provider`` default to the
    global ones (as pydantic-ai's instrumentation does). ``enabled``: True always records,
    False never, None (default) records when a real (SDK) provider is configured."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        enabled: bool | None = None,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.enabled = enabled
        self._seen: tuple[object, object] | None = None
        self._instruments: Instruments | None = None
        self._recheck = 0.0
        self._names: set[str] = set()

    def active(self) -> Instruments | None:
        """The instruments to record this call to, or None when telemetry is off. The global
        providers are looked up at most every :data:`RECHECK` seconds (the lookup reads the
        environment, which would cost a call more than the rest of governance)."""
        if self.enabled is False:
            return None
        if self._seen is not None and (
            (self.tracer_provider is not None and self.meter_provider is not None)
            or time.monotonic() < self._recheck
        ):
            return self._instruments
        self._recheck = time.monotonic() + RECHECK
        defaults = self.tracer_provider is None and self.meter_provider is None
        if self.enabled is None and defaults and _api_untouched():
            self._instruments, self._seen = None, (None, None)
            return None
        # lazy: opentelemetry, loaded only with a telemetry provider
        from opentelemetry import metrics, trace

        tracers = self.tracer_provider or trace.get_tracer_provider()
        meters = self.meter_provider or metrics.get_meter_provider()
        seen = self._seen
        if seen is not None and seen[0] is tracers and seen[1] is meters:
            return self._instruments
        instruments = None
        if self.enabled or not (_is_noop(tracers) and _is_noop(meters)):
            meter = meters.get_meter(TRACER_NAME)
            instruments = Instruments(
                tracer=tracers.get_tracer(TRACER_NAME),
                calls=meter.create_counter(
                    CALLS, unit="{call}", description="Governed tool calls by tool and outcome"
                ),
                duration=meter.create_histogram(
                    DURATION, unit="s", description="Governed tool call duration"
                ),
                names=self._names,
            )
        self._instruments = instruments
        self._seen = (tracers, meters)
        return instruments


DEFAULT_TELEMETRY = Telemetry()


def start_span(
    instruments: Instruments,
    tool_id: str | None,
    call_id: str | None,
    principal: str,
    surface: str,
) -> tuple[trace.Span, object]:
    """Start the call's span as the current span; returns it and the context token.
    ``tool_id`` is a registered tool's id, None for a name no tool has (recorded as
    :meth:`Instruments.tool` says)."""
    # lazy: opentelemetry, loaded only with a telemetry provider
    from opentelemetry import context, trace

    tool = instruments.tool(tool_id)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "toolcards.principal": principal,
        "toolcards.surface": surface,
    }
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id[:_MAX_ATTRIBUTE]
    span = instruments.tracer.start_span(
        f"execute_tool {tool}", kind=trace.SpanKind.INTERNAL, attributes=attributes
    )
    token = context.attach(trace.set_span_in_context(span))
    return span, token


def end_span(
    span: trace.Span, token: object, error: BaseException | None = None, shown: str = ""
) -> None:
    """End the call's span; ``error`` (the exception that ended the call) is recorded by its
    type and ``shown``, its text as the call's audit row keeps it: never the exception itself,
    whose message and traceback may repeat an argument in clear."""
    # lazy: opentelemetry, loaded only with a telemetry provider
    from opentelemetry import context, trace

    if error is not None:
        kind = type(error).__name__
        span.add_event("exception", {"exception.type": kind, "exception.message": shown})
        span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
    context.detach(token)  # type: ignore[arg-type]
    span.end()


def finish(
    instruments: Instruments,
    span: trace.Span | None,
    tool_id: str | None,
    decision: str,
    outcome: str,
    seconds: float,
) -> None:
    """Record the call's outcome on its span and instruments (``tool_id`` as for
    :func:`start_span`: the metric series are one per recorded tool name and outcome)."""
    if span is not None:
        span.set_attributes(
            {
                "toolcards.decision": decision,
                "toolcards.outcome": outcome,
                "toolcards.duration_ms": seconds * 1000.0,
            }
        )
        if outcome == "error":
            # lazy: opentelemetry, loaded only with a telemetry provider
            from opentelemetry import trace

            span.set_status(trace.Status(trace.StatusCode.ERROR, "the tool failed"))
    tool = instruments.tool(tool_id)
    labels = {"gen_ai.tool.name": tool, "toolcards.outcome": outcome}
    instruments.calls.add(1, labels)
    instruments.duration.record(seconds, labels)


def event(span: trace.Span | None, name: str, **attributes: str) -> None:
    """A span event (``toolcards.denied``, ``toolcards.approval_required``, ...)."""
    if span is not None:
        span.add_event(name, attributes)
