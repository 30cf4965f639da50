"""The ``toolcards`` console entry point.

``toolcards --help`` is answered from a cache written the first time it runs (keyed by the
toolcards version, the CLI modules' files and the terminal width), so asking for help does
not pay for importing the command-line framework. Everything else runs the full CLI
(:mod:`toolcards.surfaces.commands`).
"""

from __future__ import annotations

import os
import sys

_CLI_FILES = (
    "commands.py",
    "main.py",
    "cli/app.py",
    "cli/audit.py",
    "cli/state.py",
    "cli/approvals.py",
    "cli/init.py",
    "dashboard/cli.py",
)


def _cache_file() -> str | None:
    """The help cache's path (plain strings: pathlib is not imported for ``--help``)."""
    here = os.path.dirname(os.path.realpath(__file__))
    parts = [sys.version.split()[0], os.environ.get("COLUMNS", "")]
    try:
        parts.append(str(os.get_terminal_size(1).columns))
    except OSError:
        parts.append("-")
    try:
        for name in _CLI_FILES:
            st = os.stat(os.path.join(here, name))
            parts.append(f"{name}:{st.st_mtime_ns}:{st.st_size}")
    except OSError:
        return None
    import hashlib

    key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "toolcards", f"help-{key}.txt")


def _rendered_help() -> str:
    import contextlib
    import io

    from toolcards.surfaces.commands import app

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        app(args=["--help"], prog_name="toolcards")
    return buffer.getvalue()


def _help() -> None:
    cache = _cache_file()
    if cache is not None:
        try:
            with open(cache, encoding="utf-8") as cached:
                sys.stdout.write(cached.read())
            return
        except OSError:
            pass
    text = _rendered_help()
    sys.stdout.write(text)
    if cache is not None and text:
        try:
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            tmp = f"{cache}.{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, cache)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--help"]:
        _help()
        return
    from toolcards.surfaces.commands import main as run

    run(args)
