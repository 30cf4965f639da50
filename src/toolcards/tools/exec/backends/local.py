"""local: runs on the host. No isolation at all; limits and the timeout still apply."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from toolcards.tools.exec.backends.base import DEFAULT_PATH, Backend, SandboxSpec
from toolcards.tools.exec.runner import Launch


class LocalBackend(Backend):
    """Unconfined: only ever used when chosen explicitly with ``mode="local"``."""

    name: ClassVar[str] = "local"
    isolating: ClassVar[bool] = False
    workdir: ClassVar[str | None] = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    def launch(self, argv: Sequence[str], spec: SandboxSpec) -> Launch:
        env = {**spec.env, "HOME": str(spec.workspace), "PWD": str(spec.workspace)}
        env.setdefault("PATH", DEFAULT_PATH)
        return Launch(argv=list(argv), env=env, cwd=str(spec.workspace))

    def describe(self, network: bool) -> str:
        return (
            "UNCONFINED (local mode): commands run directly on the host with this process's "
            "permissions; files outside the workspace and the network are NOT protected"
        )
