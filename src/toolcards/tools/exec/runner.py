"""Run one launch plan under limits: timeout, cancel, process-group kill, bounded output."""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from toolcards.core.errors import RetriableError
from toolcards.tools.exec.cgroups import POOL, PidsGroup
from toolcards.tools.exec.launch import Gate, Launch
from toolcards.tools.exec.limits import BoundedOutput, ExecLimits, rlimit_plan
from toolcards.tools.exec.result import ExecResult, KillReason
from toolcards.tools.exec.spawn import adopts_orphans, reap_orphan, start
from toolcards.tools.exec.watch import Cancel, WorkspaceGrowth, job_processes

_MEMORY_HINTS = ("MemoryError", "Cannot allocate memory", "bad_alloc", "out of memory")
DRAIN_GRACE_S = 0.5
"""After the command exits, how long to keep reading pipes held open by leftovers."""
KILL_WAIT_S = 30.0
"""How long to wait for a SIGKILLed command to be reaped (it only lingers in D state)."""
_CANCEL = object()

__all__ = ["Gate", "Launch", "run"]


def run(
    launch: Launch,
    *,
    display_argv: Sequence[str],
    backend: str,
    timeout_s: float,
    limits: ExecLimits,
    process_cap: str,
    nproc_offset: int = 0,
    cancel: Cancel | None = None,
    workspace: Path | None = None,
) -> ExecResult:
    """Run ``launch`` to completion, until ``timeout_s`` or until ``cancel`` is set; nothing
    it started survives.

    ``process_cap`` says how ``limits.max_processes`` is enforced (``cgroup``, ``rlimit``,
    ``container`` or ``none``); a cgroup that cannot be created refuses the run. With
    ``rlimit``, RLIMIT_NPROC is ``max_processes + nproc_offset`` (the user's processes that
    already count against it, when the command shares their user namespace). ``workspace``,
    with ``limits.workspace_write_bytes``, is watched for growth while the command runs.
    """
    group = None
    if launch.host_limits and process_cap == "cgroup" and limits.max_processes is not None:
        group = POOL.take(limits.max_processes)
        if group is None:
            _discard(launch)
            raise RetriableError("could not set up the process limit for this command; retry")
    nproc = None
    if process_cap == "rlimit" and limits.max_processes is not None:
        nproc = limits.max_processes + nproc_offset
    plan = rlimit_plan(limits, nproc) if launch.host_limits else []
    watch = None
    if workspace is not None and limits.workspace_write_bytes is not None:
        watch = WorkspaceGrowth(workspace, limits.workspace_write_bytes)
    out, err = BoundedOutput(limits.output_bytes), BoundedOutput(limits.output_bytes)
    begin = time.monotonic()
    stopped: KillReason | None = None
    try:
        if cancel is not None and cancel.is_set:
            launch.close_passed()
            return _result(display_argv, backend, None, out, err, "cancelled", begin)
        try:
            proc = start(launch, plan, group)
        except OSError as exc:  # the program (or the sandbox tool) could not be started
            return ExecResult(
                argv=list(display_argv),
                backend=backend,
                exit_code=127,
                stdout="",
                stderr=f"{display_argv[0]}: cannot run: {exc.strerror or exc}",
            )
        if watch is not None:  # whose unnamed files count
            watch.members = group.pids if group is not None else partial(job_processes, proc.pid)
        try:
            stopped = _pump(proc, out, err, begin + timeout_s, cancel, watch)
        finally:
            _kill_tree(proc, group if stopped else None, launch.on_kill if stopped else None)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=KILL_WAIT_S)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    finally:
        if launch.gate is not None:
            launch.gate.close()
            if launch.gate.child is not None and adopts_orphans():
                reap_orphan(launch.gate.child)
        if group is not None:
            POOL.give(group)
        for step in launch.cleanup:
            with contextlib.suppress(Exception):
                step()
    result = _result(display_argv, backend, proc.returncode, out, err, stopped, begin)
    if stopped is None:
        killed = _kill_reason(proc.returncode, err, limits, launch.sigkill_is_oom)
        warning = None
        if watch is not None and watch.exceeded(begin + timeout_s):
            warning = watch.overrun()
        result = result.model_copy(update={"killed": killed, "warning": warning})
    return result


def _result(
    argv: Sequence[str],
    backend: str,
    code: int | None,
    out: BoundedOutput,
    err: BoundedOutput,
    stopped: KillReason | None,
    begin: float,
) -> ExecResult:
    return ExecResult(
        argv=list(argv),
        backend=backend,
        exit_code=None if stopped else code,
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        killed=stopped,
        duration_s=round(time.monotonic() - begin, 4),
    )


def _discard(launch: Launch) -> None:
    """Release what a launch plan holds when it will never start."""
    launch.close_passed()
    if launch.gate is not None:
        launch.gate.close()
    for step in launch.cleanup:
        with contextlib.suppress(Exception):
            step()


def _pump(
    proc: subprocess.Popen[bytes],
    out: BoundedOutput,
    err: BoundedOutput,
    deadline: float,
    cancel: Cancel | None,
    watch: WorkspaceGrowth | None,
) -> KillReason | None:
    """Read both pipes until EOF; the reason to stop early (timeout, cancel, disk), if any."""
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, out)
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, err)
    if cancel is not None:
        sel.register(cancel.fileno(), selectors.EVENT_READ, _CANCEL)
    streams = 2
    drain_until: float | None = None
    try:
        while streams:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if watch is not None and now >= watch.next_check and watch.exceeded(deadline):
                return "disk"
            if drain_until is None and proc.poll() is not None:
                drain_until = now + DRAIN_GRACE_S
            if drain_until is not None and now >= drain_until:
                return None
            wait = min(deadline, drain_until or deadline) - now
            if watch is not None:
                wait = min(wait, max(0.0, watch.next_check - now))
            for key, _ in sel.select(timeout=min(wait, 0.25)):
                if key.data is _CANCEL:
                    return "cancelled"
                chunk = os.read(key.fd, 65536)
                if chunk:
                    key.data.feed(chunk)
                else:
                    sel.unregister(key.fd)
                    streams -= 1
        return _wait_exit(proc, deadline, cancel)
    finally:
        sel.close()


def _wait_exit(
    proc: subprocess.Popen[bytes], deadline: float, cancel: Cancel | None
) -> KillReason | None:
    """Both pipes are closed: wait for the exit status (bounded by the deadline and cancel).

    Waits on a pidfd where there is one: ``Popen.wait(timeout)`` polls with sleeps, which
    would add up to a millisecond to every command."""
    if proc.poll() is not None:
        return None
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return _poll_exit(proc, deadline, cancel)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if cancel is not None:
            poller.register(cancel.fileno(), select.POLLIN)
        while proc.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            ready = poller.poll(remaining * 1000)
            if cancel is not None and any(fd == cancel.fileno() for fd, _ in ready):
                return "cancelled"
        return None
    finally:
        os.close(pidfd)


def _poll_exit(
    proc: subprocess.Popen[bytes], deadline: float, cancel: Cancel | None
) -> KillReason | None:
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout" if proc.poll() is None else None
        if cancel is not None and cancel.is_set:
            return "cancelled"
        try:
            proc.wait(timeout=min(remaining, 0.1))
            return None
        except subprocess.TimeoutExpired:
            continue


def _kill_tree(
    proc: subprocess.Popen[bytes], group: PidsGroup | None, on_kill: Callable[[int], None] | None
) -> None:
    """Kill the command's process group (and its pids cgroup) whatever happened."""
    if on_kill is not None:
        with contextlib.suppress(Exception):
            on_kill(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if group is not None:
        group.kill_all()


def _kill_reason(
    code: int | None, err: BoundedOutput, limits: ExecLimits, oom: bool
) -> KillReason | None:
    if code is None or code == 0:
        return None
    sig = -code if code < 0 else code - 128 if 128 < code < 160 else 0
    if sig == signal.SIGXCPU:
        return "cpu"
    stderr = bytes(err.head + err.tail)
    if sig == signal.SIGXFSZ or (
        limits.file_size_bytes is not None and b"File too large" in stderr
    ):
        return "file_size"
    if limits.memory_bytes is not None and any(h.encode() in stderr for h in _MEMORY_HINTS):
        return "memory"
    if oom and sig == signal.SIGKILL and limits.memory_bytes is not None:
        return "memory"
    return "signal" if sig > 0 else None
