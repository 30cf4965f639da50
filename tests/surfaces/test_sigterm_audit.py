"""A process stopped by SIGTERM while a governed call runs leaves that call's audit row in the
SQLite file: a Python program running the executor, and `toolcards serve` over stdio and
HTTP (real processes, the signal sent once the tool runs)."""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from endings_support import CALLER, endings_config, wait_running
from mcp.shared.exceptions import MCPError
from mcp_clients import http_session
from raw_stdio import RawStdio

from surfaces.surface_support import HttpServer, token_for
from toolcards.governance import AuditLog

pytestmark = pytest.mark.timeout(180)

PROGRAM = textwrap.dedent(
    """
    import asyncio, signal, sys, threading
    # as a program started from a shell: SIGTERM and SIGINT unblocked, whatever the test
    # worker's thread passed on (a blocked signal is inherited by a child)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity, Policy

    async def hold(tag: str) -> str:
        print("running", flush=True)
        await asyncio.Event().wait()
        return "never"

    async def hold_elsewhere(tag: str) -> str:
        # the signal lands on a thread of the program's own, and the loop's wait goes on: as
        # when it lands on the main thread just before that wait begins
        threading.Thread(target=threading.Event().wait, daemon=True).start()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        print("running", flush=True)
        await asyncio.Event().wait()
        return "never"

    def hold_sync(tag: str) -> str:
        print("running", flush=True)
        threading.Event().wait(120)
        return "never"

    def quick(tag: str) -> str:
        return tag

    audit = AuditLog(sys.argv[1], sys.argv[3])
    policy = Policy.from_dict({"default_effect": "allow"})
    tools = CapabilityRegistry.from_tools([hold, hold_elsewhere, hold_sync, quick])
    executor = Executor(tools, policy, audit=audit)


    async def main() -> None:
        if "own" in sys.argv[4:]:  # the program's own signal handling, set up before the call
            own = lambda: print("own handler", flush=True)  # noqa: E731
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, own)
        await executor.call(sys.argv[2], {"tag": "t"}, Identity("me"), call_id="sig-1")

    if "again" in sys.argv[4:]:  # a first event loop, ended, before the one the call waits in
        asyncio.run(executor.call("quick", {"tag": "t"}, Identity("me"), call_id="sig-0"))
    asyncio.run(main())
    """
)


def outcomes(path: Path) -> list[tuple[str, str | None]]:
    with AuditLog(path) as log:
        return [(e.outcome, e.call_id) for e in log.query(limit=100)]


@pytest.mark.parametrize(
    ("args", "rows"),
    [
        pytest.param(("hold", "batched"), [("interrupted", "sig-1")], id="async"),
        pytest.param(("hold_sync", "sync"), [("interrupted", "sig-1")], id="sync"),
        pytest.param(
            ("hold_elsewhere", "batched"), [("interrupted", "sig-1")], id="on-another-thread"
        ),
        pytest.param(
            ("hold_elsewhere", "batched", "again"),
            [("ok", "sig-0"), ("interrupted", "sig-1")],
            id="in-a-later-event-loop",
        ),
    ],
)
def test_a_program_stopped_by_sigterm_mid_call_keeps_the_calls_row(
    tmp_path: Path, args: tuple[str, ...], rows: list[tuple[str, str]]
) -> None:
    path = tmp_path / "audit.db"
    assert stopped_by_sigterm(path, *args) == -signal.SIGTERM
    assert outcomes(path) == rows


def test_a_loop_with_signal_handlers_of_its_own_keeps_them_and_still_ends_on_sigterm(
    tmp_path: Path,
) -> None:
    def own_signal(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGUSR1)
        assert line_of(proc) == "own handler"

    path = tmp_path / "audit.db"
    assert stopped_by_sigterm(path, "hold", "batched", "own", first=own_signal) == -signal.SIGTERM
    assert outcomes(path) == [("interrupted", "sig-1")]


def stopped_by_sigterm(
    path: Path, *args: str, first: Callable[[subprocess.Popen[str]], None] | None = None
) -> int | None:
    """Run :data:`PROGRAM` with ``args``; once its tool runs, ``first`` (if any), then
    SIGTERM: its return code."""
    argv = [sys.executable, "-c", PROGRAM, str(path), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert line_of(proc) == "running"
        if first is not None:
            first(proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    return proc.returncode


def line_of(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The process's next line of output (empty when none comes within ``timeout``)."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as waiting:
        waiting.register(proc.stdout, selectors.EVENT_READ)
        return proc.stdout.readline().strip() if waiting.select(timeout) else ""


def test_toolcards_serve_over_stdio_stopped_by_sigterm_mid_call_keeps_the_calls_row(
    tmp_path: Path,
) -> None:
    endings = endings_config(tmp_path)
    server = RawStdio(endings.config, env={"ENDINGS_DIR": str(endings.marks)})
    try:
        server.start("tools/call", {"name": "hold", "arguments": {"tag": "stdio-term"}})
        anyio.run(wait_running, endings.marks, "stdio-term")
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=60)
    finally:
        server.close()
    rows = endings.call_rows("stdio-term")
    assert [(r.outcome, r.principal) for r in rows] == [("cancelled", CALLER.id)]


def test_toolcards_serve_over_http_stopped_by_sigterm_mid_call_keeps_the_calls_row(
    tmp_path: Path,
) -> None:
    endings = endings_config(tmp_path)
    server = HttpServer(endings.config, env=endings.env)

    async def call_then_stop() -> None:
        async with http_session(server.url, token_for(CALLER)) as session:

            async def call() -> None:
                with pytest.raises(MCPError, match="without a response"):
                    await session.call_tool("hold", {"tag": "http-term"})

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                await wait_running(endings.marks, "http-term")
                server.proc.send_signal(signal.SIGTERM)
            assert await anyio.to_thread.run_sync(lambda: server.proc.wait(60)) == 0

    try:
        anyio.run(call_then_stop)
    finally:
        server.stop()
    rows = endings.call_rows("http-term")
    assert [(r.outcome, r.principal) for r in rows] == [("cancelled", CALLER.id)]
