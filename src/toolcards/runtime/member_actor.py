"""The actor of one agent member: a pydantic-ai ``Agent`` behind a mailbox.

The member handles one message at a time (its actor's inbox is the mailbox). A slash command the
host asked for (``/name args`` with ``command=True``) is dispatched to the member's
``CommandRegistry`` with no model call; anything else is a model turn on the member's stored
history. The member's cards reach its agent as one capability (``CardsCapability``): their
tools, and each card's summary and per-turn context as team state (data with the card as its
source, never the member's instructions or the user's words). The history is saved after every
turn in the member's state namespace (pydantic-ai ``ModelMessagesTypeAdapter`` JSON), so a
resumed team continues the conversation. A failing model run never stops the member: its answer
is a readable ``error: ...`` line and the history stays as it was. Nor does a store that fails
while the member records a message's end: the log says so, and the member goes on.

Governance: when the team has a policy, every tool of the member (card tools, card toolsets
and ``send_message``) runs through ``GovernedToolset`` with the identity
``Identity(id="agent.<name>", type="agent", roles=profile.roles)``, and a card's state reaches
the member only when the policy lets it read the card (``governance.card_reads``). The
identity comes from the roster alone, never from a message or tool arguments.
``toolcards.governance`` is imported only then, inside :func:`govern`, so the runtime layer
does not load it at import time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from toolcards.core import nesting
from toolcards.core.commands import CommandRegistry
from toolcards.core.errors import (
    CommandNotRecognized,
    RetriableError,
    ToolObserverGone,
    TransientError,
)
from toolcards.core.identity import Identity
from toolcards.governance.approvals.broker import ApprovalBroker
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.card_reads import CardReads
from toolcards.governance.executor.pipeline import Executor
from toolcards.runtime.messaging import (
    MAX_MESSAGE_CHARS,
    MESSAGES,
    USER,
    MemberMessage,
    current_member,
    processed_event,
    received_event,
    truncate,
)
from toolcards.runtime.profiles import RoleProfile
from toolcards.stores.base import dumps

if TYPE_CHECKING:
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

    from toolcards.core.agent_capability import CardFilter
    from toolcards.governance.approvals.broker import Approver
    from toolcards.governance.audit.log import AuditLog
    from toolcards.governance.policy.policy import Policy
    from toolcards.runtime.host import TeamHost
    from toolcards.stores.base import BudgetStore

logger = logging.getLogger(__name__)

HISTORY_KEY = "history"
INTERRUPTED = (
    "{name} was interrupted while handling this message (the process running it stopped); "
    "it is not run again, as its tools may have acted: ask again to have it redone"
)
"""The answer to a message whose turn began in a process that stopped (see the relay)."""


class Roster(Protocol):
    """What a member actor needs from its team's roster."""

    def is_member(self, name: str) -> bool:
        """True when ``name`` is on the roster."""

    def reply(self, message: MemberMessage, text: str) -> str:
        """Record (and route) the answer to ``message``; returns the answer's id."""

    def post(
        self, to: str, content: str, sender: str = ..., *, from_host: bool = ...
    ) -> MemberMessage:
        """Queue a message in the mailbox of ``to``."""


def govern(
    toolset: AbstractToolset[Any],
    policy: Policy,
    name: str,
    roles: list[str],
    *,
    audit: AuditLog | None = None,
    approver: Approver | None = None,
    budgets: BudgetStore | None = None,
) -> tuple[AbstractToolset[Any], CardFilter, AbstractCapability[Any]]:
    """``toolset`` wrapped so every call is checked against ``policy`` as ``agent.<name>``,
    the filter of the cards whose state that caller may read, and the capability that counts
    the member's model usage against the policy's budgets (in ``budgets``, the team's).

    A member's run has no place to wait for a deferred approval, so approval-required calls go
    to ``approver`` inline, and without one they are refused with a readable result. An
    approver that holds a broker (the dashboard's ``InboxApprover``) lends it to the member's
    executor: the member's requests wait in it, and the grants its approvers remember there
    let the member's later calls run.
    """
    # lazy: pydantic-ai, ~1 s; a process that only messages members runs no agent
    from toolcards.governance.toolset.budget import ModelBudget
    from toolcards.governance.toolset.governed import GovernedToolset

    identity = Identity(id=f"agent.{name}", type="agent", roles=roles)
    broker = getattr(approver, "broker", None)
    executor = Executor(
        CapabilityRegistry(),
        policy,
        audit=audit,
        approvals=broker if isinstance(broker, ApprovalBroker) else None,
        budgets=budgets,
    )
    governed = GovernedToolset(
        toolset,
        executor=executor,
        identity=identity,
        approver=approver if approver is not None else "refuse",
    )
    readable = CardReads(governed.policy, governed.resolve_identity)
    return governed, readable, ModelBudget(executor, identity)


def as_text(value: Any) -> str:
    """A command result as text (models and containers as JSON)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(done)"
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return dumps(value)


def trim_history(messages: list[ModelMessage], limit: int | None) -> list[ModelMessage]:
    """The newest whole turns of ``messages`` that fit in ``limit`` messages (at least the
    last turn): a cut never separates a tool call from its result."""
    if limit is None or len(messages) <= limit:
        return messages
    # lazy: pydantic-ai, ~1 s; a process that only messages members runs no agent
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    starts = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    ]
    fitting = [i for i in starts if len(messages) - i <= limit]
    cut = fitting[0] if fitting else (starts[-1] if starts else 0)
    return messages[cut:]


class MemberActor:
    """The target object of a member's actor. Public methods run on the actor's thread."""

    def __init__(self, team: TeamHost, roster: Roster, name: str, profile: RoleProfile) -> None:
        self._team = team
        self._roster = roster
        self.name = name
        self.profile = profile
        self.current: MemberMessage | None = None
        """The message being handled, or None when idle (read from other threads)."""
        self._retired = threading.Event()
        self._fired = threading.Event()
        self._saving = threading.Lock()
        """Held while the history is written, and by :meth:`fire`: no write follows a fire."""
        self._agent: Agent[None, str] | None = None
        self._commands = CommandRegistry()
        self._history: list[ModelMessage] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop the member's model turns run on (its own; closed when it stops)."""

    # ---- lifecycle ---------------------------------------------------------------------------

    def on_start(self) -> None:
        # lazy: pydantic-ai, ~1 s; a process that only messages members runs no agent
        from pydantic_ai import Agent
        from pydantic_ai.toolsets import CombinedToolset

        # lazy: pydantic-ai, ~1 s; a process that only messages members runs no agent
        from toolcards.core.agent_capability import CardsCapability

        profile = self.profile
        factory = self._team.bind(profile.fresh_cards(), member=self.name)
        self._commands = factory.get_commands()
        toolsets: list[AbstractToolset[Any]] = [factory.toolset()]
        if profile.messaging:
            toolsets.append(self._messaging_toolset())
        toolset: AbstractToolset[Any] = CombinedToolset(toolsets)
        readable: CardFilter | None = None
        capabilities: list[AbstractCapability[Any]] = []
        if self._team.policy is not None:
            toolset, readable, budget = govern(
                toolset,
                self._team.policy,
                self.name,
                profile.roles,
                audit=self._team.audit,
                approver=self._team.approver,
                budgets=self._team.budgets,
            )
            capabilities.append(budget)
        cards = CardsCapability(factory, self._fenced(toolset), readable=readable)
        self._agent = Agent(
            profile.model,
            instructions=profile.instructions or None,
            capabilities=[*capabilities, cards],
            name=self.name,
            model_settings=profile.model_settings,  # type: ignore[arg-type]
        )
        self._history = self._load_history()

    def on_stop(self) -> None:
        """Close the member's event loop: left to the collector, its sockets warn."""
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed() and not loop.is_running():
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def retire(self) -> None:
        """Answer every message still queued with a short notice instead of a model turn."""
        self._retired.set()

    def fire(self) -> None:
        """Retire, and end what is left of a turn still running: its tool calls fail and its
        conversation is not saved again. Fire waits for the turn a bounded time only, then
        frees the name: the turn went on acting, and rewrote the history fire deleted, which
        the next member of that name loaded."""
        with self._saving:
            self._fired.set()
        self._retired.set()

    # ---- the mailbox -------------------------------------------------------------------------

    def receive(self, message: MemberMessage) -> str:
        """Handle one message and answer it (the answer also goes to the sender's mailbox
        when the message asked for it)."""
        team = self._team
        team.log.append(MESSAGES, received_event(message))
        self.current = message
        token = current_member.set(self.name)
        asking = nesting.calling_run.set(nesting.find(message.caller_run))
        ok, command = True, False
        try:
            if self._retired.is_set():
                ok, reply = False, f"{self.name} has left the team; the message was not handled"
            elif message.interrupted:
                ok, reply = False, INTERRUPTED.format(name=self.name)
            elif (
                message.command
                and CommandRegistry.is_command(message.content)
                and not self._roster.is_member(message.sender)
            ):
                command = True
                reply = self._command(message.content)
            else:
                reply = self._model_turn(message)
        except Exception as exc:  # the member keeps serving its mailbox
            logger.info("member %s failed on message %s", self.name, message.id, exc_info=True)
            ok, reply = False, f"error: {type(exc).__name__}: {exc}"
        finally:
            nesting.calling_run.reset(asking)
            current_member.reset(token)
            self.current = None
        reply = truncate(reply, MAX_MESSAGE_CHARS)
        try:
            reply_id = self._roster.reply(message, reply)
            team.log.append(
                MESSAGES, processed_event(message, ok=ok, reply_id=reply_id, command=command)
            )
        except TransientError as exc:  # the store went away: say so, and serve the mailbox on
            logger.error(
                "member %s handled message %s but could not record its answer (%s: %s); the "
                "member goes on, and a sender waiting in another process gets no answer",
                self.name,
                message.id,
                type(exc).__name__,
                " ".join(str(exc).split()),
            )
        return reply

    def _command(self, line: str) -> str:
        try:
            return as_text(self._commands.dispatch(line))
        except CommandNotRecognized as exc:
            return str(exc)

    def _model_turn(self, message: MemberMessage) -> str:
        if self._agent is None:
            raise RuntimeError(f"member {self.name} did not start")
        prompt = self._prompt(message)
        if self._loop is None or self._loop.is_closed():  # run_sync runs on the thread's loop
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
        result = self._agent.run_sync(prompt, message_history=self._history)
        self._history = trim_history(result.all_messages(), self.profile.max_history)
        self._save_history()
        return str(result.output)

    def _prompt(self, message: MemberMessage) -> str:
        """The host's own words bare, anyone else's under its sender's name: decided by how
        the message was sent, never by the roster when it is read (a member fired while its
        message waited was read bare, as if the operator had said it)."""
        text = message.content
        if message.reply_to is not None:
            return f"Reply from {message.sender} (to your message {message.reply_to}):\n{text}"
        if message.from_host and message.sender == USER:
            return text
        return f"Message from {message.sender}:\n{text}"

    # ---- history -----------------------------------------------------------------------------

    def _load_history(self) -> list[ModelMessage]:
        # lazy: pydantic-ai, ~1 s; a process that only messages members runs no agent
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        stored = self._team.state_of(self.name).get(HISTORY_KEY)
        if not stored:
            return []
        try:
            return list(ModelMessagesTypeAdapter.validate_python(stored))
        except Exception as exc:  # written by an incompatible version: start afresh, say so
            self._team.log.lifecycle("member_history_dropped", name=self.name, reason=str(exc))
            return []

    def _save_history(self) -> None:
        # lazy: pydantic-ai, ~1 s; a process that only messages members runs no agent
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        data = ModelMessagesTypeAdapter.dump_python(self._history, mode="json")
        with self._saving:
            if not self._fired.is_set():  # fire deleted it; the name may be another's now
                self._team.state_of(self.name).put(HISTORY_KEY, data)

    # ---- tools of the member itself ----------------------------------------------------------

    def _fenced(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        """``toolset`` (every tool of the member) refusing each call once the member is fired:
        card tools that do not pass the observer, and ``send_message``, ran after it left."""
        # lazy: pydantic-ai, ~1 s; a process that only messages members runs no agent
        from pydantic_ai.toolsets import WrapperToolset

        fired, me = self._fired, self.name

        class Fenced(WrapperToolset[Any]):
            async def call_tool(
                self,
                name: str,
                tool_args: dict[str, Any],
                ctx: RunContext[Any],
                tool: ToolsetTool[Any],
            ) -> Any:
                if fired.is_set():
                    raise ToolObserverGone(f"{me} was fired: its tool {name} was not run")
                return await self.wrapped.call_tool(name, tool_args, ctx, tool)

        return Fenced(toolset)

    def _messaging_toolset(self) -> AbstractToolset[Any]:
        # lazy: pydantic-ai, ~1 s; a process that only messages members runs no agent
        from toolcards.core.pathargs import PathArgs
        from toolcards.core.spec import annotate
        from toolcards.core.toolset import build_function_toolset
        from toolcards.runtime.messaging import member_name

        roster, me = self._roster, self.name

        def send_message(to: str, content: str) -> str:
            """Send a message to another team member.

            to: the member's name, such as @researcher-1.
            content: the message text.
            Their answer comes back to you later as a new message.
            """
            try:
                message = roster.post(to, content, sender=me)
            except (LookupError, ValueError) as exc:
                raise RetriableError(str(exc)) from exc
            return f"sent to {message.recipient} (message {message.id})"

        # `to` as the roster names it (`x` is `@x`) before a policy decides on it
        annotate(send_message, paths=PathArgs(member_name, fields=("to",)))
        return build_function_toolset([send_message])

    def __repr__(self) -> str:
        return f"<MemberActor {self.name} role={self.profile.role}>"
