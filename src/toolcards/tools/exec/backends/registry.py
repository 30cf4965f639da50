"""Exec backends by name: the built-ins, ones a host program registers, and entry points.

A card names its backend with ``mode``; the name resolves here and nowhere else. Card data is
never read as an import path: a name is either registered in this process
(:func:`register_backend`) or declared by an installed distribution in the
``toolcards.exec_backends`` entry-point group, whose value is the distribution's own code.
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points

from toolcards.tools.exec.backends.base import Backend

ENTRY_POINT_GROUP = "toolcards.exec_backends"
AUTO = "auto"

_BACKENDS: dict[str, type[Backend]] = {}
_LOCK = threading.Lock()


def register_backend(name: str, cls: type[Backend], *, replace: bool = False) -> None:
    """Make ``cls`` available as ``ExecTool(mode=name)``.

    ``name`` must be a plain identifier-like word (letters, digits, ``_``, ``-``, ``.``).
    Registering a taken name raises ValueError unless ``replace=True``; ``"auto"`` is reserved.
    """
    _check_name(name)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise TypeError(f"exec backend {name!r} must be a Backend subclass, got {cls!r}")
    with _LOCK:
        taken = _BACKENDS.get(name)
        if taken is not None and taken is not cls and not replace:
            raise ValueError(f"exec backend {name!r} is already registered ({taken.__name__})")
        _BACKENDS[name] = cls


def unregister_backend(name: str) -> None:
    """Forget a registered backend (no error when unknown)."""
    with _LOCK:
        _BACKENDS.pop(name, None)


def backend_class(name: str) -> type[Backend]:
    """The backend class for ``name``; ValueError listing the known names when unknown."""
    found = _BACKENDS.get(name)
    if found is None:
        found = _from_entry_points(name)
    if found is None:
        raise ValueError(f"unknown exec mode {name!r}; known: {', '.join(known_modes())}")
    return found


def known_modes() -> list[str]:
    """``auto`` followed by every registered or installed backend name, sorted."""
    names = set(_BACKENDS) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return [AUTO, *sorted(names)]


def check_mode(name: object) -> str:
    """``name`` when it names ``auto`` or a known backend, else ValueError (for validators)."""
    if not isinstance(name, str):
        raise ValueError(f"exec mode must be a string, got {type(name).__name__}")
    if name != AUTO:
        backend_class(name)
    return name


def isolating(name: str) -> bool:
    """True for ``auto`` and for a backend that confines what it runs (not ``local``)."""
    return name == AUTO or backend_class(name).isolating


def _from_entry_points(name: str) -> type[Backend] | None:
    """Load the backend an installed distribution declares under ``name`` (and keep it)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise ValueError(f"entry point {name!r} in {ENTRY_POINT_GROUP} is not a Backend")
        with _LOCK:
            return _BACKENDS.setdefault(name, cls)
    return None


def _check_name(name: str) -> None:
    ok = isinstance(name, str) and 0 < len(name) <= 64 and name != AUTO
    if not ok or not all(c.isalnum() or c in "_-." for c in name) or not name[0].isalnum():
        raise ValueError(f"{name!r} is not a valid exec backend name")
