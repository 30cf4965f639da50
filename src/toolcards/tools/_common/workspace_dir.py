"""Where a team's workspace lives on disk (shared by the workspace and exec cards)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from toolcards.core.host_files import ROOTS_MARKER, workspaces_root

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
    ``root`` (default :func:`workspaces_root`'s); opened for tools (``create``), its root is
    marked as agents' ground."""
    root = workspaces_root(root)
    path = root / workspace_id_for(workspace_id, observer)
    if create:
        path.mkdir(parents=True, exist_ok=True)
        _mark_agents_ground(root)
    resolved = path.resolve()
    if resolved.parent != root:
        raise ValueError(f"workspace directory {resolved} escapes the workspaces root {root}")
    return resolved


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
