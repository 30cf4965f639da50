"""A member never dies silently. When the store fails while a member records the end of a
message (and while it records the start of the next one), the member keeps serving: later
sends from its own process and, through the relay, from another one are answered, and the
log says what happened. A member whose actor stopped without being fired is started again by
the next message; a send to a member no process holds fails at once, in one line. Real
PostgreSQL, a second real process of the team."""

from __future__ import annotations

import logging
import subprocess
import textwrap
import threading

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from support.launch import PYTHON
from support.scripted import user_prompts, wait_until
from support.servers import PostgresServer
from toolcards.runtime import RoleProfile, Team

SENDER = textwrap.dedent(
    """
    import sys
    from toolcards.runtime import Team

    team = Team(sys.argv[2], store=sys.argv[1])  # another process of the team (Pykka)
    try:
        print(team.send(sys.argv[3], sys.argv[4], timeout=float(sys.argv[5])), flush=True)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", flush=True)
    finally:
        team.stop()
    """
)


def _send_from_another_process(
    url: str, to: str, content: str, timeout: float, within: float = 180
) -> list[str]:
    """What ``team.send(to, content, timeout=timeout)`` printed in another process of the
    team (its answer or its error); that process must end ``within`` seconds (a bound)."""
    done = subprocess.run(
        [PYTHON, "-c", SENDER, url, "t", to, content, str(timeout)],
        capture_output=True,
        text=True,
        timeout=within,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


class Breaking:
    """The member's model: ``break`` waits until the next message is queued, then makes the
    server refuse the team's database (the member then records the end of this message and
    the start of the next one against a store that is gone); anything else is answered."""

    def __init__(self, pg: PostgresServer, url: str) -> None:
        self.pg, self.url = pg, url
        self.queued = threading.Event()
        self.refused = threading.Event()
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = _unlabelled(user_prompts(messages)[-1])
        if prompt == "break":
            assert self.queued.wait(30)
            self.pg.refuse(self.url)
            self.refused.set()
            return ModelResponse(parts=[TextPart("broken")])
        return ModelResponse(parts=[TextPart(f"pong to {prompt}")])


def _errors(caplog: pytest.LogCaptureFixture, level: int = logging.ERROR) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= level]


def test_a_member_whose_store_fails_while_it_records_a_message_keeps_serving(
    pg: PostgresServer, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    model = Breaking(pg, pg_url)
    team = Team("t", store=pg_url, profiles=[RoleProfile(role="r", model=model.model)])
    try:
        name = team.hire("r", "m")
        assert team.send(name, "hello", timeout=60) == "pong to hello"
        broken = team.post(name, "break")
        team.post(name, "queued")  # in the mailbox when the store goes
        model.queued.set()
        assert model.refused.wait(60)

        def both_said() -> bool:  # the end of one message, and the start of the next
            said = _errors(caplog)
            return any(broken.id in e for e in said) and any("@m.receive" in e for e in said)

        wait_until(both_said, timeout=60)
        pg.admit(pg_url)

        assert _send_from_another_process(pg_url, name, "ping", 60) == ["pong to ping"]
        assert team.send(name, "again", timeout=60) == "pong to again"
    finally:
        pg.admit(pg_url)
        team.stop()
    errors = _errors(caplog)
    ended = [e for e in errors if broken.id in e]
    assert len(ended) == 1 and "member @m" in ended[0], errors
    assert "accepting connections" in ended[0]
    started = [e for e in errors if "@m.receive" in e]
    assert len(started) == 1 and "accepting connections" in started[0], errors
    assert "goes on" in ended[0] and "goes on" in started[0]
    assert all("\n" not in e for e in errors)


def test_a_member_whose_actor_stopped_is_started_again_by_the_next_message(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    model = FunctionModel(lambda messages, info: _pong(messages))
    team = Team("t", store=pg_url, profiles=[RoleProfile(role="r", model=model)])
    try:
        name = team.hire("r", "m")
        assert team.send(name, "hello", timeout=60) == "pong to hello"
        assert team.stop_actor(name)  # gone, not fired: still on the roster, held here
        assert _send_from_another_process(pg_url, name, "ping", 60) == ["pong to ping"]
        assert team.stop_actor(name)
        assert team.send(name, "again", timeout=60) == "pong to again"
        restarts = [
            e.payload for e in team.events() if e.payload.get("event") == "member_restarted"
        ]
        assert [p["name"] for p in restarts] == [name, name]
    finally:
        team.stop()
    said = _errors(caplog, logging.WARNING)
    assert sum("@m" in e and "started it again" in e for e in said) == 2, said


def test_a_send_to_a_member_no_process_holds_fails_at_once_in_one_line(pg_url: str) -> None:
    model = FunctionModel(lambda messages, info: _pong(messages))
    team = Team("t", store=pg_url, profiles=[RoleProfile(role="r", model=model)])
    name = team.hire("r", "m")
    team.stop()  # its members are free: no process holds @m until one resumes the team
    # a bound, far below the send's own timeout: it must not wait for an answer
    answer = _send_from_another_process(pg_url, name, "ping", timeout=900, within=90)
    assert len(answer) == 1
    assert answer[0].startswith("LookupError: member @m is not held by any running process")


def _pong(messages: list[ModelMessage]) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"pong to {_unlabelled(user_prompts(messages)[-1])}")])


def _unlabelled(prompt: object) -> str:
    """A message relayed from another process reads ``Message from user:`` first (its row is
    data, not the host's own words): the text it carries."""
    return str(prompt).removeprefix("Message from user:\n")
