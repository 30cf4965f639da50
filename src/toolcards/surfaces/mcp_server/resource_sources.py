"""What a surface offers as readable resources, independent of MCP.

Built in, when the config has a team: the views of the team's state its cards offer (each
card's RESOURCE channel, see :mod:`toolcards.core.views`: the planning board, the knowledge
graph's summary, entities and network), the audit tail, and the files of the configured
workspaces. A config (or code) may add its own :class:`StaticResource` /
:class:`TemplateResource` objects. URIs are stable:

====================================================  ========================================
``toolcards://team/<team>/<view path>``               a card's view (JSON), e.g. ``planning``,
                                                      ``graph``, ``graph/entity/{name}``
``toolcards://audit/tail``                            the last 100 audit entries
``toolcards://workspace/<id>/{path}``                 a workspace file (at most 1 MB)
====================================================  ========================================

A workspace file is found by its workspace's template, resolved as the workspace tools
resolve it: a read, a subscription or a template listing never lists a workspace. Only
``resources/list`` does (:func:`workspace_files`, at most :data:`MAX_LISTED_FILES` files), and a
completion of a path walks at most :data:`MAX_COMPLETED_ENTRIES` entries.

Every read and listing is governed by the policy with the target ``resource:<uri>``, where a
template's URI is its canonical form (:meth:`TemplateResource.canonical`): a rule on
``toolcards://workspace/w/secret/*`` holds for ``./secret/x``, ``%73ecret/x`` and ``secret%2Fx``.
A card's view is read only by a caller the card's state rule lets read it (one of the card's
tools, or ``context:<CardType>``: :mod:`toolcards.governance.card_reads`), as its prompt is.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import mimetypes
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from pydantic_core import to_jsonable_python

from toolcards.core.errors import RetriableError, ToolcardsError
from toolcards.core.identity import Identity
from toolcards.core.views import CardView, ViewNotFound
from toolcards.governance.card_reads import may_read_card
from toolcards.governance.redaction.redactor import storable
from toolcards.tools.workspace.access import LIST_TIMEOUT_S, AccessRefused, list_files, read_bytes
from toolcards.tools.workspace.globs import WalkBound
from toolcards.tools.workspace.paths import Contained

if TYPE_CHECKING:
    from toolcards.surfaces.runtime import SurfaceRuntime

Content = str | bytes
MAX_FILE_BYTES = 1_000_000
MAX_LISTED_FILES = 500
MAX_COMPLETED_ENTRIES = 10_000
"""Entries (files, directories, links) one completion of a workspace path walks, a tenth of a
listing's: a client asks at each keystroke (the files past it are not offered)."""
AUDIT_TAIL = 100


class ResourceNotFound(ToolcardsError, LookupError):
    """No resource has this URI (or the caller may not know it exists)."""


@dataclass(frozen=True)
class StaticResource:
    """One resource at a fixed URI; ``read()`` returns text or bytes. ``watch`` names the
    team actors whose events change it (for ``resources/subscribe``)."""

    uri: str
    name: str
    read: Callable[[], Content]
    mime_type: str = "text/plain"
    description: str | None = None
    watch: tuple[str, ...] = ()
    readable: Callable[[Identity], bool] | None = None
    """Who may read it beside the policy's ``resource:`` decision (None: anyone it allows)."""

    def may(self, who: Identity) -> bool:
        return self.readable is None or self.readable(who)


@dataclass(frozen=True)
class TemplateResource:
    """Resources under an RFC 6570 level-1 template (``{name}`` variables, ``{+path}`` for a
    value with slashes); ``read(variables)`` returns text or bytes."""

    uri_template: str
    name: str
    read: Callable[[dict[str, str]], Content]
    mime_type: str = "text/plain"
    description: str | None = None
    watch: tuple[str, ...] = ()
    normalise: Callable[[dict[str, str]], dict[str, str]] | None = None
    """The decoded variables as the reader acts on them (a workspace path resolved as the
    workspace resolves it); raises ResourceNotFound for values the reader refuses."""
    complete: Callable[[str, str, dict[str, str]], Iterable[str]] | None = None
    """``(variable, value, other variables) -> candidates`` for ``completion/complete``;
    only candidates whose resource the caller may see are offered."""
    readable: Callable[[Identity], bool] | None = None
    """Who may read it beside the policy's ``resource:`` decision (None: anyone it allows)."""
    mime_of: Callable[[dict[str, str]], str] | None = None
    """The MIME type of the resource the normalised variables name (None: ``mime_type``)."""

    def may(self, who: Identity) -> bool:
        return self.readable is None or self.readable(who)

    def mime(self, variables: dict[str, str]) -> str:
        """The MIME type of the resource ``variables`` (normalised) name."""
        return self.mime_type if self.mime_of is None else self.mime_of(variables)

    def variables(self) -> list[str]:
        """The template's variable names, in order."""
        return [var.lstrip("+") for _literal, var in _parts(self.uri_template) if var]

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri``, each percent-decoded exactly once; None if no match."""
        pattern = ""
        for literal, var in _parts(self.uri_template):
            pattern += re.escape(literal)
            if var:
                name = var.lstrip("+")
                body = ".+" if var.startswith("+") else "[^/]+"
                pattern += f"(?P<{name}>{body})"
        found = re.fullmatch(pattern, uri)
        if found is None:
            return None
        return {k: unquote(v, errors=_BYTES) for k, v in found.groupdict().items()}

    def canonical(self, variables: dict[str, str]) -> tuple[str, dict[str, str]]:
        """The one URI of the resource ``variables`` name (normalised, then encoded as a
        listing spells it: ``{+path}`` keeps its slashes, ``{name}`` encodes them) and the
        variables its reader gets. Every decision on the resource is made on that URI."""
        if self.normalise is not None:
            variables = self.normalise(variables)
        uri = ""
        for literal, var in _parts(self.uri_template):
            uri += literal
            if var:
                value = variables[var.lstrip("+")]
                uri += quote(value, safe="/" if var[0] == "+" else "", errors=_BYTES)
        return uri, variables


_BYTES = "surrogateescape"
"""A file name made of bytes that are not UTF-8 (its Python name holds them as lone
surrogates) is percent-encoded as those bytes, and a URI's escapes decode back to them."""


def _parts(template: str) -> list[tuple[str, str]]:
    """(literal, variable) pairs of an RFC 6570 level-1 template (the last variable empty)."""
    return re.findall(r"([^{]*)(?:\{([^}]*)\})?", template)


def _json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False, indent=2)


def team_resources(
    runtime: SurfaceRuntime, views: list[CardView]
) -> Iterator[StaticResource | TemplateResource]:
    """The ``views`` of the team's state that the configured cards offer."""
    team = runtime.team
    if team is None:
        return
    base = f"toolcards://team/{quote(team.team_id, safe='')}"
    for card in views:
        view = card.view
        uri = f"{base}/{view.path}"
        readable = functools.partial(_may_read, runtime, card)
        if view.is_template:
            yield TemplateResource(
                uri, view.name, functools.partial(_read_view, runtime, card), "application/json",
                view.description, view.watch, readable=readable,
            )  # fmt: skip
        else:
            yield StaticResource(
                uri, view.name, functools.partial(_read_view, runtime, card, {}),
                "application/json", view.description, view.watch, readable=readable,
            )  # fmt: skip


def _may_read(runtime: SurfaceRuntime, card: CardView, who: Identity) -> bool:
    return may_read_card(runtime.policy, who, card.card_type, card.tools)


def _read_view(runtime: SurfaceRuntime, card: CardView, variables: dict[str, str]) -> str:
    team = runtime.team
    if team is None:
        raise ResourceNotFound(card.view.path)
    try:
        return _json(card.view.read(team, variables, ""))
    except ViewNotFound as exc:
        raise ResourceNotFound(str(exc)) from None


def audit_resource(runtime: SurfaceRuntime) -> Iterator[StaticResource]:
    audit = runtime.audit
    if audit is None:
        return
    yield StaticResource(
        "toolcards://audit/tail",
        "audit-tail",
        lambda: _json([dataclasses.asdict(e) for e in audit.tail(AUDIT_TAIL)]),
        "application/json",
        f"The last {AUDIT_TAIL} audit entries, oldest first.",
    )


def workspace_templates(runtime: SurfaceRuntime) -> Iterator[TemplateResource]:
    """The template of each configured workspace, which reads (and finds) its files."""
    for wid, root in runtime.workspaces().items():
        yield TemplateResource(
            _base(wid) + "/{+path}",
            f"workspace-{wid}",
            functools.partial(_read_var, root),
            "application/octet-stream",
            f"A file of the workspace {wid!r} (at most {MAX_FILE_BYTES} bytes).",
            mime_of=_path_mime,
            normalise=functools.partial(_canonical_path, root),
            complete=functools.partial(_complete_path, root),
        )


def workspace_files(runtime: SurfaceRuntime) -> Iterator[StaticResource]:
    """The listed files of each configured workspace (at most :data:`MAX_LISTED_FILES` each),
    for ``resources/list`` only."""
    for wid, root in runtime.workspaces().items():
        for rel in _files(root):
            yield StaticResource(
                f"{_base(wid)}/{quote(rel, errors=_BYTES)}",
                storable(rel),
                functools.partial(read_file, root, rel),
                _mime(rel),
            )


def _base(wid: str) -> str:
    return f"toolcards://workspace/{quote(wid, safe='')}"


def _canonical_path(root: Path, variables: dict[str, str]) -> dict[str, str]:
    """The path as the workspace tools resolve it (``.``, empty names and links inside
    followed, names as stored); a path they refuse (``..``, absolute, outside) is not found."""
    try:
        return {**variables, "path": Contained(root).canonical(variables["path"])}
    except RetriableError:
        raise ResourceNotFound("no such file") from None


def _complete_path(root: Path, _variable: str, value: str, _context: dict[str, str]) -> list[str]:
    """The files of the workspace whose path starts with ``value``, of those a walk of at most
    :data:`MAX_COMPLETED_ENTRIES` entries lists."""
    listed = _files(root, WalkBound(MAX_COMPLETED_ENTRIES, LIST_TIMEOUT_S))
    return [storable(rel) for rel in listed if rel.startswith(value)]


def _read_var(root: Path, variables: dict[str, str]) -> Content:
    return read_file(root, variables["path"])


def _files(root: Path, bound: WalkBound | None = None) -> list[str]:
    """What :func:`read_file` would read (the workspace package's containment walk, within
    ``bound``: by default a listing's)."""
    try:
        return list_files(root, MAX_LISTED_FILES, bound=bound)
    except AccessRefused:
        return []


def read_file(root: Path, rel: str) -> Content:
    """A workspace file's bytes (text when UTF-8), read through the workspace containment
    (``toolcards.tools.workspace.access``); anything it refuses is not found."""
    try:
        data = read_bytes(root, rel, MAX_FILE_BYTES)
    except AccessRefused as exc:
        raise ResourceNotFound(str(exc)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _path_mime(variables: dict[str, str]) -> str:
    return _mime(variables["path"])


def _mime(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"
