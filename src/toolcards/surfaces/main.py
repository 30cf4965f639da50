"""The ``toolcards`` console entry point.

``toolcards --help`` is answered from a cache written the first time it runs (keyed by the
toolcards version, the CLI modules' files and the terminal width), so asking for help does
not pay for importing the command-line framework. A plain ``list`` or ``call`` command line
(the options each takes, at most once) runs the same commands (:mod:`.cli.run`) without
typer, which with the pydantic it loads costs more than the rest of a ``list``. Everything
else runs the full CLI (:mod:`toolcards.surfaces.commands`).
"""

from __future__ import annotations

import errno
import os
import sys

from toolcards._lazy import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, NoReturn

_CLI_FILES = (
    "commands.py",
    "main.py",
    "cli/app.py",
    "cli/audit.py",
    "cli/state.py",
    "cli/options.py",
    "cli/approvals.py",
    "cli/budgets.py",
    "cli/grants.py",
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


def _run_plain(command: str, root: dict[str, Any], sub: dict[str, Any]) -> NoReturn:
    """Run a plain ``list`` or ``call`` without typer, as the full command line runs it:
    same state, output, exit codes (an interrupted one ends as click ends it)."""
    from pathlib import Path

    from toolcards.surfaces.cli.run import call_tool, list_tools
    from toolcards.surfaces.cli.state import State

    config = sub.get("config") or root.get("config") or os.environ.get("TOOLCARDS_CONFIG")
    state = State(config=Path(config or "toolcards.yaml"), json=bool(root.get("--json")))
    code = 0
    try:
        if command == "list":
            list_tools(state, bool(sub.get("--all")))
        else:
            tool, *pairs = sub[""]
            code = call_tool(state, tool, pairs or None, sub.get("args"))
    except KeyboardInterrupt:
        sys.stderr.write("\nAborted!\n")
        code = 1
    except Exception as exc:
        code = _exit_code(exc)
    finally:
        state.close()
    raise SystemExit(code)


def _exit_code(exc: Exception) -> int:
    """The exit code of a command that raised ``exc``, as under typer; raises the others."""
    typer = sys.modules.get("typer")  # loaded by a command that failed (state.fail)
    if typer is not None and isinstance(exc, typer.Exit):
        return int(exc.exit_code)
    if isinstance(exc, OSError) and exc.errno == errno.EPIPE:  # the reader went away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    from toolcards.surfaces.cli.run import end_for_missing_extra

    end_for_missing_extra(exc)
    raise exc


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--help"]:
        _help()
        return
    plain = _plain(args)
    if plain is not None:
        _run_plain(*plain)
    from toolcards.surfaces.commands import main as run

    run(args)
