"""One helper for the package facades that import their names on first use.

A facade lists ``name -> module`` once; ``__getattr__`` imports the module when the name is
first touched and caches the value in the facade, so ``import toolcards`` stays cheap.
"""

from __future__ import annotations

import importlib
import sys
import warnings

TYPE_CHECKING = False  # typing is not imported: `toolcards --help` starts without it
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_names(
    facade: str, names: Mapping[str, str], renamed: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the module ``facade`` exporting ``names`` lazily (each
    from a module of the same name, or ``module:attribute``), and the former names
    ``renamed`` (old -> new) with a DeprecationWarning."""
    former = renamed_names(facade, renamed or {})

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            return former(name)
        module, _, attribute = where.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        setattr(sys.modules[facade], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[facade])) | set(names))

    return __getattr__, __dir__


def renamed_names(facade: str, renamed: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``facade`` answering each former name of ``renamed``
    (old -> new) with the new name's value, after a DeprecationWarning naming the new name.
    A former name is kept one release, and never cached (each use warns)."""

    def __getattr__(name: str) -> Any:
        new = renamed.get(name)
        if new is None:
            raise AttributeError(f"module {facade!r} has no attribute {name!r}")
        warnings.warn(
            f"{facade}.{name} is deprecated: it is now {facade}.{new} (the old name goes in "
            "the next release)",
            DeprecationWarning,
            stacklevel=_user_level(),
        )
        return getattr(sys.modules[facade], new)

    return __getattr__


def _user_level() -> int:
    """The ``stacklevel`` of the first frame above the module ``__getattr__`` calls (so a
    warning points at the line that used the former name)."""
    level, frame = 2, sys._getframe(2)  # noqa: SLF001 - the stdlib's frame access
    while frame.f_back is not None and (
        frame.f_code.co_name == "__getattr__" or frame.f_code.co_filename == __file__
    ):
        level, frame = level + 1, frame.f_back
    return level


def optional_module(module: str, extra: str, purpose: str) -> Any:
    """``module`` imported, or an ImportError saying which ``toolcards[extra]`` to install
    (``purpose`` says what needs it, e.g. "the PostgreSQL store")."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs {module}: pip install 'toolcards[{extra}]'", name=module
        ) from exc


def entry_point_classes(group: str, base: type) -> list[tuple[str, type]]:
    """``(entry point name, class)`` of every entry point of ``group``; each must be a subclass
    of ``base`` (TypeError otherwise). Only installed distributions declare these."""
    # lazy: importlib.metadata, ~4x python -c pass; only card and store lookups need it
    from importlib.metadata import entry_points

    found: list[tuple[str, type]] = []
    for ep in entry_points(group=group):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise TypeError(f"entry point {ep.name!r} in {group} is not a {base.__name__}")
        found.append((ep.name, cls))
    return found
