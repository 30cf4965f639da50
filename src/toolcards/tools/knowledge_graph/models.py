"""Knowledge-graph data and the argument shapes the model sends."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from toolcards.core.events import event_payload
from toolcards.tools._common.batch import one_line, unpadded

MAX_NAME = 200
MAX_TYPE = 100
MAX_DESCRIPTION = 1000
MAX_OBSERVATION = 500
MAX_OBSERVATIONS = 100
MAX_ENTITY_TEXT = 8_000
"""Characters an entity's description and observations hold at most in all: 100 observations
of 500 characters and a description made ~51 KB an entity, ~2.1 GB at the entity cap."""


Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAME),
    AfterValidator(one_line),  # on the raw value: it refuses U+3000, U+2028, U+00A0 at an end
    AfterValidator(unpadded),
    Field(description=f"Unique entity name, at most {MAX_NAME} characters."),
]
TypeName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_TYPE),
    AfterValidator(one_line),
    AfterValidator(unpadded),
    Field(description=f"A short type or label, at most {MAX_TYPE} characters."),
]
Description = Annotated[
    str,
    StringConstraints(strip_whitespace=True, max_length=MAX_DESCRIPTION),
    Field(description=f"At most {MAX_DESCRIPTION} characters."),
]
Observation = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_OBSERVATION),
]
Observations = Annotated[
    list[Observation],
    Field(
        max_length=MAX_OBSERVATIONS,
        description=(
            f"Short facts, each at most {MAX_OBSERVATION} characters; with the description, "
            f"at most {MAX_ENTITY_TEXT:,} characters per entity."
        ),
    ),
]

SearchMode = Literal["hybrid", "keyword", "vector"]


class Entity(BaseModel):
    """A node: a unique name, a type, a description, observations, and a root flag."""

    model_config = ConfigDict(extra="forbid")

    name: str
    entity_type: str
    description: str = ""
    observations: list[str] = Field(default_factory=list)
    is_root: bool = False


class Relation(BaseModel):
    """A directed, typed edge between two entities."""

    model_config = ConfigDict(extra="forbid")

    from_entity: str
    to_entity: str
    relation_type: str
    description: str = ""

    @property
    def key(self) -> str:
        return relation_key(self.from_entity, self.relation_type, self.to_entity)


MAX_EVENT_ITEMS = 100
"""Entities and relations one ``GraphDelta`` lists at most, in the order of its lists (the
rest are counted in ``more``): a batch may delete a hub with thousands of relations."""
MAX_EVENT_OBSERVATIONS = 3
"""Observations added, and removed, an event shows per entity (the rest are counted)."""
MAX_EVENT_TEXT = 100
"""Characters an event keeps of each observation it shows."""


class EntityChange(BaseModel):
    """An entity as an event tells of it: its name, type and what changed, never the whole
    entity (up to ~50 KB, copied into every event before; its state row holds it)."""

    model_config = ConfigDict(extra="ignore", frozen=True)  # events stored before: whole

    name: str
    entity_type: str
    changed: list[str] = Field(default_factory=list)
    """The fields an update changed (empty for an entity created)."""
    observations_added: list[str] = Field(default_factory=list)
    observations_removed: list[str] = Field(default_factory=list)
    more_observations: int = 0
    """Observations added or removed past the :data:`MAX_EVENT_OBSERVATIONS` shown of each."""


class RelationName(BaseModel):
    """A relation as an event tells of it: its endpoints and type (its identity)."""

    model_config = ConfigDict(extra="ignore", frozen=True)  # events stored before: whole

    from_entity: str
    to_entity: str
    relation_type: str


@event_payload
class GraphDelta(BaseModel):
    """What one ``update_graph`` batch changed: the ``#KnowledgeGraphTool`` event payload
    (``team.events()`` reads it back as this model). It names what changed and stays small
    (at most :data:`MAX_EVENT_ITEMS` items): every subscriber reads it, and the entities and
    relations as they are now are in the team's state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entities_added: list[EntityChange] = Field(default_factory=list)
    entities_modified: list[EntityChange] = Field(default_factory=list)
    entities_removed: list[str] = Field(default_factory=list)
    relations_added: list[RelationName] = Field(default_factory=list)
    relations_removed: list[RelationName] = Field(default_factory=list)
    more: dict[str, int] = Field(default_factory=dict)
    """Items left out of a list past :data:`MAX_EVENT_ITEMS`, by the list's name."""


def relation_key(from_entity: str, relation_type: str, to_entity: str) -> str:
    """The identity of a relation: its endpoints and type."""
    return f"{from_entity}\x1f{relation_type}\x1f{to_entity}"


class EntityCreate(BaseModel):
    """An entity to create."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    entity_type: TypeName
    description: Description = ""
    observations: Observations = Field(default_factory=list)
    is_root: bool = Field(default=False, description="Root entities are listed in the summary.")


class EntityUpdate(BaseModel):
    """Changes to an existing entity, named by ``name``."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    description: Description | None = None
    entity_type: TypeName | None = None
    add_observations: Observations = Field(default_factory=list)
    remove_observations: list[str] = Field(default_factory=list, max_length=MAX_OBSERVATIONS)
    is_root: bool | None = None


class RelationCreate(BaseModel):
    """A relation to create between two existing (or newly created) entities."""

    model_config = ConfigDict(extra="forbid")

    from_entity: Name
    to_entity: Name
    relation_type: TypeName
    description: Description = ""


class RelationRef(BaseModel):
    """A relation to delete, named by its endpoints and type."""

    model_config = ConfigDict(extra="forbid")

    from_entity: Name
    to_entity: Name
    relation_type: TypeName
