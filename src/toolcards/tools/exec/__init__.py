"""ExecTool: sandboxed command execution in the team workspace."""

from __future__ import annotations

from toolcards.tools.exec.backends import BackendUnavailable
from toolcards.tools.exec.card import ExecCommand, ExecJobs, ExecTool
from toolcards.tools.exec.limits import ExecLimits
from toolcards.tools.exec.result import ExecResult

__all__ = ["BackendUnavailable", "ExecCommand", "ExecJobs", "ExecLimits", "ExecResult", "ExecTool"]
