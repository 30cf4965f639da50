"""WorkspaceTool: the card and its eleven tools (also /commands), one builder per tool; the
file operations (:mod:`.ops`, :mod:`.grep`, :mod:`.patch`) are imported when a tool runs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, PrivateAttr, TypeAdapter, field_validator

from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.commands import Rest
from toolcards.core.errors import RetriableError
from toolcards.core.pathargs import PathArgs
from toolcards.core.spec import annotate
from toolcards.tools._common.workspace_dir import workspace_dir, workspace_id_for
from toolcards.tools.workspace.fs_errors import retry_on_os_errors
from toolcards.tools.workspace.limits import (
    DOCUMENT_TIMEOUT_S,
    MAX_DOCUMENT_BYTES,
    MAX_IMAGE_FILE_BYTES,
    Limits,
    ReadCaps,
)
from toolcards.tools.workspace.models import MAX_EDITS, EditItem, Edits
from toolcards.tools.workspace.params import (
    GlobParam,
    GrepParam,
    ListParam,
    ReadParam,
    ViewParam,
    WorkspaceParam,
)
from toolcards.tools.workspace.paths import check_relative_path
from toolcards.tools.workspace.textfile import MAX_TEXT_BYTES

if TYPE_CHECKING:
    from toolcards.tools.workspace.ops import Workspace

__all__ = [
    "READ_TOOLS",
    "WRITE_TOOLS",
    "GlobParam",
    "GrepParam",
    "ListParam",
    "ReadParam",
    "ViewParam",
    "WorkspaceParam",
    "WorkspaceTool",
]

READ_TOOLS = ("workspace_read", "workspace_list", "workspace_glob", "workspace_grep",
              "workspace_view")  # fmt: skip
WRITE_TOOLS = ("workspace_write", "workspace_edit", "workspace_multi_edit", "workspace_patch",
               "workspace_delete", "workspace_mkdir")  # fmt: skip
_DESTRUCTIVE = {"workspace_write", "workspace_edit", "workspace_multi_edit", "workspace_patch",
                "workspace_delete"}  # fmt: skip
_IDEMPOTENT = {*READ_TOOLS, "workspace_write", "workspace_delete", "workspace_mkdir"}
_LONG = {"workspace_grep", "workspace_patch"}  # many files: MCP serves them as tasks
_ROOT_OK = {"workspace_list", "workspace_glob", "workspace_grep"}
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

    _seeded: set[str] = PrivateAttr(default_factory=set)
    """The workspace roots this card has seeded its ``resources`` into."""

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
        # lazy: file operations; listing and other cards' calls skip them
        from toolcards.tools.workspace.ops import Workspace

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
        if self.resources and str(ws.root) not in self._seeded:
            for name, content in self.resources.items():
                if not ws.paths.exists(name):
                    ws.write(name, content)
            self._seeded.add(str(ws.root))
        return ws

    def _offer(self, fn: Callable[..., Any]) -> list[ToolFunc]:
        """``fn`` guarded and annotated; nothing for a write tool of a read-only card."""
        name = fn.__name__
        if self.read_only and name not in READ_TOOLS:
            return []
        workspace_id_for(self.workspace_id, self.observer_or_none())  # fails here, not per call
        guarded = retry_on_os_errors(fn)
        annotate(
            guarded,
            readonly=name in READ_TOOLS,
            destructive=name in _DESTRUCTIVE,
            idempotent=name in _IDEMPOTENT,
            paths=self._paths(name),
            long_running=name in _LONG,
        )
        return [guarded]

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
            return PathArgs(canonical, fields=(), texts=(("patch_text", _patch_paths),))
        if name == "workspace_multi_edit":
            return PathArgs(canonical, fields=("edits[].path",))
        return PathArgs(canonical)

    # ---- the tools: one builder each, its options from its param --------------------------

    def _read(self, param: ReadParam) -> list[ToolFunc]:
        caps = ReadCaps(param.max_line_chars, param.max_lines, param.max_chars)
        get = self.workspace

        def workspace_read(path: str, offset: int = 1, limit: int = 2000) -> str:
            """Read a text file (or PDF/DOCX/XLSX/PPTX as Markdown) with numbered lines.

            Args:
                path: File path relative to the workspace.
                offset: First line to show (1-based).
                limit: Maximum number of lines to show.
            """
            return get().read(path, offset, limit, caps)

        return self._offer(workspace_read)

    def _list(self, param: ListParam) -> list[ToolFunc]:
        get, max_entries = self.workspace, param.max_entries

        def workspace_list(path: str = "", depth: int = 1) -> str:
            """List a directory: flat for depth 1, a tree for deeper levels.

            Args:
                path: Directory relative to the workspace ("" for the workspace itself).
                depth: How many levels to show (1-10).
            """
            return get().list_dir(path, depth, max_entries)

        return self._offer(workspace_list)

    def _glob(self, param: GlobParam) -> list[ToolFunc]:
        get, max_results = self.workspace, param.max_results

        def workspace_glob(pattern: str, path: str = "") -> str:
            """Find files by glob pattern, newest first. `*` stays in one directory, `**` spans
            directories, `{py,md}` gives alternatives; a pattern without `/` matches file names
            at any depth.

            Args:
                pattern: Glob such as `**/*.py` or `*.{md,txt}`.
                path: Directory to search in, relative to the workspace.
            """
            return get().glob(pattern, path, max_results)

        return self._offer(workspace_glob)

    def _grep(self, param: GrepParam) -> list[ToolFunc]:
        get = self.workspace
        max_matches, engine, timeout_s = param.max_matches, param.engine, param.timeout_s

        def workspace_grep(pattern: str, path: str = "", include: str = "") -> str:
            """Search file contents with a regular expression; prints `path:line:text`.

            Args:
                pattern: Regular expression searched on each line.
                path: File or directory to search, relative to the workspace.
                include: Glob on file names to search, such as `*.py` or `*.{ts,tsx}`.
            """
            # lazy: file operations; listing and other cards' calls skip them
            from toolcards.tools.workspace.grep import GrepOptions

            options = GrepOptions(max_matches=max_matches, engine=engine, timeout_s=timeout_s)
            return get().grep(pattern, path, include, options)

        return self._offer(workspace_grep)

    def _view(self, param: ViewParam, *, command: bool = False) -> list[ToolFunc]:
        get, max_dimension = self.workspace, param.max_dimension

        def workspace_view(path: str) -> Any:
            """Look at an image file (PNG, JPEG, WebP, GIF, BMP).

            Args:
                path: Image path relative to the workspace.
            """
            content = get().view(path, max_dimension)
            if command:  # a human at a prompt reads what it is, not the bytes
                return f"{path}: {content.media_type}, {len(content.data)} bytes"
            return content

        return self._offer(workspace_view)

    def _view_command(self, param: ViewParam) -> list[ToolFunc]:
        return self._view(param, command=True)

    def _write(self, param: WorkspaceParam) -> list[ToolFunc]:
        get = self.workspace

        def workspace_write(path: str, content: str) -> str:
            return get().write(path, content)

        workspace_write.__doc__ = _WRITE_DOC
        return self._offer(workspace_write)

    def _write_command(self, param: WorkspaceParam) -> list[ToolFunc]:
        get = self.workspace

        def workspace_write(path: str, content: Rest) -> str:  # the rest of the line
            return get().write(path, content)

        workspace_write.__doc__ = _WRITE_DOC
        return self._offer(workspace_write)

    def _edit(self, param: WorkspaceParam) -> list[ToolFunc]:
        get = self.workspace

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

        return self._offer(workspace_edit)

    def _multi_edit(self, param: WorkspaceParam) -> list[ToolFunc]:
        get = self.workspace

        def workspace_multi_edit(edits: Edits) -> str:
            return get().multi_edit(_bounded(edits))

        workspace_multi_edit.__doc__ = _MULTI_EDIT_DOC
        return self._offer(workspace_multi_edit)

    def _multi_edit_command(self, param: WorkspaceParam) -> list[ToolFunc]:
        get = self.workspace

        def workspace_multi_edit(edits: Rest) -> str:  # a JSON list on the command line
            try:
                items = _EDITS.validate_json(edits)
            except ValueError as exc:
                raise RetriableError(f"edits must be a JSON list of edit objects: {exc}") from None
            return get().multi_edit(_bounded(items))

        workspace_multi_edit.__doc__ = _MULTI_EDIT_DOC
        return self._offer(workspace_multi_edit)

    def _patch(self, param: WorkspaceParam) -> list[ToolFunc]:
        get = self.workspace

        def workspace_patch(patch_text: str) -> str:
            """Apply a unified diff (`--- a/path`, `+++ b/path`, `@@ -l,n +l,n @@` hunks) that may
            create (`--- /dev/null`), modify, delete (`+++ /dev/null`) or rename several files.
            All files change or none; a diff already applied is refused, never applied twice.

            Args:
                patch_text: The diff text.
            """
            return get().patch(patch_text)

        return self._offer(workspace_patch)

    def _delete(self, param: WorkspaceParam) -> list[ToolFunc]:
        get = self.workspace

        def workspace_delete(path: str) -> str:
            """Delete a file or an empty directory.

            Args:
                path: Path relative to the workspace.
            """
            return get().delete(path)

        return self._offer(workspace_delete)

    def _mkdir(self, param: WorkspaceParam) -> list[ToolFunc]:
        get = self.workspace

        def workspace_mkdir(path: str) -> str:
            """Create a directory and any missing parents (no error if it exists).

            Args:
                path: Directory path relative to the workspace.
            """
            return get().mkdir(path)

        return self._offer(workspace_mkdir)

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "workspace_read": CardCapability(tool=_read, command=_read),
        "workspace_list": CardCapability(tool=_list, command=_list),
        "workspace_glob": CardCapability(tool=_glob, command=_glob),
        "workspace_grep": CardCapability(tool=_grep, command=_grep),
        "workspace_view": CardCapability(tool=_view, command=_view_command),
        "workspace_write": CardCapability(tool=_write, command=_write_command),
        "workspace_edit": CardCapability(tool=_edit, command=_edit),
        "workspace_multi_edit": CardCapability(tool=_multi_edit, command=_multi_edit_command),
        "workspace_patch": CardCapability(tool=_patch, command=_patch),
        "workspace_delete": CardCapability(tool=_delete, command=_delete),
        "workspace_mkdir": CardCapability(tool=_mkdir, command=_mkdir),
    }


_WRITE_DOC = """Create or overwrite a file with the full new content. An existing file keeps its
    line endings (LF/CRLF) and its final newline.

    Args:
        path: File path relative to the workspace (parent directories are created).
        content: The complete file content.
    """
_MULTI_EDIT_DOC = f"""Apply several edits, in order, across one or more files: all succeed or no
    file changes. Each edit follows the rules of workspace_edit.

    Args:
        edits: The edits, applied in order (later edits see earlier results); at most {MAX_EDITS}.
    """


def _bounded(edits: list[EditItem]) -> list[EditItem]:
    """``edits``, refused past :data:`.models.MAX_EDITS` before any file is opened (the schema
    bounds a model's call; this, a caller's the schema never saw)."""
    if len(edits) > MAX_EDITS:
        raise RetriableError(
            f"{len(edits)} edits in one call, over the cap of {MAX_EDITS}; "
            "send them in several calls"
        )
    return edits


def _patch_paths(patch_text: str) -> list[str]:
    """The paths a patch names (:func:`.patch.patch_paths`, imported when one is checked)."""
    # lazy: file operations; listing and other cards' calls skip them
    from toolcards.tools.workspace.patch import patch_paths

    return patch_paths(patch_text)


def _canonical(get: Callable[[], Workspace], path: str, *, allow_root: bool, follow: bool) -> str:
    return get().paths.canonical(path, allow_root=allow_root, follow=follow)
