"""What one command run produced, and how the model reads it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

KillReason = Literal["timeout", "memory", "cpu", "file_size", "signal", "disk", "cancelled"]


class ExecResult(BaseModel):
    """Exit code, bounded stdout/stderr, and why the command was killed (if it was)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str]
    backend: str
    exit_code: int | None
    """The exit status; ``-N`` when the command died of signal N; None if it never finished."""
    stdout: str
    stderr: str
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    killed: KillReason | None = None
    warning: str | None = None
    """A limit the command went past without being killed (the post-run workspace check)."""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0 and was not killed."""
        return self.exit_code == 0 and self.killed is None

    def render(self) -> str:
        """The text the model reads."""
        lines = [f"exit_code: {self.exit_code}"]
        if self.killed:
            lines.append(f"killed: {self.killed}")
        if self.warning:
            lines.append(f"warning: {self.warning}")
        lines.append(f"stdout ({self.stdout_bytes} bytes):")
        lines.append(self.stdout.rstrip("\n"))
        lines.append(f"stderr ({self.stderr_bytes} bytes):")
        lines.append(self.stderr.rstrip("\n"))
        return "\n".join(lines)
