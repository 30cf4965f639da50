"""MCP prompts: each card's system-prompt channel (``<CardType>`` names, e.g.
``PlanningTool``), plus prompt functions a config adds (``prompts: [module:attr]``).

A prompt function takes string keyword arguments (its prompt arguments; those without a
default are required) and returns a string, or a list of messages: ``(role, content)``
pairs or MCP ``PromptMessage`` objects, where content is a string, pydantic-ai
``BinaryContent`` (an image) or an MCP content block. Prompts are governed with the policy
target ``prompt:<name>`` (listing, completion and ``prompts/get``; each get is audited). A
card's prompt shows team state: it also needs what the card's state needs on every surface,
one of the card's tools or the read right ``context:<CardType>``
(:mod:`toolcards.governance.card_reads`); to a caller without either it does not exist.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from typing import Any, Literal

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError

from toolcards.core.identity import Identity
from toolcards.governance.card_reads import may_read_card
from toolcards.governance.policy.policy import Decision
from toolcards.surfaces.mcp_server.audit_rows import record
from toolcards.surfaces.mcp_server.content import tool_content
from toolcards.surfaces.mcp_server.options import PromptEntry
from toolcards.surfaces.mcp_server.resources import decide
from toolcards.surfaces.runtime import SurfaceRuntime

log = logging.getLogger(__name__)

INVALID_PARAMS = -32602
MAX_PROMPT_NAME = 256
"""A longer prompt name is unknown, refused before it is decided or audited: prompts are named
after functions and card types, and a name a caller makes up may be megabytes long."""
_ROLES: dict[str, Literal["user", "assistant"]] = {"user": "user", "assistant": "assistant"}


def _arguments(fn: Callable[..., Any]) -> list[types.PromptArgument]:
    found = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        found.append(types.PromptArgument(name=p.name, required=p.default is p.empty))
    return found


def _messages(value: Any) -> list[types.PromptMessage]:
    items = [("user", value)] if not isinstance(value, list) else value
    messages = []
    for item in items:
        if isinstance(item, types.PromptMessage):
            messages.append(item)
            continue
        role, content = item
        if role not in _ROLES:
            raise ValueError(f"a prompt message role is 'user' or 'assistant', not {role!r}")
        block = tool_content(content)[0][0]
        messages.append(types.PromptMessage(role=_ROLES[role], content=block))
    return messages


class PromptCatalog:
    def __init__(
        self,
        runtime: SurfaceRuntime,
        prompts: list[PromptEntry],
        identity_of: Callable[[Any], Identity],
    ) -> None:
        self.runtime = runtime
        self.identity_of = identity_of
        self.sources = {entry.name: entry for entry in prompts}

    def handlers(self) -> dict[str, Any]:
        return {"on_list_prompts": self._list, "on_get_prompt": self._get}

    def readable(self, who: Identity, source: PromptEntry) -> bool:
        """Whether ``who`` may read ``source`` beside its ``prompt:`` decision: a card's prompt
        only with one of the card's tools or the read right on the card."""
        if source.card is None:
            return True
        return may_read_card(self.runtime.policy, who, source.card, source.tools)

    def visible(self, who: Identity, name: str) -> bool:
        """Whether listings and completions show ``who`` the prompt ``name``."""
        source = self.sources.get(name)
        if source is None or not self.runtime.policy.visible(who, f"prompt:{name}"):
            return False
        return self.readable(who, source)

    async def _list(self, ctx: Any, _params: Any) -> types.ListPromptsResult:
        who = self.identity_of(ctx)
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(name=s.name, description=s.description, arguments=_arguments(s.fn))
                for s in self.sources.values()
                if self.visible(who, s.name)
            ]
        )

    async def _get(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if len(params.name) > MAX_PROMPT_NAME:
            raise MCPError(
                INVALID_PARAMS, f"unknown prompt: a name over {MAX_PROMPT_NAME} characters"
            )
        who = self.identity_of(ctx)
        target = f"prompt:{params.name}"
        args = dict(params.arguments or {})
        started = time.perf_counter()
        decision = decide(self.runtime, who, target)
        source = self.sources.get(params.name)
        if source is not None and decision.effect == "allow" and not self.readable(who, source):
            decision = Decision("deny", f"{who.id} may not read the {source.card} card's state")
        executor = self.runtime.executor
        if source is None or decision.effect != "allow":
            outcome = "denied" if source is not None else "not_found"
            record(executor, target, args, who, surface="mcp", outcome=outcome,
                   started=started, decision=decision)  # fmt: skip
            raise MCPError(INVALID_PARAMS, f"unknown prompt {params.name!r}")
        try:
            inspect.signature(source.fn).bind(**args)
        except TypeError as exc:
            record(executor, target, args, who, surface="mcp", outcome="invalid_args",
                   started=started, decision=decision, error=str(exc))  # fmt: skip
            raise MCPError(INVALID_PARAMS, f"arguments for {params.name}: {exc}") from None
        try:
            value = await anyio.to_thread.run_sync(lambda: source.fn(**args))
            messages = _messages(value)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            # the row's text, no traceback: its last line may repeat an argument in clear
            shown = executor.policy.redaction.error(error, args, ())
            log.error("prompt %s failed: %s", params.name, shown)
            record(executor, target, args, who, surface="mcp", outcome="error", started=started,
                   decision=decision, error=error)  # fmt: skip
            raise MCPError(-32603, f"prompt {params.name} failed") from None
        record(executor, target, args, who, surface="mcp", outcome="ok", started=started,
               decision=decision)  # fmt: skip
        return types.GetPromptResult(description=source.description, messages=messages)
