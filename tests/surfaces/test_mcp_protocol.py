"""Protocol behaviour of `toolcards serve` over stdio, line by line: malformed JSON-RPC,
serverInfo, a server that stays responsive during long calls, and cancellation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from raw_stdio import RawStdio, cpu_seconds

from surfaces.surface_support import write_config
from toolcards.governance import AuditLog, Identity

ME = Identity("me", "user", [])
pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("protocol")
    policy = base / "allow.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    return write_config(base, local=ME, policy=policy, tools=["slow_tools:TOOLS"])


@pytest.fixture(scope="module")
def server(config: Path) -> Iterator[RawStdio]:
    srv = RawStdio(config)
    yield srv
    srv.close()


def audit_outcomes(config: Path, tool: str, since: float, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        with AuditLog(config.parent / "audit.db") as log:
            found = [e.outcome for e in log.query(tool=tool, since=since, limit=100)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# -- malformed JSON-RPC -------------------------------------------------------------------------


def test_bad_json_is_a_parse_error(server: RawStdio) -> None:
    server.send("{not json")
    reply = server.wait_for(None)
    assert reply["error"]["code"] == -32700


def test_message_without_jsonrpc_version_is_an_invalid_request(server: RawStdio) -> None:
    server.send({"id": 7001, "method": "ping"})
    assert server.wait_for(7001)["error"]["code"] == -32600


def test_non_string_method_is_an_invalid_request(server: RawStdio) -> None:
    server.send({"jsonrpc": "2.0", "id": 7002, "method": 42})
    assert server.wait_for(7002)["error"]["code"] == -32600


def test_unknown_method_is_method_not_found(server: RawStdio) -> None:
    assert server.request("tools/frobnicate", {})["error"]["code"] == -32601


def test_server_keeps_serving_after_malformed_lines(server: RawStdio) -> None:
    server.send("]]")
    assert "result" in server.request("ping")


@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_json_nested_past_any_parser_is_a_parse_error_and_the_server_goes_on(
    server: RawStdio, opening: str
) -> None:
    """100,000 levels: past the recursion limit of Python's json (it raised RecursionError,
    which ended the server)."""
    server.send(opening * 100_000)
    assert server.wait_for(None)["error"]["code"] == -32700
    assert "result" in server.request("ping")


def test_a_line_of_too_many_values_is_refused_unparsed_and_the_server_goes_on(
    server: RawStdio,
) -> None:
    """200,000 empty objects in 600 KB: the bound in values, as over HTTP (the line was parsed
    whole and the ping answered)."""
    objects = ",".join(["{}"] * 200_000)
    server.send('{"jsonrpc":"2.0","id":7003,"method":"ping","params":{"x":[' + objects + "]}}")
    reply = server.wait_for(None)
    assert reply["error"] == {
        "code": -32600,
        "message": "Invalid Request: more than 100,000 values",
    }
    assert "result" in server.request("ping")


def test_a_line_past_the_body_limit_is_refused_unread_and_the_server_goes_on(
    server: RawStdio,
) -> None:
    """6 MiB without a newline, written in pieces (the limit is the config's 4 MiB body):
    dropped as it arrives, answered once it ends; the lines after it are read."""
    assert server.proc.stdin is not None
    piece = b"x" * (1024 * 1024)
    for _ in range(6):
        server.proc.stdin.write(piece)
    server.send('"end"')
    reply = server.wait_for(None)
    assert reply["error"]["code"] == -32600
    assert "longer than 4194304 bytes" in reply["error"]["message"]
    assert "result" in server.request("ping")


# -- identity -------------------------------------------------------------------------------------


def test_server_info_reports_the_toolcards_version(server: RawStdio) -> None:
    assert server.server_info == {"name": "toolcards", "version": version("toolcards")}


# -- a responsive server: a ping sent while a long call runs is answered before the call ---------


def answers(server: RawStdio, *idents: int, timeout: float = 60.0) -> dict[int, Any]:
    """The responses to ``idents``, in the order they arrived."""
    found: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    while len(found) < len(idents):
        message = server.lines.get(timeout=max(0.01, deadline - time.monotonic()))
        if message.get("id") in idents and "method" not in message:
            found[message["id"]] = message
    return found


def start_and_wait_until_running(server: RawStdio, tool: str, seconds: float) -> int:
    """Start ``tool`` with a progress token and return once its first progress (sent as the
    tool starts) has arrived."""
    params = {"name": tool, "arguments": {"seconds": seconds}, "_meta": {"progressToken": tool}}
    call = server.start("tools/call", params)
    deadline = time.monotonic() + 30
    while True:
        message = server.lines.get(timeout=max(0.01, deadline - time.monotonic()))
        if message.get("method") == "notifications/progress":
            return call


def test_ping_answers_while_a_sleeping_sync_tool_runs(server: RawStdio) -> None:
    call = start_and_wait_until_running(server, "nap", 3)
    ping = server.start("ping")
    assert list(answers(server, call, ping)) == [ping, call]


def test_ping_answers_while_a_cpu_bound_tool_runs(server: RawStdio) -> None:
    call = start_and_wait_until_running(server, "crunch", 3)
    pings = [server.start("ping") for _ in range(3)]
    assert list(answers(server, call, *pings)) == [*pings, call]


# -- cancellation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["nap", "nap_async"])
def test_cancelled_call_gets_no_response_and_is_audited(
    server: RawStdio, config: Path, tool: str
) -> None:
    since = time.time()
    call = start_and_wait_until_running(server, tool, 2.5)
    server.send(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call, "reason": "changed my mind"},
        }
    )
    arrived = server.received(3.5)
    assert [m for m in arrived if m.get("id") == call] == []
    assert audit_outcomes(config, tool, since) == ["cancelled"]
    assert "result" in server.request("ping")


@pytest.fixture(scope="module")
def grep_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    base = tmp_path_factory.mktemp("grep")
    policy = base / "allow.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    grep = {"engine": "python", "timeout_s": 3}
    card = {"type": "WorkspaceTool", "workspace_id": "grep", "workspace_grep": grep}
    config = write_config(base, local=ME, policy=policy, tools=[], cards=[card])
    workspace = base / "workspaces" / "grep"
    workspace.mkdir(parents=True)
    (workspace / "hostile.txt").write_text("a" * 64 + "b\n", encoding="utf-8")
    srv = RawStdio(config, env={"TOOLCARDS_WORKSPACES_ROOT": str(base / "workspaces")})
    yield srv
    srv.close()


def test_ping_answers_while_a_catastrophic_python_grep_runs(grep_server: RawStdio) -> None:
    args = {"pattern": "(a|aa)+$", "path": "hostile.txt"}  # 3 s of matching, then its limit
    server = grep_server.server_pid()
    before = cpu_seconds(server)
    call = grep_server.start("tools/call", {"name": "workspace_grep", "arguments": args})
    # the grep has no progress to await: it spends CPU (a little is enough to show it running;
    # under load, waiting for more took longer than the grep's 3 s, and the grep answered first)
    deadline = time.monotonic() + 30
    while cpu_seconds(server) - before < 0.05 and time.monotonic() < deadline:
        time.sleep(0.01)
    ping = grep_server.start("ping")
    arrived = answers(grep_server, call, ping)
    assert list(arrived) == [ping, call]  # the server did not stall behind the grep
    result = arrived[call]["result"]
    assert result["isError"] is True and "time" in result["content"][0]["text"], result
