"""The messages of a team's members: post (queued), send (waits for the answer) and the
answer's way back, within this process or, on a shared store, through the relay to the
process that holds the recipient. The roster (:mod:`toolcards.runtime.members`) carries them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from toolcards.core import nesting
from toolcards.core.actors import ActorHandle, ActorUnavailable
from toolcards.core.errors import RetriableError, TransientError
from toolcards.core.identity import calling_principal
from toolcards.runtime.messaging import (
    MAX_MESSAGE_CHARS,
    MESSAGES,
    SENDER_PATTERN,
    USER,
    MemberMessage,
    current_member,
    sent_event,
    truncate,
)

if TYPE_CHECKING:
    from toolcards.runtime.host import TeamHost
    from toolcards.runtime.relay import Relay

HOLDER_CHECK = 1.0
"""Seconds between the checks a send waiting on another process makes that it still holds
the member."""

MAX_UNANSWERED = 20
"""Messages one member may have waiting for another's answer (queued or being handled): one
model response cannot flood a mailbox, and each answer is a model turn of the sender's."""


def governed_call_running() -> bool:
    """True while a governed tool call or a member's turn runs in this context (a delegating
    tool passing its model's words on, a member's tool, with or without a policy): what it
    sends is never the host's, nor its command. A thread that does not carry the context (a
    ``ThreadPoolExecutor``, ``loop.run_in_executor``) looks like the host: docs/agents.md."""
    return (
        calling_principal.get() is not None
        or nesting.calling_run.get() is not None
        or current_member.get() is not None
    )


class Unanswered:
    """The ids of members' messages whose answer has not come back, per sender and recipient
    (at most :data:`MAX_UNANSWERED` each; a pair goes when its last message is answered)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[tuple[str, str], set[str]] = {}

    def add(self, message: MemberMessage) -> None:
        """Count ``message``; a RetriableError the sender's model reads when it is one too
        many."""
        with self._lock:
            ids = self._ids.setdefault((message.sender, message.recipient), set())
            if len(ids) >= MAX_UNANSWERED:
                raise RetriableError(
                    f"{message.recipient} already has {len(ids)} unanswered messages from you; "
                    "wait for its answers before you send more"
                )
            ids.add(message.id)

    def settle(self, sender: str, recipient: str, message_id: str | None) -> None:
        """The message ``message_id`` of ``sender`` to ``recipient`` is answered (or failed)."""
        with self._lock:
            ids = self._ids.get((sender, recipient))
            if ids is not None:
                ids.discard(str(message_id))
                if not ids:
                    del self._ids[(sender, recipient)]


class MemberMessaging(ABC):
    """The messaging half of a team's roster: what it needs of the roster is declared here."""

    _team: TeamHost
    _entries: dict[str, Any]
    """The members running in this process, by name."""
    _relay: Relay | None
    """On a shared store: the queue to the other processes of the team."""
    _unanswered: Unanswered
    """Members' posts from this process whose answer has not come back yet."""

    @abstractmethod
    def resolve(self, name: str) -> str:
        """The roster name for ``name``; LookupError when there is none."""

    @abstractmethod
    def is_member(self, name: str) -> bool:
        """Whether ``name`` is a member of the team (of any of its processes)."""

    @abstractmethod
    def _remote(self, name: str) -> dict[str, Any] | None:
        """The roster row of ``name`` when another process holds it."""

    @abstractmethod
    def _running(self, name: str) -> ActorHandle[Any]:
        """The actor of ``name``, a member of this process (started again when it stopped
        without being fired); LookupError when there is none."""

    def _message(
        self,
        to: str,
        content: str,
        sender: str,
        *,
        route_reply: bool,
        awaited: bool = False,
        from_host: bool = False,
        command: bool = False,
    ) -> MemberMessage:
        self._team.check_running()
        if not isinstance(content, str):
            raise ValueError(f"message content must be a string, got {type(content).__name__}")
        if not isinstance(sender, str) or not SENDER_PATTERN.fullmatch(sender):
            raise ValueError(f"sender {sender!r:.80} must be a short name without spaces")
        recipient = self.resolve(to)
        host = from_host and not governed_call_running()
        if recipient == sender:
            raise ValueError(f"{sender} cannot message itself")
        return MemberMessage(
            sender=sender,
            recipient=recipient,
            content=truncate(content, MAX_MESSAGE_CHARS),
            route_reply=route_reply and self.is_member(sender),
            awaited=awaited,
            from_host=host,
            command=command and host,
        )

    def _dispatch(self, message: MemberMessage) -> ActorHandle[Any]:
        """Record ``message`` as sent; the recipient's actor, to tell or ask it."""
        handle = self._running(message.recipient)
        self._team.log.append(MESSAGES, sent_event(message))
        return handle

    def post(
        self,
        to: str,
        content: str,
        sender: str = USER,
        *,
        from_host: bool = False,
        command: bool = False,
    ) -> MemberMessage:
        # lazy: agent members only (pydantic models, ~1x python -c pass)
        from toolcards.runtime.member_actor import MemberActor

        message = self._message(
            to, content, sender, route_reply=True, from_host=from_host, command=command
        )
        if message.route_reply:  # a member's: its answer comes back here, and settles it
            self._unanswered.add(message)
        try:
            if message.recipient not in self._entries and self._relay is not None:
                self._relay.queue(message)  # its process delivers it
            else:
                self._dispatch(message).tell(MemberActor.receive, message)
        except BaseException:
            self._unanswered.settle(message.sender, message.recipient, message.id)
            raise
        return message

    def _deliver_queued(self, message: MemberMessage) -> bool:
        """A message another process queued for one of ours: into its mailbox."""
        # lazy: agent members only (pydantic models, ~1x python -c pass)
        from toolcards.runtime.member_actor import MemberActor

        if message.reply_to is not None:  # an answer from another process: its question is done
            self._unanswered.settle(message.recipient, message.sender, message.reply_to)
        if message.recipient not in self._entries:
            return False
        with contextlib.suppress(LookupError, ActorUnavailable):
            self._dispatch(message).tell(MemberActor.receive, message)
            return True
        return False

    def send(
        self,
        to: str,
        content: str,
        sender: str,
        timeout: float,
        *,
        from_host: bool = False,
        command: bool = False,
    ) -> str:
        # lazy: agent members only (pydantic models, ~1x python -c pass)
        from toolcards.runtime.member_actor import MemberActor

        self._team.check_running()
        remote = self._relay is not None and self.resolve(to) not in self._entries
        message = self._message(
            to,
            content,
            sender,
            route_reply=False,
            awaited=remote,
            from_host=from_host,
            command=command,
        )
        if self._relay is not None and remote:
            return self._send_remote(self._relay, message, timeout)
        if current_member.get() == message.recipient:
            raise ValueError(f"{message.recipient} cannot wait for its own answer; use post")
        run = nesting.calling_run.get()  # a delegating tool's run waits: it may answer approvals
        if run is not None:
            message = message.model_copy(update={"caller_run": run.token})
        handle = self._dispatch(message)
        try:
            return str(handle.within(timeout).ask(MemberActor.receive, message))
        except TimeoutError:
            raise TimeoutError(
                f"{message.recipient} did not answer within {timeout:g}s; its answer will be "
                f"recorded in the event log as the reply to message {message.id}"
            ) from None
        except ActorUnavailable:
            raise LookupError(f"member {message.recipient} left before answering") from None

    def _send_remote(self, relay: Relay, message: MemberMessage, timeout: float) -> str:
        """Queue ``message`` for the process holding its recipient; wait for the answer in
        the event log."""
        answers: list[str] = []
        done = threading.Event()

        def watch(event: Any) -> None:
            payload = event.payload
            if event.tool_id != MESSAGES or not isinstance(payload, dict):
                return
            if payload.get("event") == "sent" and payload.get("reply_to") == message.id:
                answers.append(str(payload.get("content", payload.get("text", ""))))
                done.set()

        log = self._team.log
        watcher = log.subscribe(watch, log.position)
        deadline = time.monotonic() + timeout
        try:
            self._check_held(relay, message.recipient)
            relay.queue(message)
            while not done.wait(min(HOLDER_CHECK, max(deadline - time.monotonic(), 0.0))):
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"{message.recipient} did not answer within {timeout:g}s; its answer "
                        f"will be recorded in the event log as the reply to message {message.id}"
                    )
                self._check_held(relay, message.recipient)
        finally:
            watcher.close()
        return answers[0]

    def _check_held(self, relay: Relay, name: str) -> None:
        """LookupError, in one line, when no running process holds the member ``name`` (an
        answer would never come); a store that cannot tell right now says nothing."""
        try:
            record = self._remote(name)
            gone = record is not None and relay.holder_gone(record.get("holder"))
        except TransientError:
            return
        if record is None and name not in self._entries:
            raise LookupError(f"member {name} left team {self._team.team_id}")
        if gone:
            raise LookupError(
                f"member {name} is not held by any running process (its process stopped or "
                "gave it up); resume the team in a process to take it over (a post waits "
                "for that, a send does not)"
            )

    def reply(self, message: MemberMessage, text: str) -> str:
        """Record the answer to ``message``; post it to the sender's mailbox when asked to.

        Replies are never answered automatically, so two members cannot loop on each other.
        """
        # lazy: agent members only (pydantic models, ~1x python -c pass)
        from toolcards.runtime.member_actor import MemberActor

        self._unanswered.settle(message.sender, message.recipient, message.id)
        answer = MemberMessage(
            sender=message.recipient, recipient=message.sender, content=text, reply_to=message.id
        )
        deliver = message.route_reply and message.reply_to is None
        if deliver and self._relay is not None and self._remote(message.sender) is not None:
            self._relay.queue(answer)
            return answer.id
        if deliver and self.is_member(message.sender) and self._team.running:
            handle = self._team.actor(answer.recipient)
            if handle is not None:  # else the sender left meanwhile: the answer stays logged
                self._team.log.append(MESSAGES, sent_event(answer))
                with contextlib.suppress(ActorUnavailable):
                    handle.tell(MemberActor.receive, answer)
                return answer.id
        event = sent_event(answer)
        if message.awaited:  # a sender in another process waits for the whole answer
            event["content"] = answer.content
        self._team.log.append(MESSAGES, event)
        return answer.id
