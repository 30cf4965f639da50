"""WorkspaceTool: the card, its per-tool params, and the eleven tools (also /commands)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, TypeAdapter, field_validator

from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.commands import Rest
from toolcards.core.errors import RetriableError
from toolcards.core.params import BaseToolParam
from toolcards.core.pathargs import PathArgs
from toolcards.core.spec import annotate
from toolcards.tools._common.workspace_dir import workspace_dir, workspace_id_for
from toolcards.tools.workspace.grep import GrepOptions
from toolcards.tools.workspace.models import EditItem
from toolcards.tools.workspace.ops import (
    DOCUMENT_TIMEOUT_S,
    MAX_DOCUMENT_BYTES,
    MAX_IMAGE_FILE_BYTES,
    Limits,
    ReadCaps,
    Workspace,
)
from toolcards.tools.workspace.patch import patch_paths
from toolcards.tools.workspace.paths import check_relative_path
from toolcards.tools.workspace.textfile import MAX_TEXT_BYTES

READ_TOOLS = ("workspace_read", "workspace_list", "workspace_glob", "workspace_grep",
              "workspace_view")  # fmt: skip
WRITE_TOOLS = ("workspace_write", "workspace_edit", "workspace_multi_edit", "workspace_patch",
               "workspace_delete", "workspace_mkdir")  # fmt: skip


def _capability(name: str) -> CardCapability:
    def tool(card: WorkspaceTool, param: BaseToolParam) -> list[ToolFunc]:
        return card._one(name, param, command=False)

    def command(card: WorkspaceTool, param: BaseToolParam) -> list[ToolFunc]:
        return card._one(name, param, command=True)

    return CardCapability(tool=tool, command=command)


class WorkspaceParam(BaseToolParam):
    """A workspace tool with no options beyond its channels and instructions."""


class ReadParam(BaseToolParam):
    max_line_chars: int = Field(default=2000, ge=80)
    """Longer lines are cut, with a marker."""
    max_lines: int = Field(default=2000, ge=1)
    """Most lines one call returns, whatever ``limit`` the model asks for."""
    max_chars: int = Field(default=200_000, ge=1000)
    """Most characters one call returns; the rest is offered with a continue marker."""


class ListParam(BaseToolParam):
    max_entries: int = Field(default=500, ge=10)


class GlobParam(BaseToolParam):
    max_results: int = Field(default=100, ge=1)


class GrepParam(BaseToolParam):
    max_matches: int = Field(default=200, ge=1)
    engine: Literal["auto", "rg", "python"] = "auto"
    """``auto`` uses ripgrep when installed, else the built-in search (same output)."""
    timeout_s: float = Field(default=20.0, gt=0, le=600)
    """A search still running after this many seconds is stopped (a retryable error)."""


class ViewParam(BaseToolParam):
    max_dimension: int = Field(default=1568, ge=64)
    """Images are scaled down to fit this many pixels (needs ``toolcards[vision]``)."""


_EDITS = TypeAdapter(list[EditItem])


class WorkspaceTool(ToolCard):
    """Files shared by a team: read, search, view, write, edit and patch, contained."""

    workspace_id: str | None = None
    """Directory name under the workspaces root; default: the team id."""
    _workspaces_root: str | None = PrivateAttr(default=None)
    read_only: bool = False
    """Offer the read tools only."""
    resources: dict[str, str] = Field(default_factory=dict)
    """Files (relative path -> text) written into the workspace once, if missing."""
    allow_hardlinks: bool = False
    """Read and search files that have other names (hard links); off: such a file may be a
    second name of a file outside the workspace."""
    max_text_bytes: int = Field(default=MAX_TEXT_BYTES, ge=1024)
    """Largest text file read, edited or searched (larger files are refused or skipped)."""
    max_document_bytes: int = Field(default=MAX_DOCUMENT_BYTES, ge=1024)
    """Largest PDF/Office document converted by workspace_read."""
    max_image_bytes: int = Field(default=MAX_IMAGE_FILE_BYTES, ge=1024)
    """Largest image file opened by workspace_view."""
    document_timeout_s: float = Field(default=DOCUMENT_TIMEOUT_S, gt=0, le=3600)
    """A document conversion still running after this many seconds is stopped."""

    workspace_read: bool | ReadParam = True
    workspace_list: bool | ListParam = True
    workspace_glob: bool | GlobParam = True
    workspace_grep: bool | GrepParam = True
    workspace_view: bool | ViewParam = True
    workspace_write: bool | WorkspaceParam = True
    workspace_edit: bool | WorkspaceParam = True
    workspace_multi_edit: bool | WorkspaceParam = True
    workspace_patch: bool | WorkspaceParam = True
    workspace_delete: bool | WorkspaceParam = True
    workspace_mkdir: bool | WorkspaceParam = True

    @field_validator("workspace_id")
    @classmethod
    def _safe_workspace_id(cls, value: str | None) -> str | None:
        return None if value is None else workspace_id_for(value, None)

    @field_validator("resources")
    @classmethod
    def _relative_resources(cls, resources: dict[str, str]) -> dict[str, str]:
        for name in resources:
            try:
                check_relative_path(name)
            except RetriableError as exc:
                raise ValueError(f"resource {name!r}: {exc}") from None
        return resources

    # ---- runtime ------------------------------------------------------------------------

    def use_workspaces_root(self, root: str | Path) -> None:
        """Keep this card's workspaces under ``root`` (the host's choice, e.g. a surfaces
        config's ``workspaces:``; never read from card data, which could name ``/``)."""
        self._workspaces_root = str(root)

    def workspace(self) -> Workspace:
        """This card's workspace as seen by its owner (resources seeded on first use)."""
        observer = self.observer_or_none()
        agent = str(getattr(observer, "address", None) or "default")
        limits = Limits(
            allow_hardlinks=self.allow_hardlinks,
            max_text_bytes=self.max_text_bytes,
            max_document_bytes=self.max_document_bytes,
            max_image_bytes=self.max_image_bytes,
            document_timeout_s=self.document_timeout_s,
        )
        where = workspace_dir(self.workspace_id, observer, root=self._workspaces_root)
        ws = Workspace(where, agent, limits)
        if self.resources:
            _seed_once(ws, self.resources)
        return ws

    def _one(self, name: str, param: BaseToolParam, *, command: bool) -> list[ToolFunc]:
        """The tool (or command) ``name`` with this param; nothing for a write tool of a
        read-only card."""
        if self.read_only and name not in READ_TOOLS:
            return []
        fn = _guarded(_tool_functions(self.workspace, {name: param}, command=command)[name])
        annotate(
            fn,
            readonly=name in READ_TOOLS,
            destructive=name in _DESTRUCTIVE,
            idempotent=name in _IDEMPOTENT,
            paths=self._paths(name),
        )
        return [fn]

    def _paths(self, name: str) -> PathArgs:
        """The arguments of tool ``name`` that are paths, made canonical by the workspace's
        own resolution (so the policy decides on the names the tool acts on)."""
        canonical = functools.partial(
            _canonical,
            self.workspace,
            allow_root=name in _ROOT_OK,
            follow=name != "workspace_delete",  # delete removes a link, not its target
        )
        if name == "workspace_patch":
            return PathArgs(canonical, fields=(), texts=(("patch_text", patch_paths),))
        if name == "workspace_multi_edit":
            return PathArgs(canonical, fields=("edits[].path",))
        return PathArgs(canonical)

    capabilities: ClassVar[dict[str, CardCapability]] = {
        name: _capability(name) for name in READ_TOOLS + WRITE_TOOLS
    }


_DESTRUCTIVE = {"workspace_write", "workspace_edit", "workspace_multi_edit", "workspace_patch",
                "workspace_delete"}  # fmt: skip
_IDEMPOTENT = {*READ_TOOLS, "workspace_write", "workspace_delete", "workspace_mkdir"}
_ROOT_OK = {"workspace_list", "workspace_glob", "workspace_grep"}


def _canonical(get: Callable[[], Workspace], path: str, *, allow_root: bool, follow: bool) -> str:
    return get().paths.canonical(path, allow_root=allow_root, follow=follow)


_SEEDED: set[tuple[str, str]] = set()


def _seed_once(ws: Workspace, resources: dict[str, str]) -> None:
    for name, content in resources.items():
        key = (str(ws.root), name)
        if key in _SEEDED:
            continue
        if not ws.paths.exists(name):
            ws.write(name, content)
        _SEEDED.add(key)


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn filesystem errors into retryable messages; other errors propagate."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (FileNotFoundError, NotADirectoryError) as exc:
            name = os.path.basename(str(exc.filename or "")) or "a path"
            raise RetriableError(f"not found: {name}") from None
        except PermissionError:
            raise RetriableError("permission denied by the operating system") from None
        except OSError as exc:
            raise RetriableError(f"filesystem error: {exc.strerror or exc}") from None

    return wrapper


def _opt(param: BaseToolParam | None, name: str, default: Any) -> Any:
    return getattr(param, name, default)


def _tool_functions(
    get: Callable[[], Workspace], params: dict[str, BaseToolParam], *, command: bool
) -> dict[str, Callable[..., Any]]:
    read = params.get("workspace_read")
    caps = ReadCaps(
        max_line_chars=_opt(read, "max_line_chars", 2000),
        max_lines=_opt(read, "max_lines", 2000),
        max_chars=_opt(read, "max_chars", 200_000),
    )
    max_entries = _opt(params.get("workspace_list"), "max_entries", 500)
    max_results = _opt(params.get("workspace_glob"), "max_results", 100)
    grep_param = params.get("workspace_grep")
    grep_options = GrepOptions(
        max_matches=_opt(grep_param, "max_matches", 200),
        engine=_opt(grep_param, "engine", "auto"),
        timeout_s=_opt(grep_param, "timeout_s", 20.0),
    )
    max_dimension = _opt(params.get("workspace_view"), "max_dimension", 1568)

    def workspace_read(path: str, offset: int = 1, limit: int = 2000) -> str:
        """Read a text file (or PDF/DOCX/XLSX/PPTX as Markdown) with numbered lines.

        Args:
            path: File path relative to the workspace.
            offset: First line to show (1-based).
            limit: Maximum number of lines to show.
        """
        return get().read(path, offset, limit, caps)

    def workspace_list(path: str = "", depth: int = 1) -> str:
        """List a directory: flat for depth 1, a tree for deeper levels.

        Args:
            path: Directory relative to the workspace ("" for the workspace itself).
            depth: How many levels to show (1-10).
        """
        return get().list_dir(path, depth, max_entries)

    def workspace_glob(pattern: str, path: str = "") -> str:
        """Find files by glob pattern, newest first. `*` stays in one directory, `**` spans
        directories, `{py,md}` gives alternatives; a pattern without `/` matches file names
        at any depth.

        Args:
            pattern: Glob such as `**/*.py` or `*.{md,txt}`.
            path: Directory to search in, relative to the workspace.
        """
        return get().glob(pattern, path, max_results)

    def workspace_grep(pattern: str, path: str = "", include: str = "") -> str:
        """Search file contents with a regular expression; prints `path:line:text`.

        Args:
            pattern: Regular expression searched on each line.
            path: File or directory to search, relative to the workspace.
            include: Glob on file names to search, such as `*.py` or `*.{ts,tsx}`.
        """
        return get().grep(pattern, path, include, grep_options)

    def workspace_view(path: str) -> Any:
        """Look at an image file (PNG, JPEG, WebP, GIF, BMP).

        Args:
            path: Image path relative to the workspace.
        """
        content = get().view(path, max_dimension)
        if command:
            return f"{path}: {content.media_type}, {len(content.data)} bytes"
        return content

    def workspace_write(path: str, content: str) -> str:
        """Create or overwrite a file with the full new content. An existing file keeps its
        line endings (LF/CRLF) and its final newline.

        Args:
            path: File path relative to the workspace (parent directories are created).
            content: The complete file content.
        """
        return get().write(path, content)

    def workspace_write_command(path: str, content: Rest) -> str:
        return get().write(path, content)

    def workspace_edit(
        path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> str:
        """Replace text in a file and return the diff. old_string must match one place
        (copy it from workspace_read, without the line numbers, with enough context to be
        unique); small whitespace or indentation drift is tolerated. Read the file first.

        Args:
            path: File path relative to the workspace.
            old_string: The text to replace; empty creates a new file.
            new_string: The replacement text.
            replace_all: Replace every occurrence instead of exactly one.
        """
        return get().edit(path, old_string, new_string, replace_all)

    def workspace_multi_edit(edits: list[EditItem]) -> str:
        """Apply several edits, in order, across one or more files: all succeed or no file
        changes. Each edit follows the rules of workspace_edit.

        Args:
            edits: The edits, applied in order (later edits see earlier results).
        """
        return get().multi_edit(edits)

    def workspace_multi_edit_command(edits: Rest) -> str:
        try:
            items = _EDITS.validate_json(edits)
        except ValueError as exc:
            raise RetriableError(f"edits must be a JSON list of edit objects: {exc}") from None
        return get().multi_edit(items)

    def workspace_patch(patch_text: str) -> str:
        """Apply a unified diff (`--- a/path`, `+++ b/path`, `@@ -l,n +l,n @@` hunks) that may
        create (`--- /dev/null`), modify, delete (`+++ /dev/null`) or rename several files.
        All files change or none.

        Args:
            patch_text: The diff text.
        """
        return get().patch(patch_text)

    def workspace_delete(path: str) -> str:
        """Delete a file or an empty directory.

        Args:
            path: Path relative to the workspace.
        """
        return get().delete(path)

    def workspace_mkdir(path: str) -> str:
        """Create a directory and any missing parents (no error if it exists).

        Args:
            path: Directory path relative to the workspace.
        """
        return get().mkdir(path)

    found: dict[str, Callable[..., Any]] = {
        fn.__name__: fn
        for fn in (workspace_read, workspace_list, workspace_glob, workspace_grep,
                   workspace_view, workspace_write, workspace_edit, workspace_multi_edit,
                   workspace_patch, workspace_delete, workspace_mkdir)
    }  # fmt: skip
    if command:
        for fn in (workspace_write_command, workspace_multi_edit_command):
            name = fn.__name__.removesuffix("_command")
            fn.__name__ = fn.__qualname__ = name
            fn.__doc__ = found[name].__doc__
            found[name] = fn
    return found
