"""ExecTool: sandboxed command execution in the team workspace.

Security model, in short:

- **Fail closed.** ``mode="auto"`` uses bwrap (Linux), seatbelt (macOS) or docker (a daemon
  answers) and raises :class:`BackendUnavailable` when none works; it never runs unconfined.
  ``mode="local"`` is unconfined, used only when chosen, and its tool description says so.
- **No implicit shell.** Commands are split with shell quoting rules and executed directly.
  ``allowed_commands`` names the programs a command may start with (by default
  ``DEFAULT_ALLOWED_COMMANDS``: file readers, Python build tools, read-only git subcommands;
  ``"any"`` only when chosen; a shell as the first word only when listed); what a started
  program runs in turn is bounded by the sandbox, which is the boundary, not the list.
- **Limits everywhere.** Wall-clock timeout and cancellation (the process group, the pids
  cgroup, the bwrap PID namespace or the container is killed), RLIMIT_CPU/AS/FSIZE set from
  outside (prlimit; bwrap waits at a start gate until they are set), a process cap (pids
  cgroup when writable, else RLIMIT_NPROC; refused as root without a cgroup), capped tmpfs
  mounts, a watched cap on bytes added to the workspace, head+tail output caps, and an
  environment reduced to ``env_allow``.
- **Shared, concurrent.** One service per team and configuration owns the backend choice; up
  to ``max_concurrent`` commands run at once on worker threads, never on an actor thread.
"""

from __future__ import annotations

from toolcards.tools.exec.backends import BackendUnavailable, register_backend
from toolcards.tools.exec.card import ExecCommand, ExecJobs, ExecTool
from toolcards.tools.exec.limits import ExecLimits
from toolcards.tools.exec.result import ExecResult

__all__ = [
    "BackendUnavailable",
    "ExecCommand",
    "ExecJobs",
    "ExecLimits",
    "ExecResult",
    "ExecTool",
    "register_backend",
]
