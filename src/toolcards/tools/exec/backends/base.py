"""The backend interface: turn a parsed argv into a launch plan for the runner."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from toolcards.core.errors import ToolcardsError
from toolcards.tools.exec.launch import Launch
from toolcards.tools.exec.limits import ExecLimits

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class BackendUnavailable(ToolcardsError, RuntimeError):
    """The requested backend cannot run here; the message says why and what to do."""


@dataclass(frozen=True)
class SandboxSpec:
    """Everything a backend needs to know about one command run."""

    workspace: Path
    env: dict[str, str]
    """The scrubbed environment (allowlisted variables only); backends add HOME/TMPDIR."""
    network: bool
    limits: ExecLimits
    tracked: bool = False
    """True when a pids cgroup holds every process of the command (nothing can escape it)."""


class Backend(ABC):
    """One way of running commands. Subclasses only build argv; the runner enforces limits."""

    name: ClassVar[str]
    isolating: ClassVar[bool] = True
    private_user_namespace: ClassVar[bool] = False
    """True when commands run in their own user namespace (RLIMIT_NPROC counts them alone)."""
    workdir: ClassVar[str | None] = "/workspace"
    """Where the workspace appears to the command (None: at its real path)."""

    @classmethod
    @abstractmethod
    def unavailable_reason(cls) -> str | None:
        """None when the backend works on this host, else why not (cheap, may probe)."""

    @abstractmethod
    def launch(self, argv: Sequence[str], spec: SandboxSpec) -> Launch:
        """The launch plan for ``argv`` (already validated) under ``spec``."""

    def describe(self, network: bool) -> str:
        """One line for the tool description: what confinement the model is under."""
        net = "network enabled" if network else "no network"
        return (
            f"sandboxed ({self.name}): only the workspace and a private temporary directory "
            f"are writable, {net}"
        )

    def uses_pids_group(self) -> bool:
        """Whether the runner should put the launched process tree in a pids cgroup."""
        return True


def visible_workdir(backend: Backend, spec: SandboxSpec) -> str:
    """The workspace path as the command sees it."""
    return backend.workdir or str(spec.workspace)
