"""The installed version of toolcards, read from the package metadata (the one place it is
written)."""

from __future__ import annotations


def package_version() -> str:
    """The version of the installed distribution (``0+unknown`` in a tree without metadata)."""
    # lazy: importlib.metadata costs about 4x `python -c pass`, more than `import toolcards`
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolcards")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0+unknown"
