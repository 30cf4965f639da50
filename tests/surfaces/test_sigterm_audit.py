"""A process stopped by SIGTERM while a governed call runs leaves that call's audit row in the
SQLite file: a Python program running the executor, and `toolcards serve` over stdio and
HTTP (real processes, the signal sent once the tool runs)."""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import textwrap
from collections import Counter
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


THREADS = textwrap.dedent(
    """
    import asyncio, os, signal, sys, threading
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity, Policy
    from toolcards.governance.audit import shutdown
    from toolcards.governance.executor.calls import CallBook

    def work(tag: str) -> str:
        print("ran", tag, flush=True)
        return tag

    path, spill, durability, mode = sys.argv[1:5]
    audit = AuditLog(path, durability, spill_dir=spill)
    policy = Policy.from_dict({"default_effect": "allow"})
    executor = Executor(CapabilityRegistry.from_tools([work]), policy, audit=audit)
    handler_runs, called = threading.Event(), threading.Event()

    def call(tag: str) -> None:  # on a thread of its own, in an event loop of its own
        try:
            asyncio.run(executor.call("work", {"tag": tag}, Identity("me"), call_id=tag))
        except RuntimeError as exc:
            print("refused", tag, exc, flush=True)
        finally:
            called.set()

    def on_thread(tag: str) -> None:
        threading.Thread(target=call, args=(tag,), daemon=True).start()

    interrupt_all, close_all, record = shutdown.interrupt_all, shutdown.close_all, CallBook.record

    def interrupting(reason: str) -> None:  # the SIGTERM handler has begun
        interrupt_all(reason)
        handler_runs.set()

    def closing() -> None:  # the logs closed, the process not ended yet: a call starts
        close_all()
        on_thread("late")
        called.wait(60)

    def recording(self, call, outcome, error) -> None:  # the row of an ended call, being made
        if call.call_id == "ended":  # on another thread: SIGTERM, the row made once handled
            os.kill(os.getpid(), signal.SIGTERM)
            handler_runs.wait(60)
        elif call.call_id == "own":  # on the main thread: SIGTERM handled in the row's making
            signal.raise_signal(signal.SIGTERM)
        record(self, call, outcome, error)

    shutdown.interrupt_all, CallBook.record = interrupting, recording
    if mode == "starting":
        shutdown.close_all = closing

    async def main() -> None:
        await executor.call("work", {"tag": "main"}, Identity("me"), call_id="main")
        if mode == "ending":
            on_thread("ended")
        elif mode == "starting":
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            await executor.call("work", {"tag": "own"}, Identity("me"), call_id="own")
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("durability", ["batched", "sync"])
@pytest.mark.parametrize(
    ("mode", "rows", "ran"),
    [
        pytest.param(
            "ending", {"main": ["ok"], "ended": ["ok"]}, ["main", "ended"], id="row-being-made"
        ),
        pytest.param(
            "starting", {"main": ["ok"], "late": ["interrupted"]}, ["main"], id="call-starting"
        ),
        pytest.param("own", {"main": ["ok"], "own": ["ok"]}, ["main", "own"], id="on-own-thread"),
    ],
)
def test_calls_ending_or_starting_while_sigterm_ends_the_process_keep_one_row_each(
    tmp_path: Path, durability: str, mode: str, rows: dict[str, list[str]], ran: list[str]
) -> None:
    """SIGTERM while a call's row is made (on another thread, or on the handler's own), and
    a call starting once the logs closed: each has one row, on the trail once the next
    process of the trail ran (before: no row, though the tool ran)."""
    path, spill = tmp_path / "audit.db", tmp_path / "spill"
    argv = [sys.executable, "-c", THREADS, str(path), str(spill), durability, mode]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines() if line.startswith("ran")] == ran
    with AuditLog(path, spill_dir=spill) as log:  # the next process of the trail
        found: dict[str, list[str]] = {}
        for entry in log.query(limit=100):
            found.setdefault(entry.call_id or "", []).append(entry.outcome)
    assert found == rows


BUSY = textwrap.dedent(
    """
    import asyncio, os, signal, sys, threading
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity, Policy

    ran, enough = [], threading.Event()

    def work(tag: str) -> str:
        os.write(1, f"ran {tag}\\n".encode())  # one write: threads' lines never mix
        ran.append(tag)
        if len(ran) >= 200:
            enough.set()
        return tag

    audit = AuditLog(sys.argv[1], spill_dir=sys.argv[2])
    policy = Policy.from_dict({"default_effect": "allow"})
    executor = Executor(CapabilityRegistry.from_tools([work]), policy, audit=audit)

    def worker(n: int) -> None:  # as a member actor's thread or a server's worker
        async def calls() -> None:
            for i in range(10**9):
                tag = f"w{n}-{i}"
                await executor.call("work", {"tag": tag}, Identity("me"), call_id=tag)
        try:
            asyncio.run(calls())
        except RuntimeError as exc:
            print("refused", n, exc, flush=True)

    async def main() -> None:
        await executor.call("work", {"tag": "main"}, Identity("me"), call_id="main")
        for n in range(4):
            threading.Thread(target=worker, args=(n,), daemon=True).start()
        await asyncio.to_thread(enough.wait, 60)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def test_every_call_of_busy_threads_has_one_row_after_sigterm(tmp_path: Path) -> None:
    """Four threads run calls back to back when SIGTERM ends the process: every call whose
    tool ran has exactly one row (before: the calls of the last milliseconds had none)."""
    path, spill = tmp_path / "audit.db", tmp_path / "spill"
    argv = [sys.executable, "-c", BUSY, str(path), str(spill)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGTERM, done.stderr
    ran = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("ran")}
    with AuditLog(path, spill_dir=spill) as log:
        rows = Counter(entry.call_id for entry in log.query(limit=100_000))
    assert len(ran) >= 200
    assert [tag for tag in sorted(ran) if rows[tag] != 1] == []
    assert [tag for tag, n in rows.items() if n != 1] == []
