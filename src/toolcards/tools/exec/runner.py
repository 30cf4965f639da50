"""Run one launch plan under limits: timeout, process-group kill, bounded output."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from toolcards.core.errors import RetriableError
from toolcards.tools.exec.limits import BoundedOutput, ExecLimits, PidsGroup, preexec
from toolcards.tools.exec.result import ExecResult, KillReason

_MEMORY_HINTS = ("MemoryError", "Cannot allocate memory", "bad_alloc", "out of memory")
DRAIN_GRACE_S = 0.5
"""After the command exits, how long to keep reading pipes held open by leftovers."""
KILL_WAIT_S = 30.0
"""How long to wait for a SIGKILLed command to be reaped (it only lingers in D state)."""


@dataclass
class Launch:
    """What a backend decided to execute for one command."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    on_kill: Callable[[int], None] | None = None
    """Extra teardown (given the launched pid) before the process group is killed."""
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    """Always run after the command, killed or not (temporary directories, ...)."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the command inherits (e.g. bwrap's seccomp program); closed after launch."""
    sigkill_is_oom: bool = False
    """A SIGKILL status means the memory limit was hit (container OOM killer)."""


def run(
    launch: Launch,
    *,
    display_argv: Sequence[str],
    backend: str,
    timeout_s: float,
    limits: ExecLimits,
    process_cap: str,
    nproc_offset: int = 0,
) -> ExecResult:
    """Run ``launch`` to completion or until ``timeout_s``; nothing it started survives.

    ``process_cap`` says how ``limits.max_processes`` is enforced (``cgroup``, ``rlimit``,
    ``container`` or ``none``); a cgroup that cannot be created refuses the run. With
    ``rlimit``, RLIMIT_NPROC is ``max_processes + nproc_offset`` (the user's processes that
    already count against it, when the command shares their user namespace).
    """
    group = None
    if process_cap == "cgroup" and limits.max_processes is not None:
        group = PidsGroup.create(limits.max_processes)
        if group is None:
            raise RetriableError("could not set up the process limit for this command; retry")
    nproc = None
    if process_cap == "rlimit" and limits.max_processes is not None:
        nproc = limits.max_processes + nproc_offset
    out, err = BoundedOutput(limits.output_bytes), BoundedOutput(limits.output_bytes)
    start = time.monotonic()
    timed_out = False
    try:
        try:
            proc = subprocess.Popen(
                launch.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=launch.cwd,
                env=launch.env,
                start_new_session=True,
                close_fds=True,
                pass_fds=launch.pass_fds,
                preexec_fn=preexec(
                    limits, group, nproc
                ),  # the child only calls setrlimit and write
            )
        except OSError as exc:  # the program (or the sandbox tool) could not be started
            return ExecResult(
                argv=list(display_argv),
                backend=backend,
                exit_code=127,
                stdout="",
                stderr=f"{display_argv[0]}: cannot run: {exc.strerror or exc}",
            )
        try:
            timed_out = _pump(proc, out, err, start + timeout_s)
        finally:
            _kill_tree(proc, group, launch.on_kill if timed_out else None)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=KILL_WAIT_S)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    finally:
        for fd in launch.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if group is not None:
            group.close()
        for step in launch.cleanup:
            with contextlib.suppress(Exception):
                step()
    code = proc.returncode
    return ExecResult(
        argv=list(display_argv),
        backend=backend,
        exit_code=None if timed_out else code,
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        killed=_kill_reason(timed_out, code, err, limits, launch.sigkill_is_oom),
        duration_s=round(time.monotonic() - start, 4),
    )


def _pump(
    proc: subprocess.Popen[bytes], out: BoundedOutput, err: BoundedOutput, deadline: float
) -> bool:
    """Read both pipes until EOF; True when the deadline passed first."""
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, out)
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, err)
    drain_until: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                return True
            if drain_until is None and proc.poll() is not None:
                drain_until = now + DRAIN_GRACE_S
            if drain_until is not None and now >= drain_until:
                return False
            wait = min(deadline, drain_until or deadline) - now
            for key, _ in sel.select(timeout=min(wait, 0.25)):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    key.data.feed(chunk)
                else:
                    sel.unregister(key.fd)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return proc.poll() is None
        try:
            proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            return True
        return False
    finally:
        sel.close()


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
    timed_out: bool, code: int | None, err: BoundedOutput, limits: ExecLimits, oom: bool
) -> KillReason | None:
    if timed_out:
        return "timeout"
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
