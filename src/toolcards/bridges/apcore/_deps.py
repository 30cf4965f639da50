"""Clear errors when the optional apcore packages are missing."""

from __future__ import annotations

import importlib
from types import ModuleType

INSTALL_HINT = "pip install 'toolcards[apcore]'"


def missing_extra(package: str, cause: BaseException | None = None) -> ImportError:
    """Build the ImportError raised when ``package`` is not installed."""
    error = ImportError(
        f"toolcards.bridges.apcore needs the '{package}' package, which is part of the "
        f"optional 'toolcards[apcore]' extra. Install it with: {INSTALL_HINT}",
        name=package,
    )
    if cause is not None:
        error.__cause__ = cause
    return error


def require(package: str) -> ModuleType:
    """Import ``package`` or raise an ImportError naming the ``toolcards[apcore]`` extra."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise missing_extra(package, exc) from exc
