"""Turn the model's command string into argv, and check it against the allowlist."""

from __future__ import annotations

import shlex
from collections.abc import Collection
from typing import Any

from toolcards.core.errors import RetriableError

MAX_COMMAND_CHARS = 16_000
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox"})
SHELL_OPERATORS = frozenset(
    {"|", "||", "&&", "&", ">", ">>", "<", "<<", "2>", "2>>", "2>&1", "&>", ">&", "|&"}
)
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})

ANY_PROGRAM = "any"
"""``ExecTool(allowed_commands="any")``: any program may start a command (explicitly chosen)."""

READ_ONLY_GIT = ("status", "diff", "log", "show", "blame", "ls-files", "rev-parse")
"""The git subcommands of the default list: they read the repository. Global options
(``git -c``, ``-C``, ``--exec-path``) and every other subcommand (``push``, ``fetch``,
``clone``, ``config``, ``reset``, ``clean``, ``checkout``, ``rebase``, ``submodule``, ...)
need an entry of their own (``"git push"``) or ``"git"``."""

DEFAULT_ALLOWED_COMMANDS: tuple[str, ...] = (
    *("ls", "cat", "head", "tail", "wc", "grep", "rg", "find", "sort", "uniq", "diff"),
    *("cut", "tr", "stat", "du", "pwd", "echo"),
    *("python", "python3", "pytest", "ruff", "mypy", "make"),
    *(f"git {sub}" for sub in READ_ONLY_GIT),
)
"""``ExecTool``'s allowlist unless one is given: programs that read files, and the Python
build and test tools. An entry of two words (``"git log"``) allows a program with that first
argument only. No shell, no ``env``/``xargs``, no file removal or copying (the workspace tools
do that), no network clients. Not a boundary: ``python3``, ``make``, ``pytest`` and
``find -exec`` run what they are told, within the sandbox."""


def parse_command(command: Any, allowed: Collection[str] | None) -> list[str]:
    """``command`` split with shell quoting rules, never run through a shell.

    Raises RetriableError (the model can fix it) for a wrong type, an empty or oversized
    command, unbalanced quotes, shell operators used without an allowed shell, an option in
    the program position, or a program outside ``allowed`` (when an allowlist is set).
    """
    if not isinstance(command, str):
        raise RetriableError(f"command must be a string, got {type(command).__name__}")
    if "\x00" in command:
        raise RetriableError("command must not contain NUL bytes")
    if len(command) > MAX_COMMAND_CHARS:
        raise RetriableError(f"command is longer than {MAX_COMMAND_CHARS} characters")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise RetriableError(f"cannot parse command: {exc}") from None
    if not argv:
        raise RetriableError("command is empty")
    program = argv[0]
    if program.startswith("-"):
        raise RetriableError(f"the program name {program!r} must not start with '-'")
    if program.rsplit("/", 1)[-1] in SHELLS and (allowed is None or program not in allowed):
        raise RetriableError(
            f"{program!r} is a shell, and shells run only when the allowlist names them; "
            "give the program and its arguments directly"
        )
    operators = _operators(argv)
    if operators:
        raise RetriableError(
            f"shell operators {', '.join(operators)} are not interpreted: commands run "
            "without a shell. Run one program per call"
            + (", or use an allowed shell: sh -c '...'" if _shell_allowed(allowed) else ".")
        )
    if allowed is not None:
        if "/" in program:
            raise RetriableError(
                f"{program!r}: give the program by name, without a path "
                f"(allowed: {', '.join(sorted(allowed)) or 'none'})"
            )
        if not _listed(argv, allowed):
            subcommands = any(entry.startswith(f"{program} ") for entry in allowed)
            shown = " ".join(argv[:2]) if subcommands and len(argv) > 1 else program
            raise RetriableError(
                f"command {shown!r} is not allowed; allowed commands: "
                f"{', '.join(sorted(allowed)) or 'none'}"
            )
    return argv


def canonical_command(command: Any, allowed: Collection[str] | None) -> str:
    """``command`` as it will run: its argv (:func:`parse_command`) joined back with
    ``shlex.join``. The governed executor decides on this spelling (``'rm' x``, ``r''m x``
    and `` rm  x`` are all ``rm x``) and the tool receives it. RetriableError where
    :func:`parse_command` refuses the command, or its joined form."""
    joined = shlex.join(parse_command(command, allowed))
    parse_command(joined, allowed)  # quoting can lengthen it past MAX_COMMAND_CHARS
    return joined


def check_allowed_entry(entry: str) -> str:
    """``entry`` of an allowlist: a bare program name, or a program and its first argument
    (``"git log"``); a ValueError otherwise."""
    words = entry.split(" ")
    plain = all(w and "/" not in w and not w.startswith("-") and w.strip() == w for w in words)
    if not plain or len(words) > 2:
        raise ValueError(
            f"allowed command {entry!r} must be a bare program name, or a program and its "
            "subcommand such as 'git log'"
        )
    return entry


def _listed(argv: list[str], allowed: Collection[str]) -> bool:
    return argv[0] in allowed or (len(argv) > 1 and f"{argv[0]} {argv[1]}" in allowed)


def _shell_allowed(allowed: Collection[str] | None) -> bool:
    return allowed is not None and bool(SHELLS & set(allowed))


def _operators(argv: list[str]) -> list[str]:
    if argv[0] in SHELLS:
        return []  # `sh -c 'a | b'`: the quoted script is one argument, nothing to flag
    found = [a for a in argv[1:] if a in SHELL_OPERATORS]
    if ";" in argv[1:] and not _FIND_EXEC & set(argv):
        found.append(";")
    return sorted(set(found))
