"""`toolcards serve` killed with SIGKILL under load keeps the audit row of every call it
answered: a real server over HTTP, several MCP clients calling at once, the server killed
right after an answer; the next process of the trail writes the rows the killed one had
journaled but not committed (before: the rows still queued, up to 50 ms of calls, were lost).
A row written from the journal keeps the digest of the call's arguments, not their values:
calls are told apart by it."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import anyio
import pytest
from endings_support import CALLER, endings_config
from mcp_clients import http_session

from support.launch import REAL_TOOLCARDS
from surfaces.surface_support import HttpServer, token_for
from toolcards.governance import AuditLog
from toolcards.governance.redaction.redactor import args_digest

pytestmark = pytest.mark.timeout(300)

CLIENTS = 6
ANSWERS = 150


def test_toolcards_serve_killed_under_load_keeps_the_row_of_every_answered_call(
    tmp_path: Path,
) -> None:
    endings = endings_config(tmp_path)
    server = HttpServer(endings.config, env=endings.env, command=REAL_TOOLCARDS)
    answered: set[str] = set()

    killed = anyio.Event()

    async def client(number: int) -> None:
        try:
            async with http_session(server.url, token_for(CALLER)) as session:
                n = 0
                while not killed.is_set():
                    tag = f"c{number}-{n}"
                    result = await session.call_tool("finish", {"how": "ok", "tag": tag})
                    assert not result.is_error, result
                    answered.add(tag)
                    n += 1
                    if len(answered) >= ANSWERS and not killed.is_set():
                        server.proc.send_signal(signal.SIGKILL)  # right after an answer
                        killed.set()
        except Exception:
            if not killed.is_set():
                raise  # the calls in flight when the server died fail: nothing answered them

    async def load() -> None:
        with anyio.fail_after(240):
            async with anyio.create_task_group() as clients:
                for number in range(CLIENTS):
                    clients.start_soon(client, number)

    try:
        anyio.run(load)
        server.proc.wait(timeout=60)
    finally:
        server.stop()
    assert server.proc.returncode == -signal.SIGKILL
    with AuditLog(endings.audit) as log:  # the next process of the trail
        rows = Counter(e.args_digest for e in log.query(tool="finish", limit=100_000))
        assert log.verify().ok
    calls = {_digest(tag): tag for tag in {mark.name for mark in endings.marks.iterdir()}}
    assert set(rows) <= set(calls)  # no row for a call that never ran
    assert answered <= {calls[digest] for digest in rows}  # a row for every answered call
    assert set(rows.values()) == {1}


def _digest(tag: str) -> str:
    """The argument digest of the call tagged ``tag`` (a row written from the journal of a
    killed process keeps it, not the arguments)."""
    return args_digest({"how": "ok", "tag": tag})
