"""The team-level exec service: owns the backend choice, the concurrency cap and the jobs.

One service exists per (team, settings) in a process-level registry guarded by a lock, so
every agent of a team shares one backend and one cap. The registry holds services weakly: a
service lives while a bound tool (or a running job) holds it, and once none does its threads
end and its entry goes, so a long-lived host that starts and stops many teams keeps none of
their threads. Commands run on the caller's thread
(:meth:`ExecService.run`), on a call thread awaited by a coroutine (:meth:`run_async`, which
kills the command when the coroutine is cancelled), or on the job pool; a slot semaphore
bounds how many run at once, and nothing is serialized on an actor thread. Each caller may
have at most ``max_concurrent`` jobs running or queued, so one member's backlog cannot hold
the slots of the rest of the team for more than one timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from toolcards.core.errors import RetriableError
from toolcards.core.threads import leave_signals_to_the_main_thread
from toolcards.tools.exec import runner
from toolcards.tools.exec.backends import (
    Backend,
    BackendUnavailable,
    Mode,
    SandboxSpec,
    select_backend,
)
from toolcards.tools.exec.cgroups import process_cap_method, user_task_count
from toolcards.tools.exec.command import parse_command
from toolcards.tools.exec.limits import ExecLimits
from toolcards.tools.exec.result import ExecResult
from toolcards.tools.exec.watch import Cancel

MAX_JOBS = 256
"""Jobs the team's service remembers (running, queued, or finished and not yet forgotten)."""
SLOT_WAIT_S = 30.0
"""How long a call waits for a free slot beyond its own timeout before reporting busy."""
CANCEL_REAP_S = 10.0
"""How long a cancelled coroutine waits for its command to be killed and reaped."""
CALL_THREADS = 32


@dataclass(frozen=True)
class ExecSettings:
    """What decides how commands run (hashable: it keys the team registry)."""

    mode: Mode = "auto"
    timeout_s: float = 60.0
    limits: ExecLimits = field(default_factory=ExecLimits)
    allowed_commands: tuple[str, ...] | None = None
    env_allow: tuple[str, ...] = ()
    network: bool = False
    max_concurrent: int = 4
    docker_image: str | None = None


@dataclass(frozen=True)
class Job:
    """A command started in the background, and who started it."""

    argv: list[str]
    future: Future[ExecResult]
    caller: str


class ExecService:
    """Runs validated commands on one backend, at most ``max_concurrent`` at a time."""

    def __init__(self, settings: ExecSettings, backend: Backend | None = None) -> None:
        self.settings = settings
        self.backend = backend or select_backend(settings.mode, docker_image=settings.docker_image)
        self.process_cap = "container"
        if self.backend.uses_pids_group():
            self.process_cap = process_cap_method(settings.limits)
            if self.process_cap == "none" and settings.limits.max_processes is not None:
                raise BackendUnavailable(
                    "limits.max_processes cannot be enforced here: running as root (where "
                    "RLIMIT_NPROC does not apply) without a writable pids cgroup. Run as a "
                    "non-root user, delegate a pids cgroup, or set limits.max_processes=None."
                )
        self._slots = threading.BoundedSemaphore(settings.max_concurrent)
        self._pool = ThreadPoolExecutor(
            settings.max_concurrent,
            thread_name_prefix="toolcards-exec",
            initializer=leave_signals_to_the_main_thread,
        )
        self._calls = ThreadPoolExecutor(
            CALL_THREADS,
            thread_name_prefix="toolcards-exec-call",
            initializer=leave_signals_to_the_main_thread,
        )
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()

    # ---- commands ------------------------------------------------------------------------

    def parse(self, command: object) -> list[str]:
        """Validated argv for ``command`` (RetriableError when the model must fix it)."""
        return parse_command(command, self.settings.allowed_commands)

    def run(self, command: object, workspace: Path, cancel: Cancel | None = None) -> ExecResult:
        """Run ``command`` in ``workspace`` and wait for it (bounded by the timeout).

        Setting ``cancel`` (from any thread) kills the command; the result says ``cancelled``.
        """
        return self._run_argv(self.parse(command), workspace, cancel)

    async def run_async(self, command: object, workspace: Path) -> ExecResult:
        """:meth:`run` for coroutines: cancelling the awaiting task kills the command (its
        whole process tree) before the cancellation propagates."""
        argv = self.parse(command)
        cancel = Cancel()
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(self._calls, self._run_closing, argv, workspace, cancel)
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            cancel.set()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(call), CANCEL_REAP_S)
            raise

    def _run_closing(self, argv: list[str], workspace: Path, cancel: Cancel) -> ExecResult:
        try:
            return self._run_argv(argv, workspace, cancel)
        finally:
            cancel.close()

    def start(self, command: object, workspace: Path, caller: str = "user") -> str:
        """Start ``command`` in the background for ``caller``; returns a job id for
        :meth:`result`. A caller with ``max_concurrent`` unfinished jobs is refused: before,
        one member queued 256 and the team's other members waited about an hour for a slot."""
        argv = self.parse(command)
        with self._lock:
            cap = self.settings.max_concurrent
            if self._unfinished(caller) >= cap:
                raise RetriableError(f"at most {cap} of your jobs may run or wait; wait for one")
            if len(self._jobs) >= MAX_JOBS:
                done = [k for k, j in self._jobs.items() if j.future.done()]
                if not done:
                    raise RetriableError(f"{MAX_JOBS} jobs are still running; wait for some")
                del self._jobs[done[0]]
            job_id = uuid.uuid4().hex[:12]
            future = self._pool.submit(self._run_argv, argv, workspace)
            self._jobs[job_id] = Job(argv, future, caller)
        return job_id

    def _unfinished(self, caller: str) -> int:
        """Jobs of ``caller`` running or waiting for a slot (hold the lock)."""
        return sum(1 for j in self._jobs.values() if j.caller == caller and not j.future.done())

    def result(
        self, job_id: object, wait_s: float = 0.0, caller: str = "user"
    ) -> ExecResult | None:
        """The result of ``caller``'s job, or None while it is still running (after waiting
        ``wait_s``)."""
        future, wait = self._job(job_id, wait_s, caller)
        with contextlib.suppress(TimeoutError):
            future.result(timeout=wait)
        return future.result() if future.done() else None

    async def result_async(
        self, job_id: object, wait_s: float = 0.0, caller: str = "user"
    ) -> ExecResult | None:
        """:meth:`result` for coroutines (cancelling the wait leaves the job running)."""
        future, wait = self._job(job_id, wait_s, caller)
        if not future.done() and wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), wait)
        return future.result() if future.done() else None

    def _job(self, job_id: object, wait_s: object, caller: str) -> tuple[Future[ExecResult], float]:
        """The future of ``caller``'s job ``job_id``; another caller's job is unknown, with the
        same message. Its id is no secret: the audit rows of its owner's calls name it, and
        before, another principal of the team read the job's output with it."""
        if isinstance(wait_s, bool) or not isinstance(wait_s, int | float) or wait_s != wait_s:
            raise RetriableError("wait_s must be a number of seconds")
        if not isinstance(job_id, str):
            raise RetriableError(f"job_id must be a string, got {type(job_id).__name__}")
        with self._lock:
            found = self._jobs.get(job_id.strip())
        if found is None or found.caller != caller:
            raise RetriableError(f"unknown job id {job_id!r}; exec_start returns the id")
        return found.future, max(0.0, min(float(wait_s), self.settings.timeout_s))

    def close(self) -> None:
        """Stop accepting jobs; running ones finish within their timeout."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._calls.shutdown(wait=False)

    # ---- internals ---------------------------------------------------------------------------

    def _run_argv(
        self, argv: list[str], workspace: Path, cancel: Cancel | None = None
    ) -> ExecResult:
        s = self.settings
        if not self._acquire_slot(s.timeout_s + SLOT_WAIT_S, cancel):
            if cancel is not None and cancel.is_set:
                return ExecResult(
                    argv=argv,
                    backend=self.backend.name,
                    exit_code=None,
                    stdout="",
                    stderr="",
                    killed="cancelled",
                )
            raise RetriableError("every exec slot is busy; try again shortly")
        try:
            spec = SandboxSpec(
                tracked=self.process_cap == "cgroup",
                workspace=workspace,
                env=self.env(),
                network=s.network,
                limits=s.limits,
            )
            launch = self.backend.launch(argv, spec)
            return runner.run(
                launch,
                display_argv=argv,
                backend=self.backend.name,
                timeout_s=s.timeout_s,
                limits=s.limits,
                process_cap=self.process_cap,
                nproc_offset=self._nproc_offset(),
                cancel=cancel,
                workspace=workspace,
            )
        finally:
            self._slots.release()

    def _acquire_slot(self, timeout: float, cancel: Cancel | None) -> bool:
        """Take a slot within ``timeout`` (True), giving up early when cancelled."""
        if cancel is None:
            return self._slots.acquire(timeout=timeout)
        deadline = time.monotonic() + timeout
        while not cancel.is_set:
            if self._slots.acquire(timeout=min(0.05, max(0.0, deadline - time.monotonic()))):
                return True
            if time.monotonic() >= deadline:
                return False
        return False

    def _nproc_offset(self) -> int:
        if self.process_cap != "rlimit" or self.backend.private_user_namespace:
            return 0
        return user_task_count()

    def env(self) -> dict[str, str]:
        """The host environment reduced to ``env_allow`` (plus a UTF-8 locale default)."""
        env = {k: os.environ[k] for k in self.settings.env_allow if k in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        return env


_REGISTRY: weakref.WeakValueDictionary[tuple[str, ExecSettings], ExecService] = (
    weakref.WeakValueDictionary()
)
_REGISTRY_LOCK = threading.Lock()


def service_for(team: str, settings: ExecSettings) -> ExecService:
    """The team's service for ``settings`` (atomic get-or-create)."""
    with _REGISTRY_LOCK:
        found = _REGISTRY.get((team, settings))
        if found is None:
            found = _REGISTRY[(team, settings)] = ExecService(settings)
        return found


def reset_services() -> None:
    """Forget every service (tests, or after changing the host's sandbox setup)."""
    with _REGISTRY_LOCK:
        for service in list(_REGISTRY.values()):
            service.close()
        _REGISTRY.clear()
