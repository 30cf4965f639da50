"""Threads toolcards starts leave SIGTERM, SIGINT and SIGHUP to the main thread: the kernel
delivers a signal sent to the process to a thread that does not block it, and Python runs
the handler only when the main thread runs again (see :mod:`toolcards.core.threads`)."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

from toolcards.core.threads import PROCESS_SIGNALS, background_thread
from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity, Policy


def _blocked_here() -> set[int]:
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


def test_a_background_thread_blocks_the_process_signals_and_the_caller_keeps_its_mask() -> None:
    before = _blocked_here()
    seen: list[set[int]] = []
    thread = background_thread(lambda: seen.append(_blocked_here()), name="probe")
    thread.start()
    thread.join(10)
    assert seen and seen[0] >= PROCESS_SIGNALS
    assert _blocked_here() == before


def test_a_sync_tool_runs_in_a_thread_that_leaves_the_signals_to_the_main_thread(
    tmp_path: Path,
) -> None:
    def mask() -> list[int]:
        """The signals blocked in the thread the tool runs in."""
        return sorted(_blocked_here())

    executor = Executor(
        CapabilityRegistry.from_tools([mask]),
        Policy.from_dict({"default_effect": "allow"}),
        audit=AuditLog(tmp_path / "audit.db"),
    )
    result = asyncio.run(executor.call("mask", {}, Identity("me")))
    assert set(result.value) >= PROCESS_SIGNALS
    assert threading.current_thread() is threading.main_thread()


def test_the_audit_writer_thread_blocks_the_process_signals(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.db", "batched")
    try:
        writer = next(t for t in threading.enumerate() if t.name == "toolcards-audit")
        status = Path(f"/proc/self/task/{writer.native_id}/status").read_text()
        blocked = int(
            next(x for x in status.splitlines() if x.startswith("SigBlk:")).split()[1], 16
        )
        assert all(blocked & (1 << (sig - 1)) for sig in PROCESS_SIGNALS)
    finally:
        log.close()
