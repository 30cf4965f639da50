"""One helper for the package facades that import their names on first use.

A facade lists ``name -> module`` once; ``__getattr__`` imports the module when the name is
first touched and caches the value in the facade, so ``import toolcards`` stays cheap.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    facade: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the module ``facade`` exporting ``names`` lazily."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {facade!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[facade], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[facade])) | set(names))

    return __getattr__, __dir__
