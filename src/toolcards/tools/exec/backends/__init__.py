"""Execution backends and the choice among them (fail closed: never an unconfined fallback)."""

from __future__ import annotations

import sys

from toolcards.tools.exec.backends.base import Backend, BackendUnavailable, SandboxSpec
from toolcards.tools.exec.backends.bwrap import BwrapBackend
from toolcards.tools.exec.backends.docker import DockerBackend
from toolcards.tools.exec.backends.local import LocalBackend
from toolcards.tools.exec.backends.registry import (
    ENTRY_POINT_GROUP,
    backend_class,
    check_mode,
    isolating,
    known_modes,
    register_backend,
    unregister_backend,
)
from toolcards.tools.exec.backends.seatbelt import SeatbeltBackend

Mode = str
"""``"auto"`` or the name of a registered backend (see :func:`known_modes`)."""

BUILTIN: dict[str, type[Backend]] = {
    "bwrap": BwrapBackend,
    "seatbelt": SeatbeltBackend,
    "docker": DockerBackend,
    "local": LocalBackend,
}
BACKENDS = BUILTIN  # the built-in table (older name)
for _name, _cls in BUILTIN.items():
    register_backend(_name, _cls)


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
            reason = BUILTIN[name].unavailable_reason()
            if reason is None:
                return _make(name, BUILTIN[name], docker_image)
            reasons.append(f"{name}: {reason}")
        raise BackendUnavailable(
            "no isolating exec backend is available, and exec never falls back to running "
            "unconfined (" + "; ".join(reasons) + "). Install bubblewrap (Linux), start a "
            "docker daemon, or set mode='local' explicitly to accept unconfined execution."
        )
    try:
        cls = backend_class(mode)
    except ValueError as exc:
        raise BackendUnavailable(str(exc)) from None
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendUnavailable(f"exec mode {mode!r} is unavailable: {reason}")
    return _make(mode, cls, docker_image)


def _make(name: str, cls: type[Backend], docker_image: str | None) -> Backend:
    if cls is DockerBackend and docker_image:
        return DockerBackend(image=docker_image)
    return cls()


__all__ = [
    "BACKENDS",
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "Backend",
    "BackendUnavailable",
    "BwrapBackend",
    "DockerBackend",
    "LocalBackend",
    "Mode",
    "SandboxSpec",
    "SeatbeltBackend",
    "auto_order",
    "backend_class",
    "check_mode",
    "isolating",
    "known_modes",
    "register_backend",
    "select_backend",
    "unregister_backend",
]
