"""``toolcards list``'s cache: the rows a listing of a config printed, read back by the next
``list`` of that config while nothing they were made from has changed, so a repeated
``list`` builds neither the config, the cards nor the policy (importing pydantic alone costs
more than ten times ``python -c pass``).

An entry (in ``~/.cache/toolcards``, one per config file) holds every tool's row with
whether the config's local principal may call it, and what the rows were made from:

- the text of the config and of its policy file (the config names the principal, the policy
  decides what that principal sees: both are compared as text, the policy's read through the
  path the config gives it, as the policy is read: a link on that path re-pointed to another
  text is a change);
- every module the listing process had loaded (path, modification time and size: the test
  Python applies to its own bytecode) and the folders of ``sys.path`` (installing or removing
  a package changes its folder);
- the interpreter, the working directory and the environment (but for the shell's own
  bookkeeping variables).

A listing is written only when it is a function of those: every card is one of this
package's own and none contributes a toolset (an MCP server's tools are asked from the server
each time; a card or a tool of another package may make its tools from anything), see
:func:`toolcards.surfaces.cli.operations.static_listing`, and none of the files was changed
in the second before the command started or since. An entry that cannot be read,
is too large or does not match is a miss: the listing is made as before and written again.
A listing read from the cache opens no store and no audit log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time

from toolcards._lazy import TYPE_CHECKING
from toolcards.core import host_files

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


__all__ = ["Start", "cached_rows", "remember"]

FORMAT = 1
MAX_ENTRY_BYTES = 8_000_000
_SETTLED_NS = 1_000_000_000
"""A file changed less than this before the command started may have changed while it ran
(file times are coarse): no entry is written from it."""
_SHELL_VARIABLES = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})
"""Set by the shell for each command or directory, read by no card."""


def _entry_path(config: str) -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    name = hashlib.sha256(config.encode()).hexdigest()[:24]
    return os.path.join(base, "toolcards", f"list-{name}.json")


def _context() -> str:
    """The interpreter, working directory and environment, as one digest."""
    env = sorted((k, v) for k, v in os.environ.items() if k not in _SHELL_VARIABLES)
    parts = [sys.executable, sys.version, os.getcwd(), sys.path, env]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


class Start:
    """When a listing made here started, and its context then (making it may change the
    context: a config's ``tools:`` may add to ``sys.path``)."""

    __slots__ = ("context", "path", "time_ns")

    def __init__(self) -> None:
        self.time_ns = time.time_ns()
        self.context = _context()
        self.path = list(sys.path)


def _text_digest(path: str) -> str | None:
    """The digest of the config or policy file at ``path``, read as the config loader reads
    it (bounded, a regular file only: a FIFO or a huge file swapped in is a miss at once, as
    it is refused at once without an entry); None when it cannot be read so."""
    try:
        return hashlib.sha256(host_files.read_bounded(path).encode()).hexdigest()
    except (OSError, UnicodeDecodeError):
        return None


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _modules() -> list[str]:
    files = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
    return sorted(f for f in files if isinstance(f, str))


def cached_rows(config: Path) -> list[dict[str, Any]] | None:
    """The rows of every tool (each with ``callable``) from the cache entry of ``config``,
    or None when there is none or anything it was made from has changed."""
    where = os.path.realpath(config)
    try:
        with open(_entry_path(where), encoding="utf-8") as file:
            text = file.read(MAX_ENTRY_BYTES + 1)
        if len(text) > MAX_ENTRY_BYTES:
            return None
        entry = json.loads(text)
        fresh = (
            entry["format"] == FORMAT
            and entry["config"] == where
            and entry["context"] == _context()
            and all(_text_digest(path) == digest for path, digest in entry["texts"])
            and all(_stamp(path) == stamp for path, stamp in entry["files"])
        )
        rows = entry["rows"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not fresh or not isinstance(rows, list) or not all(map(_is_row, rows)):
        return None
    return rows


def _is_row(row: Any) -> bool:
    """A row as :func:`toolcards.surfaces.cli.operations.list_rows` makes it."""
    return (
        isinstance(row, dict)
        and row.keys() == {"name", "callable", "hints", "description"}
        and isinstance(row["name"], str)
        and isinstance(row["callable"], bool)
        and isinstance(row["hints"], list)
        and all(isinstance(hint, str) for hint in row["hints"])
        and isinstance(row["description"], str)
    )


def remember(config: Path, policy: Path, rows: list[dict[str, Any]], began: Start) -> None:
    """Write the cache entry of ``config``: ``rows`` (every tool's), listed under the policy
    file ``policy`` in a command that began as ``began`` says, unless a file they were made
    from changed in the second before it began or since; the caller writes only a listing
    that is a function of what the entry records (see the module)."""
    where = os.path.realpath(config)
    texts = [where, os.fspath(policy)]
    stamps: list[tuple[str, list[int] | None]] = [(path, _stamp(path)) for path in texts]
    stamps += [(path, _stamp(path)) for path in _modules()]
    stamps += [(path, _stamp(path)) for path in began.path if path]
    settled = began.time_ns - _SETTLED_NS
    if any(stamp is not None and stamp[0] >= settled for _, stamp in stamps):
        return
    digests = [(path, _text_digest(path)) for path in texts]
    if any(digest is None for _, digest in digests):
        return
    entry = {
        "format": FORMAT,
        "config": where,
        "context": began.context,
        "texts": digests,
        "files": stamps[len(texts) :],
        "rows": rows,
    }
    cache = _entry_path(where)
    tmp = f"{cache}.{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(
            os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8"
        ) as out:
            json.dump(entry, out, ensure_ascii=False)
        os.replace(tmp, cache)
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
