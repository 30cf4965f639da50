"""What a surface offers as readable resources, independent of MCP.

Built in, when the config has a team: the planning board, the knowledge-graph summary and
each entity, the audit tail, and the files of the configured workspaces. A config (or code)
may add its own :class:`StaticResource` / :class:`TemplateResource` objects. URIs are stable:

====================================================  ========================================
``toolcards://team/<team>/planning``                  the planning board (JSON: the tasks)
``toolcards://team/<team>/graph``                     graph summary (counts, types, roots)
``toolcards://team/<team>/graph/entity/{name}``       one entity and its relations
``toolcards://audit/tail``                            the last 100 audit entries
``toolcards://workspace/<id>/{path}``                 a workspace file (at most 1 MB)
====================================================  ========================================

Every read and listing is governed by the policy with the target ``resource:<uri>``, where a
template's URI is its canonical form (:meth:`TemplateResource.canonical`): a rule on
``toolcards://workspace/w/secret/*`` holds for ``./secret/x``, ``%73ecret/x`` and ``secret%2Fx``.
A resource showing a card's team state (the board, the graph) also needs what the card's prompt
context needs (:func:`toolcards.governance.card_reads.may_read_card`): one of the card's tools,
or the read right ``context:<CardType>``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from toolcards.core.errors import RetriableError, ToolcardsError
from toolcards.tools.workspace.access import AccessRefused, list_files, read_bytes
from toolcards.tools.workspace.paths import Contained

if TYPE_CHECKING:
    from toolcards.surfaces.runtime import SurfaceRuntime

Content = str | bytes
MAX_FILE_BYTES = 1_000_000
MAX_LISTED_FILES = 500
AUDIT_TAIL = 100
_PLANNING = "#PlanningTool"
_GRAPH = "#KnowledgeGraphTool"
_ASK_TIMEOUT = 10.0


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
    card: str | None = None
    """The card type whose team state this shows (readers need its read rule), if any."""
    tools: tuple[str, ...] = ()
    """That card's tools."""


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
    card: str | None = None
    """As :attr:`StaticResource.card`."""
    tools: tuple[str, ...] = ()

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
        return {k: unquote(v) for k, v in found.groupdict().items()}

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
                uri += quote(variables[var.lstrip("+")], safe="/" if var[0] == "+" else "")
        return uri, variables


def _parts(template: str) -> list[tuple[str, str]]:
    """(literal, variable) pairs of an RFC 6570 level-1 template (the last variable empty)."""
    return re.findall(r"([^{]*)(?:\{([^}]*)\})?", template)


def _json(value: Any) -> str:
    from pydantic_core import to_jsonable_python

    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False, indent=2)


def _ask(
    runtime: SurfaceRuntime,
    default: Any,
    actor: str,
    method: Callable[..., Any],
    *args: Any,
    **kw: Any,
) -> Any:
    """The actor's answer; ``default`` when it never started in this team (no state yet:
    a resumed team restarts every actor it recorded)."""
    team = runtime.team
    handle = None if team is None else team.actor(actor)
    if handle is None:
        return default
    return handle.within(_ASK_TIMEOUT).ask(method, *args, **kw)


def _planning() -> Any:
    from toolcards.tools.planning.actor import PlanningActor

    return PlanningActor


def _graph() -> Any:
    from toolcards.tools.knowledge_graph.actor import KnowledgeGraphActor

    return KnowledgeGraphActor


_EMPTY_GRAPH = {"entities": 0, "relations": 0, "types": [], "roots": [], "more_roots": 0}


def team_resources(runtime: SurfaceRuntime) -> Iterator[StaticResource | TemplateResource]:
    """The planning board and knowledge graph of the runtime's team, where bound."""
    team = runtime.team
    if team is None:
        return
    base = f"toolcards://team/{quote(team.team_id, safe='')}"
    kinds = runtime.card_types()
    if "PlanningTool" in kinds:
        yield StaticResource(
            f"{base}/planning",
            "planning",
            lambda: _json({"tasks": _ask(runtime, [], _PLANNING, _planning().tasks)}),
            "application/json",
            "The team's planning board: every task with status, owner and dependencies.",
            (_PLANNING,),
            card="PlanningTool",
            tools=runtime.card_tools.get("PlanningTool", ()),
        )
    if "KnowledgeGraphTool" in kinds:
        graph_tools = runtime.card_tools.get("KnowledgeGraphTool", ())
        yield StaticResource(
            f"{base}/graph",
            "knowledge-graph",
            lambda: _json(_ask(runtime, _EMPTY_GRAPH, _GRAPH, _graph().summary, 50)),
            "application/json",
            "The team's knowledge graph: counts, entity types and root entities.",
            (_GRAPH,),
            card="KnowledgeGraphTool",
            tools=graph_tools,
        )
        yield TemplateResource(
            f"{base}/graph/entity/{{name}}",
            "knowledge-graph-entity",
            lambda v: _entity(runtime, v["name"]),
            "application/json",
            "One knowledge-graph entity with its observations and relations.",
            (_GRAPH,),
            card="KnowledgeGraphTool",
            tools=graph_tools,
        )


def _entity(runtime: SurfaceRuntime, name: str) -> str:
    search = _graph().search
    result = _ask(runtime, None, _GRAPH, search, name, "keyword", 10, include_edges=True)
    if result is None:
        raise ResourceNotFound(f"no entity named {name!r}")
    for entity, _score in result.entities:
        if entity.name == name:
            edges = [r for r in result.edges if name in (r.from_entity, r.to_entity)]
            return _json({"entity": entity, "relations": edges})
    raise ResourceNotFound(f"no entity named {name!r}")


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


def workspace_resources(runtime: SurfaceRuntime) -> Iterator[StaticResource | TemplateResource]:
    """The files of each configured workspace: listed (bounded) and readable by template."""
    for wid, root in runtime.workspaces().items():
        base = f"toolcards://workspace/{quote(wid, safe='')}"
        yield TemplateResource(
            base + "/{+path}",
            f"workspace-{wid}",
            functools.partial(_read_var, root),
            "application/octet-stream",
            f"A file of the workspace {wid!r} (at most {MAX_FILE_BYTES} bytes).",
            normalise=functools.partial(_canonical_path, root),
            complete=functools.partial(_complete_path, root),
        )
        for rel in _files(root):
            yield StaticResource(
                f"{base}/{quote(rel)}",
                rel,
                functools.partial(read_file, root, rel),
                _mime(rel),
            )


def _canonical_path(root: Path, variables: dict[str, str]) -> dict[str, str]:
    """The path as the workspace tools resolve it (``.``, empty names and links inside
    followed, names as stored); a path they refuse (``..``, absolute, outside) is not found."""
    try:
        return {**variables, "path": Contained(root).canonical(variables["path"])}
    except RetriableError:
        raise ResourceNotFound("no such file") from None


def _complete_path(root: Path, _variable: str, value: str, _context: dict[str, str]) -> list[str]:
    """The listed files of the workspace whose path starts with ``value``."""
    return [rel for rel in _files(root) if rel.startswith(value)]


def _read_var(root: Path, variables: dict[str, str]) -> Content:
    return read_file(root, variables["path"])


def _files(root: Path) -> list[str]:
    """What :func:`read_file` would read (the workspace package's containment walk)."""
    try:
        return list_files(root, MAX_LISTED_FILES)
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


def _mime(name: str) -> str:
    import mimetypes

    return mimetypes.guess_type(name)[0] or "application/octet-stream"
