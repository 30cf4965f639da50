"""Start a launch plan with its limits, without a ``preexec_fn``.

A ``preexec_fn`` makes ``subprocess`` fork the whole interpreter instead of using vfork; on
Linux the limits are set from outside instead, with prlimit(2) and cgroup writes:

- the launched process is born in the pids cgroup when the spawning thread can stand in it
  (cgroup v1); otherwise it is moved in by pid: at the gate, or right after the start;
- a gated launch (bwrap) reports its first process and waits: it gets the rlimits (and, on
  cgroup v2, joins the group) before it runs anything, so there is no window;
- an ungated launch (local) is held the same way: it starts as a ``/bin/sh`` that waits for
  one line on its stdin, gets its rlimits (and its cgroup), and is then told to ``exec`` the
  command with stdin from ``/dev/null`` (the pid stays the same; before, the command ran
  unlimited until the limits were set after the start, long enough on a loaded machine for
  a 2 GiB allocation under a 256 MiB address-space limit to succeed).

Elsewhere (macOS), the ``preexec_fn`` fallback applies the limits in the child.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shlex
import shutil
import signal
import subprocess
import time
from contextlib import AbstractContextManager

from toolcards.core.errors import RetriableError
from toolcards.tools.exec.cgroups import PidsGroup
from toolcards.tools.exec.launch import Launch
from toolcards.tools.exec.limits import CAN_PRLIMIT, RlimitPlan, apply_rlimits, preexec

GATE_WAIT_S = 30.0
"""How long a gated sandbox may take to report its first process."""
KILL_REAP_S = 5.0
HOLD_NAME = "toolcards-exec"
"""The held shell's ``$0`` (the name its own errors carry)."""


def hold_argv(launch: Launch) -> list[str]:
    """An ungated launch's argv: a shell that runs the command once told ``go``, with the
    environment as given (the shell's own ``PWD`` is taken out, or set back as given)."""
    pwd = launch.env.get("PWD")
    keep = "" if pwd is None else f"export PWD={shlex.quote(pwd)}; "
    script = f'IFS= read -r go && [ "$go" = go ] || exit 125; unset PWD; {keep}exec "$@" </dev/null'
    return ["/bin/sh", "-c", script, HOLD_NAME, *launch.argv]


def start(launch: Launch, plan: RlimitPlan, group: PidsGroup | None) -> subprocess.Popen[bytes]:
    """Start ``launch`` with ``plan`` and ``group`` applied to it; raises OSError when the
    program cannot start and RetriableError when a limit could not be applied (the command
    was killed before it ran)."""
    fallback = None
    if not CAN_PRLIMIT and (plan or group is not None):
        fallback = preexec(plan, group.procs if group is not None else None)
    inside: AbstractContextManager[bool] = contextlib.nullcontext(False)
    if CAN_PRLIMIT and group is not None:
        inside = group.spawning_thread()
    held = CAN_PRLIMIT and launch.gate is None and bool(plan or group is not None)
    argv = hold_argv(launch) if held else launch.argv
    try:
        if held:
            _check_runnable(launch)
        with inside as born_inside:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if held else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=launch.cwd,
                env=launch.env,
                # a session of its own: no controlling terminal to read or type into (a
                # shared one let a command take the foreground and read the operator's input)
                start_new_session=True,
                close_fds=True,
                pass_fds=launch.pass_fds,
                preexec_fn=fallback,
            )
    finally:
        launch.close_passed()
    if fallback is not None or not CAN_PRLIMIT:
        return proc
    target = None
    try:
        target = _target(proc, launch)
        if target is None:  # the sandbox died (or hung) before its first process reported
            _kill(proc, None)
        else:
            apply_rlimits(target, plan)
            if group is not None and not born_inside:
                group.add(target)
            if launch.gate is not None:
                launch.gate.release()
            if held:
                _release(proc)
    except ProcessLookupError:
        pass  # it already ended: nothing left to limit; the runner reports its status
    except OSError as exc:
        _kill(proc, target, reap=True)
        raise RetriableError(f"could not apply the limits to this command ({exc}); retry") from None
    except BaseException:
        _kill(proc, target, reap=True)
        raise
    return proc


def _check_runnable(launch: Launch) -> None:
    """Raise the OSError starting ``launch.argv`` directly would raise for a program that is
    missing or not executable (the held shell would only print it)."""
    program = launch.argv[0]
    if os.sep in program:
        found = os.path.join(launch.cwd, program)
        if not os.path.isfile(found):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if not os.access(found, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    elif shutil.which(program, path=os.pathsep.join(os.get_exec_path(launch.env))) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _release(proc: subprocess.Popen[bytes]) -> None:
    """Tell a held launch to run its command (it has its limits now)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()


def _target(proc: subprocess.Popen[bytes], launch: Launch) -> int | None:
    """The process the limits go on: the one the gate reports, else the started one."""
    if launch.gate is None:
        return proc.pid
    return launch.gate.pid(time.monotonic() + GATE_WAIT_S)


def _kill(proc: subprocess.Popen[bytes], target: int | None, reap: bool = False) -> None:
    """Kill a command that must not run (its limits are missing) before anything is released;
    ``reap``: also collect it and close its pipes (the runner will not see it)."""
    for pid in (target, proc.pid):
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if reap:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=KILL_REAP_S)


PR_GET_CHILD_SUBREAPER = 37


@functools.cache
def adopts_orphans() -> bool:
    """True when orphaned descendants of this process become its children: it is PID 1 (a
    container without an init) or a child subreaper."""
    if os.getpid() == 1:
        return True
    try:
        import ctypes  # lazy: ctypes; only when not PID 1

        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
            return False
        return flag.value != 0
    except (OSError, AttributeError):
        return False


def reap_orphan(pid: int, wait_s: float = 0.2) -> None:
    """Collect ``pid`` when it was orphaned to this process (a sandbox's init outlives the
    sandbox process that started it by an instant); nothing else ever waits for it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not ours, or already collected
            return
        if done or time.monotonic() >= deadline:
            return
        time.sleep(0.002)
