"""Where a team's workspace lives on disk (shared by the workspace and exec cards)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from toolcards.core.host_files import ROOTS_MARKER, where_agents_write, workspaces_root

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def workspace_id_for(workspace_id: str | None, observer: object | None) -> str:
    """The workspace id: the configured one, else the owner's team id, else ``default``."""
    chosen = workspace_id or getattr(observer, "team_id", None) or "default"
    if not _SAFE_ID.match(chosen) or chosen in {".", ".."}:
        given = "" if workspace_id else " (the team id: give the card a workspace_id)"
        raise ValueError(
            f"workspace id {chosen!r}{given} must be 1-128 characters of letters, digits, "
            "'_', '.', '-'"
        )
    return str(chosen)


def workspace_dir(
    workspace_id: str | None,
    observer: object | None,
    *,
    create: bool = True,
    root: str | Path | None = None,
) -> Path:
    """The absolute, symlink-resolved directory of a workspace (created when missing), under
    ``root`` (default :func:`workspaces_root`'s), resolved again at each call unless it lies
    where agents write (:func:`_pinned_root`); opened for tools (``create``), its root is
    marked as agents' ground."""
    root = _pinned_root(root) or workspaces_root(root)
    path = root / workspace_id_for(workspace_id, observer)
    if create:
        path.mkdir(parents=True, exist_ok=True)
        _mark_agents_ground(root)
    resolved = path.resolve()
    if resolved.parent != root:
        raise ValueError(f"workspace directory {resolved} escapes the workspaces root {root}")
    return resolved


def _pinned_root(root: str | Path | None) -> Path | None:
    """``root`` (made absolute) when it lies where agents write, as the real path a config
    that is data records for its ``workspaces/`` does: taken as it is, never resolved again,
    and ValueError when it is no longer its own real path. Resolved at each call, a folder on
    it that an agent swapped for a link once the config was read (to the host's root) made
    the config's workspace id name another team's workspace; a link swapped in while
    :func:`workspace_dir` runs is refused by its check of the workspace's parent. None for
    any other root, whose links (the operator's choice) are followed."""
    if not root:
        return None
    given = Path(os.path.abspath(Path(root).expanduser()))
    if not where_agents_write(given):
        return None
    if os.path.realpath(given) != str(given):
        raise ValueError(
            f"the workspaces root {given} lies where agents write and is no longer its real "
            "path: a link on it is not followed"
        )
    return given


def _mark_agents_ground(root: Path) -> None:
    """Leave the marker in ``root`` on every open, not only when the tools made the folder: an
    operator may have made (and seeded) it first, and a config an agent writes there is data.

    Fail-open: a root this process cannot write in (a read-only mount, most often, where no
    agent writes either) keeps its tools working. An existing marker is left as it is.
    """
    marker = root / ROOTS_MARKER
    if not marker.is_file():
        with contextlib.suppress(OSError):
            marker.touch(exist_ok=True)  # empty: its name says it all
