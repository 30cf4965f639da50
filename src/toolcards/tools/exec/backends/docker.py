"""docker: one throw-away container per command, no network, read-only root, non-root user."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Sequence
from typing import ClassVar

from toolcards.tools.exec.backends.base import Backend, BackendUnavailable, SandboxSpec
from toolcards.tools.exec.launch import Launch

DEFAULT_IMAGE = "python:3.12-slim"
NOBODY = "65534:65534"
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")
"""An image reference (``[registry[:port]/]name[:tag][@digest]``): never an option."""


def check_image(image: str) -> str:
    """``image`` when it is an image reference; ValueError otherwise (``docker run`` would
    read ``--volume=/:/host`` in the image's place as one of its own options)."""
    if not _IMAGE.fullmatch(image):
        raise ValueError(
            f"docker image {image!r:.80} must be an image reference such as "
            f"{DEFAULT_IMAGE!r} (letters, digits and . _ / : @ -, not starting with '-')"
        )
    return image


def default_user() -> str:
    """The host user's ids (so workspace files stay theirs), or nobody when that is root."""
    uid, gid = os.getuid(), os.getgid()
    return NOBODY if uid == 0 else f"{uid}:{gid}"


class DockerBackend(Backend):
    """Runs each command with ``docker run --rm`` under tight flags."""

    name: ClassVar[str] = "docker"
    executable: ClassVar[str] = "docker"

    def __init__(self, image: str = DEFAULT_IMAGE, user: str | None = None) -> None:
        user = user or default_user()
        if user.split(":", 1)[0] in {"0", "root", ""}:
            raise ValueError("the docker backend never runs commands as root")
        self.image = check_image(image)
        self.user = user

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return _probe(shutil.which(cls.executable))

    def launch(self, argv: Sequence[str], spec: SandboxSpec) -> Launch:
        name = f"toolcards-exec-{uuid.uuid4().hex[:12]}"
        docker = shutil.which(self.executable) or self.executable

        def kill(pid: int) -> None:
            subprocess.run([docker, "kill", name], capture_output=True, timeout=15, check=False)

        # values travel in the client's environment, never on its command line
        return Launch(
            argv=self.argv(argv, spec, name),
            env=dict(spec.env),
            cwd="/",
            on_kill=kill,
            sigkill_is_oom=True,  # `docker run` exits 137 when the container's OOM killer fired
            host_limits=False,  # limits are docker flags; the client itself needs none
        )

    def argv(self, argv: Sequence[str], spec: SandboxSpec, name: str) -> list[str]:
        """The full ``docker run`` command line for ``argv``."""
        source = str(spec.workspace)
        if any(c in source for c in ',"'):
            raise BackendUnavailable(f"workspace path {source!r} cannot be mounted by docker")
        lim = spec.limits
        cmd = [shutil.which(self.executable) or self.executable, "run", "--rm", "--name", name]
        cmd += ["--network", "bridge" if spec.network else "none"]
        cmd += ["--read-only", "--user", self.user, "--cap-drop", "ALL"]
        cmd += ["--security-opt", "no-new-privileges", "--ipc", "private"]
        tmp, shm = spec.limits.tmpfs_sizes()
        cmd += ["--tmpfs", f"/tmp:rw,nosuid,nodev,size={tmp}", "--shm-size", str(shm)]
        cmd += ["--mount", f"type=bind,source={source},target=/workspace"]
        cmd += ["--workdir", "/workspace", "--cpus", str(lim.cpus)]
        if lim.memory_bytes is not None:
            cmd += ["--memory", str(lim.memory_bytes), "--memory-swap", str(lim.memory_bytes)]
        if lim.max_processes is not None:
            cmd += ["--pids-limit", str(lim.max_processes)]
        if lim.cpu_seconds is not None:
            cmd += ["--ulimit", f"cpu={lim.cpu_seconds}:{lim.cpu_seconds + 1}"]
        if lim.file_size_bytes is not None:
            cmd += ["--ulimit", f"fsize={lim.file_size_bytes}"]
        cmd += ["--ulimit", f"nofile={lim.open_files}:{lim.open_files}"]
        cmd += ["--ulimit", "msgqueue=0:0"]  # the host user's queue quota, as in rlimit_plan
        cmd += ["--env", "HOME=/workspace", "--env", "TMPDIR=/tmp"]
        for key in sorted(spec.env):
            if key not in {"HOME", "TMPDIR"}:
                cmd += ["--env", key]
        return [*cmd, self.image, *argv]

    def uses_pids_group(self) -> bool:
        return False  # the container has its own pids limit; the client needs none


@functools.cache
def _probe(executable: str | None) -> str | None:
    if executable is None:
        return "docker is not installed"
    try:
        done = subprocess.run(
            [executable, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the docker daemon does not answer: {exc}"
    if done.returncode != 0 or not done.stdout.strip():
        detail = done.stderr.decode(errors="replace").strip()[:300]
        return f"the docker daemon does not answer: {detail or done.returncode}"
    return None
