"""What an MCP server asks of this client while its tool runs, governed like a call.

A server may ask the client for input (elicitation), for a model completion (sampling) and
for its roots. Each request is a call of a pseudo-tool, ``mcp.<server>.elicit``,
``mcp.<server>.sample`` or ``mcp.<server>.roots``, made by the principal whose tool call the
server is serving: through the same executor, so the policy may deny it and it has one audit
row. What the card allows comes first: a kind the card refuses is answered at once (a
decline, an error, no roots) and audited as denied.

A request belongs to the tool call in whose context it arrives (MCP 2026-07-28: the input
requests of an ``InputRequiredResult``), else to the one call in flight on the server (the
handshake-era revisions, whose server-initiated requests name no call). With no governed
call in flight, or several, nobody can answer for it: it is refused.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolcards.core.errors import ToolcardsError
from toolcards.core.spec import ToolAnnotations
from toolcards.governance.audit.log import AuditRecord, made_by
from toolcards.governance.capability import ToolCapability
from toolcards.governance.executor.runner import GoverningCall, governing_call
from toolcards.tools.mcp.settings import MCPSampling

log = logging.getLogger("toolcards.mcp")

Kind = Literal["elicit", "sample", "roots"]
_DESCRIPTIONS = {
    "elicit": "An MCP server's question to the team's human (elicitation).",
    "sample": "An MCP server's request for a completion by the agent's model (sampling).",
    "roots": "An MCP server's request for the client's roots (the card's workspace).",
}


class Refused(ToolcardsError):
    """A server request that is not answered; the message is what the server is told."""


@dataclass(slots=True, eq=False)  # one call each: told apart by identity
class Frame:
    """One tool call in flight on the server: who governs it, and the agent's model (None
    outside an agent run)."""

    governing: GoverningCall | None
    model: Any
    tool: str
    asked: int = 0
    """Requests the server made during this call so far."""


MAX_PER_CALL = 32
"""Requests (of every kind) a server may make during one tool call: past it each is refused
at once and only the first refused is audited (3,000 made 3,000 rows)."""


@dataclass(slots=True)
class RequestRules:
    """What the card allows a server to ask (see the ``MCPTool`` fields of the same names)."""

    elicitation: Literal["refuse", "inbox"] = "refuse"
    elicitation_timeout: float = 300.0
    sampling: MCPSampling = field(default_factory=MCPSampling)
    roots: Literal["none", "workspace"] = "none"
    workspace: Callable[[], Path] | None = None
    timeout: float = 60.0


_current: ContextVar[Frame | None] = ContextVar("toolcards_mcp_frame", default=None)


@dataclass
class ServerRequests:
    """The answers to one server's requests (one per card)."""

    server: str
    rules: RequestRules
    _frames: list[Frame] = field(default_factory=list)
    asking: bool = False
    """Whether a question of this server waits for its human (one at a time)."""
    _samples: int = 0
    """Sampling requests counted for the card's life, never per connection: a server that
    drops its connection would otherwise get a fresh allowance each time."""
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def tool_id(self, kind: Kind) -> str:
        return f"mcp.{self.server}.{kind}"

    # ---- calls in flight -----------------------------------------------------------------

    @contextlib.contextmanager
    def during(self, ctx: Any, tool: str) -> Iterator[None]:
        """Requests the server makes now belong to this tool call (``ctx``: its RunContext)."""
        model = getattr(ctx, "model", None) if getattr(ctx, "run_id", None) else None
        frame = Frame(governing_call.get(), model, tool)
        self._frames.append(frame)
        token = _current.set(frame)
        try:
            yield
        finally:
            _current.reset(token)
            self._frames.remove(frame)

    @staticmethod
    @contextlib.contextmanager
    def outside_calls() -> Iterator[None]:
        """For opening a session: its tasks must not inherit the call that opened it."""
        token = _current.set(None)
        try:
            yield
        finally:
            _current.reset(token)

    def _frame(self) -> tuple[Frame | None, str]:
        current = _current.get()
        if current is not None and current in self._frames:
            return current, ""
        if len(self._frames) == 1:
            return self._frames[0], ""
        if not self._frames:
            return None, "no tool call is in flight on this server"
        return None, "several tool calls are in flight, so it cannot be told whose it is"

    # ---- governing one request -----------------------------------------------------------

    async def govern(
        self,
        kind: Kind,
        args: Mapping[str, Any],
        answer: Callable[[Frame, str], Awaitable[Any]],
        timeout: float,
    ) -> Any:
        """Run ``answer(frame, call_id)`` as a governed call of the ``kind`` pseudo-tool;
        Refused when the card, the policy or the answer refuses."""
        tool_id = self.tool_id(kind)
        frame, why = self._frame()
        governing = frame.governing if frame is not None else None
        if frame is None or governing is None:
            why = why or "the tool call is not governed"
            log.warning("MCP server %r: %s refused: %s", self.server, tool_id, why)
            raise Refused(f"{kind} refused by the client: {why}")
        call_id = f"{governing.call_id or 'call'}.{kind}{next(self._numbers)}"
        frame.asked += 1
        if frame.asked > MAX_PER_CALL:
            why = f"more than {MAX_PER_CALL} requests during one tool call"
            if frame.asked == MAX_PER_CALL + 1:  # one row says so; the later ones none
                _audit_refusal(governing, tool_id, call_id, args, f"{why} (later ones unaudited)")
            raise Refused(f"{kind} refused by the client: {why}")
        refusal = self._card_refusal(kind, frame)
        if refusal is not None:
            _audit_refusal(governing, tool_id, call_id, args, refusal)
            raise Refused(f"{kind} refused by the client: {refusal}")
        cap = ToolCapability(
            id=tool_id,
            description=_DESCRIPTIONS[kind],
            json_schema={"type": "object"},
            annotations=ToolAnnotations(open_world=True, readonly=kind == "roots"),
            timeout=timeout,
            abandon_threads=False,
        )

        async def invoke(_: dict[str, Any]) -> Any:
            return await answer(frame, call_id)

        result = await governing.executor.run(
            cap,
            dict(args),
            governing.identity,
            surface=governing.surface,
            call_id=call_id,
            invoke=invoke,
            validated=True,
        )
        if not result.ok:
            raise Refused(f"{kind} refused by the client ({result.outcome.value})")
        return result.value

    def _card_refusal(self, kind: Kind, frame: Frame) -> str | None:
        rules = self.rules
        if kind == "elicit" and rules.elicitation == "refuse":
            return "the card says elicitation: refuse"
        if kind == "sample":
            sampling = rules.sampling
            if sampling.mode == "off":
                return "the card says sampling.mode: off"
            if frame.model is None and sampling.model is None:
                return "no agent model is reachable (not an agent run) and no sampling.model is set"
            if self._samples >= sampling.max_requests:
                return f"at most {sampling.max_requests} sampling requests for this card"
            self._samples += 1
        if kind == "roots" and rules.roots == "none":
            return "the card says roots: none"
        return None


def _audit_refusal(
    governing: GoverningCall, tool_id: str, call_id: str, args: Mapping[str, Any], why: str
) -> None:
    """The one row of a request the card refuses before the policy is asked."""
    executor = governing.executor
    if executor.audit is None:
        return
    who = governing.identity
    executor.audit.record(
        AuditRecord(
            time.time(),
            *made_by(who),
            surface=governing.surface,
            tool=tool_id,
            call_id=call_id,
            args=dict(args),
            decision="deny",
            outcome="denied",
            reason=f"refused by the card: {why}",
            redactor=executor.policy.redaction,
        )
    )
