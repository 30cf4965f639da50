"""ExecTool: sandboxed command execution in the team workspace.

Security model, in short:

- **Fail closed.** ``mode="auto"`` uses bwrap (Linux), seatbelt (macOS) or docker (a daemon
  answers) and raises :class:`BackendUnavailable` when none works; it never runs unconfined.
  ``mode="local"`` is unconfined, used only when chosen, and its tool description says so.
- **No shell.** Commands are split with shell quoting rules and executed directly; a shell
  runs only when ``allowed_commands`` names it. The first word is checked against the list.
- **Limits everywhere.** Wall-clock timeout (the process group, the pids cgroup, the bwrap
  PID namespace or the container is killed), RLIMIT_CPU/AS/FSIZE, a process cap (pids cgroup
  when writable, else RLIMIT_NPROC; refused as root without a cgroup), head+tail output caps,
  and an environment reduced to ``env_allow``.
- **Shared, concurrent.** One service per team and configuration owns the backend choice; up
  to ``max_concurrent`` commands run at once on worker threads, never on an actor thread.
"""

from __future__ import annotations

from toolcards.tools.exec.backends import BackendUnavailable
from toolcards.tools.exec.card import ExecCommand, ExecJobs, ExecTool
from toolcards.tools.exec.limits import ExecLimits
from toolcards.tools.exec.result import ExecResult

__all__ = ["BackendUnavailable", "ExecCommand", "ExecJobs", "ExecLimits", "ExecResult", "ExecTool"]
