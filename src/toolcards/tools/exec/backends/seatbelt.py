"""seatbelt: macOS ``sandbox-exec`` with a deny-by-default profile."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Sequence
from functools import partial
from typing import ClassVar

from toolcards.tools.exec.backends.base import DEFAULT_PATH, Backend, SandboxSpec
from toolcards.tools.exec.launch import Launch

READABLE = (
    "/usr",
    "/bin",
    "/sbin",
    "/System",
    "/Library",
    "/opt/homebrew",
    "/private/etc",
    "/private/var/db/dyld",
    "/dev",
)


def profile(*, network: bool) -> str:
    """The SBPL profile. Paths that vary arrive as ``-D`` parameters, never spliced in."""
    reads = " ".join(f'(subpath "{p}")' for p in READABLE)
    lines = [
        "(version 1)",
        "(deny default)",
        "(allow process-exec process-fork)",
        "(allow signal (target same-sandbox))",
        "(allow sysctl-read)",
        '(allow file-read-metadata (literal "/"))',
        f"(allow file-read* {reads})",
        '(allow file-read* file-write* (subpath (param "WORKSPACE")) (subpath (param "TMP")))',
        '(allow file-write* (literal "/dev/null"))',
    ]
    if network:
        lines.append("(allow network*)")
        lines.append("(allow system-socket)")
    return "\n".join(lines) + "\n"


class SeatbeltBackend(Backend):
    """Runs each command under ``sandbox-exec`` (macOS)."""

    name: ClassVar[str] = "seatbelt"
    executable: ClassVar[str] = "sandbox-exec"
    workdir: ClassVar[str | None] = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if sys.platform != "darwin":
            return "seatbelt (sandbox-exec) exists only on macOS"
        if shutil.which(cls.executable) is None:
            return "sandbox-exec is not on PATH"
        return None

    def launch(self, argv: Sequence[str], spec: SandboxSpec) -> Launch:
        tmp = tempfile.mkdtemp(prefix="toolcards-exec-")
        env = {**spec.env, "HOME": str(spec.workspace), "TMPDIR": tmp, "PWD": str(spec.workspace)}
        env.setdefault("PATH", DEFAULT_PATH)
        return Launch(
            argv=self.argv(argv, spec, tmp),
            env=env,
            cwd=str(spec.workspace),
            cleanup=[partial(shutil.rmtree, tmp, ignore_errors=True)],
        )

    def argv(self, argv: Sequence[str], spec: SandboxSpec, tmp: str) -> list[str]:
        """The full ``sandbox-exec`` command line for ``argv``."""
        cmd = [shutil.which(self.executable) or self.executable]
        cmd += ["-p", profile(network=spec.network)]
        cmd += ["-D", f"WORKSPACE={spec.workspace}", "-D", f"TMP={tmp}"]
        return [*cmd, *argv]
