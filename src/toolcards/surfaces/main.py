"""The ``toolcards`` console entry point: the one place that decides which part of the
command line a process loads.

``toolcards --help`` is answered from a cache written the first time it runs (keyed by the
Python version, the files that make the help and the terminal width), so asking for help
does not pay for importing the command-line framework. A plain ``list`` or ``call`` command
line (the options each takes, at most once) runs the same commands (:mod:`.cli.run`) without
typer, which with the pydantic it loads costs more than the rest of a ``list``. Everything
else runs the full CLI (:mod:`toolcards.surfaces.commands`), which imports the module of the
command that runs.
"""

from __future__ import annotations

import hashlib
import os
import sys

from toolcards._lazy import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

_HELP_FILES = ("commands.py", "main.py", "cli/options.py")
"""The files the root help comes from (its options and the command table)."""


def _cache_file() -> str | None:
    """The help cache's path (plain strings: pathlib is not imported for ``--help``)."""
    here = os.path.dirname(os.path.realpath(__file__))
    parts = [sys.version.split()[0], os.environ.get("COLUMNS", "")]
    try:
        parts.append(str(os.get_terminal_size(1).columns))
    except OSError:
        parts.append("-")
    try:
        for name in _HELP_FILES:
            st = os.stat(os.path.join(here, name))
            parts.append(f"{name}:{st.st_mtime_ns}:{st.st_size}")
    except OSError:
        return None
    key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "toolcards", f"help-{key}.txt")


def _help() -> None:
    cache = _cache_file()
    if cache is not None:
        try:
            with open(cache, encoding="utf-8") as cached:
                sys.stdout.write(cached.read())
            return
        except OSError:
            pass
    from toolcards.surfaces.commands import help_text  # lazy: typer, ~5x python -c pass

    text = help_text()
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


def _options(tokens: list[str], flags: set[str], valued: dict[str, str]) -> dict[str, Any] | None:
    """``tokens`` as flags, valued options (each at most once) and positionals (under
    ``""``), or None for anything else: an unknown option, a value that looks like an
    option or is empty, ``-`` or ``--``, a repeated option."""
    found: dict[str, Any] = {"": []}
    rest = iter(tokens)
    for token in rest:
        if not token.startswith("-"):
            found[""].append(token)
            continue
        name, eq, value = token.partition("=") if token.startswith("--") else (token, "", "")
        given: str | None = value if eq else None
        if name in flags and not eq:
            key = name
        elif name in valued:
            key = valued[name]
            given = given if eq else next(rest, None)
            if not given or (given.startswith("-") and given != "-"):
                return None
        else:
            return None
        if key in found:
            return None
        found[key] = True if given is None else given
    return found


_CONFIG = {"-c": "config", "--config": "config"}


def _plain(args: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """``(command, root options, its options)`` when ``args`` is a plain ``list`` or ``call``
    command line, the only ones the short path takes: every other one, and every mistake,
    goes to the full command line, which says what is wrong."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _CONFIG else 1
    if i >= len(args) or args[i] not in ("list", "call"):
        return None
    command = args[i]
    root = _options(args[:i], {"--json"}, _CONFIG)
    if command == "list":
        sub = _options(args[i + 1 :], {"--all"}, _CONFIG)
    else:
        sub = _options(args[i + 1 :], set(), {**_CONFIG, "--args": "args", "--json": "args"})
    if root is None or root[""] or sub is None or bool(sub[""]) != (command == "call"):
        return None
    return command, root, sub


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--help"]:
        _help()
        return
    plain = _plain(args)
    if plain is not None:
        from toolcards.surfaces.cli.run import run_plain  # lazy: the short path loads no typer

        run_plain(*plain)
    from toolcards.surfaces.commands import main as run  # lazy: typer, ~5x python -c pass

    run(args)
