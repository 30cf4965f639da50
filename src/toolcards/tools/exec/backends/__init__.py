"""Execution backends and the choice among them (fail closed: never an unconfined fallback)."""

from __future__ import annotations

import sys
from typing import Literal

from toolcards.tools.exec.backends.base import Backend, BackendUnavailable, SandboxSpec
from toolcards.tools.exec.backends.bwrap import BwrapBackend
from toolcards.tools.exec.backends.docker import DockerBackend
from toolcards.tools.exec.backends.local import LocalBackend
from toolcards.tools.exec.backends.seatbelt import SeatbeltBackend

Mode = Literal["auto", "bwrap", "docker", "seatbelt", "local"]

BACKENDS: dict[str, type[Backend]] = {
    "bwrap": BwrapBackend,
    "seatbelt": SeatbeltBackend,
    "docker": DockerBackend,
    "local": LocalBackend,
}


def auto_order(platform: str = sys.platform) -> tuple[str, ...]:
    """Isolating backends in order of preference on ``platform``."""
    if platform == "darwin":
        return ("seatbelt", "docker")
    if platform.startswith("linux"):
        return ("bwrap", "docker")
    return ("docker",)


def select_backend(mode: Mode, *, docker_image: str | None = None) -> Backend:
    """The backend for ``mode``; raises BackendUnavailable (with every reason) if none works."""
    if mode == "auto":
        reasons = []
        for name in auto_order():
            reason = BACKENDS[name].unavailable_reason()
            if reason is None:
                return _make(name, docker_image)
            reasons.append(f"{name}: {reason}")
        raise BackendUnavailable(
            "no isolating exec backend is available, and exec never falls back to running "
            "unconfined (" + "; ".join(reasons) + "). Install bubblewrap (Linux), start a "
            "docker daemon, or set mode='local' explicitly to accept unconfined execution."
        )
    if mode not in BACKENDS:
        raise BackendUnavailable(f"unknown exec mode {mode!r}; valid: auto, {', '.join(BACKENDS)}")
    reason = BACKENDS[mode].unavailable_reason()
    if reason is not None:
        raise BackendUnavailable(f"exec mode {mode!r} is unavailable: {reason}")
    return _make(mode, docker_image)


def _make(name: str, docker_image: str | None) -> Backend:
    if name == "docker" and docker_image:
        return DockerBackend(image=docker_image)
    return BACKENDS[name]()


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendUnavailable",
    "BwrapBackend",
    "DockerBackend",
    "LocalBackend",
    "Mode",
    "SandboxSpec",
    "SeatbeltBackend",
    "auto_order",
    "select_backend",
]
