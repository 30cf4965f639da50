"""Views of a team's state that a card offers people and clients (its RESOURCE channel).

A card's capability table names a ``resource`` builder; it returns :class:`TeamView` s. Each
view is read from a team, not through the card's observer, so a surface serves it for any team
that ran the card (also one opened read-only from its store): the MCP server as the resource
``toolcards://team/<team>/<path>``, the dashboard as a panel when the view has one. A surface
never names a card's actor or knows its state's layout: a new card with a view or a panel
touches no surface file.

The policy decides who reads a view as it decides every other read: the target
``resource:<uri>``, and the card's state rule (a caller who may call one of the card's tools,
or is allowed ``context:<CardType>``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from toolcards.core.actors import ActorHandle
from toolcards.core.errors import ToolcardsError

__all__ = ["CardView", "Panel", "TeamReader", "TeamView", "ViewNotFound"]


class TeamReader(Protocol):
    """What a view reads a team through (a :class:`~toolcards.runtime.Team` is one)."""

    def actor(self, name: str) -> ActorHandle[Any] | None:
        """The running actor ``name``, or None (a view never starts one)."""

    def state_of(self, name: str) -> Any:
        """The stored state of the actor ``name`` (a ``StateNamespace``)."""


class ViewNotFound(ToolcardsError, LookupError):
    """The view has nothing under these variables (an entity that does not exist)."""


@dataclass(frozen=True)
class Panel:
    """How the dashboard shows a view: ``title``, the Jinja ``template`` (its source text; the
    dashboard escapes every value and gives the template the view's data under the name
    ``view``), ``script`` (JavaScript source the panel needs, or ""), and whether it spans the
    grid (``wide``). The data may hold secrets: the dashboard redacts it before rendering."""

    title: str
    template: str
    script: str = ""
    wide: bool = True


@dataclass(frozen=True)
class TeamView:
    """One view: ``path`` under ``toolcards://team/<team>/`` (``{name}`` variables make a
    template, e.g. ``graph/entity/{name}``); ``read(team, variables, query)`` returns plain JSON
    data (``query``: the dashboard's search box, "" elsewhere) or raises :class:`ViewNotFound`;
    ``watch`` names the tool actors whose events change it."""

    path: str
    name: str
    description: str
    read: Callable[[TeamReader, Mapping[str, str], str], Any]
    watch: tuple[str, ...] = ()
    panel: Panel | None = None
    key: str = ""
    """The panel's id on the dashboard (default: the path's first segment)."""

    @property
    def panel_id(self) -> str:
        return self.key or self.path.split("/", 1)[0]

    @property
    def is_template(self) -> bool:
        return "{" in self.path


@dataclass(frozen=True)
class CardView:
    """A view with the card that offers it: its type and tool names say who may read it."""

    card_type: str
    tools: tuple[str, ...]
    view: TeamView
