"""The relay of a shared store: a process taking a member over delivers what its old holder
had not handled, and nothing that was already answered (the watermark and the log decide)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from support.scripted import wait_until
from toolcards.runtime.events import EventLog
from toolcards.runtime.messaging import (
    MESSAGES,
    MemberMessage,
    processed_event,
    received_event,
    sent_event,
)
from toolcards.runtime.process import open_location
from toolcards.runtime.relay import Relay, process_token
from toolcards.stores.base import StateNamespace


def _message(n: int) -> MemberMessage:
    return MemberMessage(sender="user", recipient="@ann", content=f"m{n}", awaited=True)


def test_a_takeover_delivers_unanswered_messages_once_and_skips_answered_ones(
    tmp_path: Path,
) -> None:
    store = open_location(str(tmp_path / "team.db"))
    store.open_team("t")
    log = EventLog(store, "t")
    roster = StateNamespace(store, "t", "~members")
    answered, processed, open_one = _message(1), _message(2), _message(3)
    for message in (answered, processed, open_one):
        Relay(log, roster, lambda m: True).queue(message)
    reply = MemberMessage(sender="@ann", recipient="user", content="a1", reply_to=answered.id)
    log.append(MESSAGES, sent_event(reply))  # answered; its holder died before "processed"
    log.append(MESSAGES, processed_event(processed, ok=True, reply_id=None, command=False))
    got: list[str] = []
    lock = threading.Lock()

    def deliver(message: MemberMessage) -> bool:
        with lock:
            got.append(message.content)
        return True

    relay = Relay(log, roster, deliver)
    relay.start(relay.watermark("@ann"))
    try:
        assert wait_until(lambda: got == ["m3"], timeout=10)
        late = _message(4)
        relay.queue(late)
        assert wait_until(lambda: got == ["m3", "m4"], timeout=10)
        # m3 and m4 are open: a new holder would start before the oldest of them
        assert relay.watermark("@ann") < _position_of(log, open_one.id)
        log.append(MESSAGES, processed_event(open_one, ok=True, reply_id=None, command=False))
        log.append(MESSAGES, processed_event(late, ok=True, reply_id=None, command=False))
        last = log.position
        assert wait_until(lambda: relay.watermark("@ann") == last, timeout=10)
    finally:
        relay.stop()
        log.close()
        store.close()


def test_a_message_whose_turn_began_in_a_holder_that_died_is_delivered_as_interrupted(
    tmp_path: Path,
) -> None:
    """A holder killed mid-turn (its ``received`` logged, no ``processed``): the process taking
    the member over ran the whole turn again, and the turn's tools acted twice."""
    store = open_location(str(tmp_path / "team.db"))
    store.open_team("t")
    log = EventLog(store, "t")
    roster = StateNamespace(store, "t", "~members")
    begun, waiting = _message(1), _message(2)
    for message in (begun, waiting):
        Relay(log, roster, lambda m: True).queue(message)
    log.append(MESSAGES, received_event(begun))  # then its holder died
    got: list[tuple[str, bool]] = []
    relay = Relay(log, roster, lambda m: got.append((m.content, m.interrupted)) or True)
    relay.start(relay.watermark("@ann"))
    try:
        assert wait_until(lambda: got == [("m1", True), ("m2", False)], timeout=10)
    finally:
        relay.stop()
        log.close()
        store.close()


def _position_of(log: EventLog, message_id: str) -> int:
    for position, event in log.entries(0):
        payload = event.payload
        if isinstance(payload, dict) and payload.get("message", {}).get("id") == message_id:
            return position
    raise AssertionError(f"no queued event for {message_id}")


def test_a_forked_child_holds_members_under_its_own_token() -> None:
    """A token made once at import would be the parent's in a child forked after it (a
    server forked from a warm interpreter): each would take the other's members for its own."""
    parent = process_token()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its token, then gone without running the parent's cleanup
        os.write(write, process_token().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = pipe.read().decode()
    os.waitpid(pid, 0)
    assert child and child != parent
    assert child.split(":")[1] == str(pid)
    assert process_token() == parent
