"""bubblewrap: new namespaces, a read-only minimal system view, the workspace at /workspace."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import ClassVar

from toolcards.tools.exec.backends.base import DEFAULT_PATH, Backend, SandboxSpec
from toolcards.tools.exec.backends.etc_view import etc_view
from toolcards.tools.exec.backends.seccomp import filter_fd, setid_filter
from toolcards.tools.exec.launch import Gate, Launch
from toolcards.tools.exec.spawn import adopts_orphans, reap_orphan

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PROC_READ_ONLY = ("/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
"""Kernel-wide controls of ``/proc`` besides ``/proc/sys``, read-only where they exist (what
Docker keeps read-only in a container's ``/proc``)."""
NAMESPACES = ("--unshare-all", "--unshare-user", "--disable-userns")
"""Fresh namespaces, and none made inside (bwrap >= 0.8). Each namespace counts against the
host user's ``/proc/sys/user/max_*_namespaces``: in a user namespace of its own a command
created 96,366 UTS namespaces, and every other bwrap sandbox of that user failed (ENOSPC)."""


class BwrapBackend(Backend):
    """Runs each command in fresh namespaces with bubblewrap (Linux)."""

    name: ClassVar[str] = "bwrap"
    executable: ClassVar[str] = "bwrap"
    private_user_namespace: ClassVar[bool] = True

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return _probe(shutil.which(cls.executable))

    def launch(self, argv: Sequence[str], spec: SandboxSpec) -> Launch:
        env = {**spec.env, "HOME": "/workspace", "TMPDIR": "/tmp", "PWD": "/workspace"}
        env.setdefault("PATH", DEFAULT_PATH)
        program = setid_filter()
        fd = filter_fd(program) if program is not None else None
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        options = self.options(spec, seccomp_fd=fd, gate_fds=(info_write, block_read))
        args_fd = _options_fd(options)
        passed = (info_write, block_read, args_fd) + (() if fd is None else (fd,))
        return Launch(
            # the options (host paths: the workspace, the staged /etc) reach bwrap through a
            # descriptor, so the sandbox's init (a fork of bwrap, /proc/1/cmdline) never
            # shows them; bwrap closes the descriptor once read
            argv=[self._executable(), "--args", str(args_fd), "--", *argv],
            env=env,
            cwd=str(spec.workspace),
            pass_fds=passed,
            gate=Gate(info_fd=info_read, release_fd=block_write),
        )

    def argv(
        self,
        argv: Sequence[str],
        spec: SandboxSpec,
        seccomp_fd: int | None = None,
        gate_fds: tuple[int, int] | None = None,
    ) -> list[str]:
        """The bwrap command line for ``argv`` with every option written out (:meth:`launch`
        passes the options through a descriptor instead)."""
        options = self.options(spec, seccomp_fd=seccomp_fd, gate_fds=gate_fds)
        return [self._executable(), *options, "--", *argv]

    def _executable(self) -> str:
        return _which(self.executable, os.environ.get("PATH"))

    def options(
        self,
        spec: SandboxSpec,
        seccomp_fd: int | None = None,
        gate_fds: tuple[int, int] | None = None,
    ) -> list[str]:
        """bwrap's options for one command under ``spec``.

        ``gate_fds`` (info, block): bwrap reports the sandbox's first process on the first and
        waits for a byte on the second before it starts the command, so the runner sets the
        limits from outside first. The root, ``/dev``, the system view and the kernel-wide
        controls in ``/proc`` are read-only; ``/tmp`` and ``/dev/shm`` are tmpfs mounts capped
        by ``limits.tmp_bytes``.
        """
        cmd = list(NAMESPACES)
        if seccomp_fd is not None:
            cmd += ["--seccomp", str(seccomp_fd)]
        if gate_fds is not None:
            cmd += ["--info-fd", str(gate_fds[0]), "--block-fd", str(gate_fds[1])]
        if spec.network:
            cmd.append("--share-net")
        # No --new-session: the runner starts bwrap itself in a new session, so the sandbox has
        # no controlling terminal (/dev/tty answers ENXIO) and stays in bwrap's process group.
        cmd += ["--die-with-parent", "--cap-drop", "ALL"]
        cmd += ["--hostname", "sandbox"]
        cmd += system_view(network=spec.network)
        tmp, shm = spec.limits.tmpfs_sizes()
        cmd += [*proc_view(), "--dev", "/dev", "--size", str(shm), "--tmpfs", "/dev/shm"]
        cmd += ["--size", str(tmp), "--tmpfs", "/tmp"]
        cmd += ["--bind", str(spec.workspace), "/workspace", "--chdir", "/workspace"]
        cmd += ["--remount-ro", "/dev", "--remount-ro", "/"]
        return cmd


def _options_fd(options: Sequence[str]) -> int:
    """A memory file holding ``options`` NUL-separated, at its start (for ``--args``)."""
    fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    try:
        data = b"".join(option.encode() + b"\0" for option in options)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def system_view(*, network: bool) -> list[str]:
    """Read-only binds (or symlinks, on merged-/usr systems) of the minimal system, and the
    staged ``/etc`` (listed host files, a synthetic passwd and group) as one read-only bind."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return [*args, "--ro-bind", str(etc_view(network)), "/etc"]


def proc_view() -> list[str]:
    """A private ``/proc`` whose kernel-wide controls are read-only.

    Inside, uid 0 is the host's uid, and ``/proc/sys`` checks only the uid: when the host runs
    as root, a writable one let a command change the host kernel's settings. bwrap covers these
    itself only where access(W_OK) succeeds, which ``/proc/sys`` (mode 0555) fails. The sources
    are the host's entries: a sysctl shows the namespaces of whoever opens it, not its mount's.
    """
    args = ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    for path in PROC_READ_ONLY:
        args += ["--ro-bind-try", path, path]
    return args


@functools.lru_cache(maxsize=8)
def _which(executable: str, path: str | None) -> str:
    """``executable`` resolved on ``path`` (cached: this runs for every command)."""
    return shutil.which(executable, path=path) or executable


@functools.cache
def _probe(executable: str | None) -> str | None:
    if executable is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    cmd = [executable, *NAMESPACES, "--die-with-parent", *system_view(network=False)]
    cmd += [*proc_view(), "--dev", "/dev", "--size", str(1 << 20), "--tmpfs", "/tmp"]
    cmd += ["--remount-ro", "/"]  # also proves --size and --remount-ro work
    info, info_w = os.pipe()
    try:
        cmd += ["--info-fd", str(info_w), "--", "true"]
        done = subprocess.run(cmd, capture_output=True, timeout=10, check=False, pass_fds=[info_w])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    finally:
        os.close(info_w)
        child = Gate(info, -1).pid(time.monotonic() + 1.0)
        if child is not None and adopts_orphans():
            reap_orphan(child)  # the sandbox's init, orphaned to this process
        os.close(info)
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()[:300]
        return (
            f"bwrap cannot create the sandbox here (needs user/PID/network namespaces and "
            f"bubblewrap >= 0.8 for --disable-userns): {detail or done.returncode}"
        )
    return None
