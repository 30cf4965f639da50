"""Tools, prompts and resources for the structured-output and completion tests
(``structured_tools:TOOLS`` / ``:PROMPTS`` / ``:RESOURCES``)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from toolcards.core.errors import RetriableError
from toolcards.surfaces.mcp_server.complete import Complete, ResourceUri, ToolName
from toolcards.surfaces.mcp_server.resource_sources import (
    ResourceNotFound,
    StaticResource,
    TemplateResource,
)


class Reading(BaseModel):
    celsius: float
    at: str


class Forecast(BaseModel):
    """A forecast (aliased and nested fields, so the schema has ``$defs``)."""

    model_config = ConfigDict(populate_by_name=True)
    city_name: str = Field(alias="cityName")
    readings: list[Reading]


class Totals(TypedDict):
    count: int
    total: int


@dataclasses.dataclass
class Span:
    start: int
    end: int
    label: str = ""


def forecast(city: str) -> Forecast:
    """The forecast of a city."""
    return Forecast(city_name=city, readings=[Reading(celsius=21.5, at="noon")])


def totals(values: list[int]) -> Totals:
    """Counts and sums the values."""
    return {"count": len(values), "total": sum(values)}


def span(start: int, end: int) -> Span:
    """A span between two numbers."""
    return Span(start, end, f"{start}-{end}")


def greet(name: str) -> str:
    """Greets by name."""
    return f"hello {name}"


def misdeclared() -> Totals:
    """Declares a Totals but returns something else."""
    return {"count": "many", "total": None}  # type: ignore[typeddict-item]


def flaky_forecast(city: str) -> Forecast:
    """Always asks to be retried."""
    raise RetriableError(f"no station near {city}")


def hidden_tool() -> str:
    """A tool the policy hides from everyone."""
    return "hidden"


TOOLS = [forecast, totals, span, greet, misdeclared, flaky_forecast, hidden_tool]


class Mood(enum.Enum):
    CALM = "calm"
    CURIOUS = "curious"
    CROSS = "cross"


def review(tool: ToolName, depth: Literal["quick", "thorough"] = "quick") -> str:
    """Asks for a review of a tool."""
    return f"Review {tool} ({depth})."


def tone(
    mood: Mood, topic: Annotated[str, Complete(lambda v, ctx: ["tea", "tide", "toast"])]
) -> str:
    """A prompt in a mood."""
    return f"Write about {topic}, {mood}."


def summarise(uri: ResourceUri) -> str:
    """Asks for a summary of a resource."""
    return f"Summarise {uri}."


def secret_prompt(level: Literal["low", "high"]) -> str:
    """A prompt the policy hides from everyone."""
    return f"secret {level}"


PROMPTS = [review, tone, summarise, secret_prompt]

NOTES = {"alpha": "first", "alpine": "cold", "beta": "second", "private": "do not read"}


def _note(variables: dict[str, str]) -> str:
    try:
        return NOTES[variables["name"]]
    except KeyError:
        raise ResourceNotFound(f"no note {variables['name']!r}") from None


RESOURCES = [
    StaticResource("notes://static/public", "public", lambda: "public note"),
    StaticResource("notes://static/hidden", "hidden", lambda: "hidden note"),
    TemplateResource(
        "notes://{name}",
        "note",
        _note,
        "text/plain",
        "One note by name.",
        complete=lambda _var, value, _ctx: sorted(NOTES),
    ),
    TemplateResource("vault://{key}", "vault", lambda v: "locked", complete=lambda *_: ["k1"]),
]

POLICY = """\
default_effect: allow
rules:
  - description: nobody sees these
    callers: ["*"]
    targets: ["hidden_tool", "prompt:secret_prompt", "resource:notes://private",
              "resource:notes://static/hidden", "resource:vault://*",
              "resource:toolcards://workspace/ws/secret/*"]
    effect: deny
  - description: no forecasts of Atlantis
    callers: ["*"]
    targets: ["forecast"]
    effect: deny
    conditions: {arguments: {city: {eq: Atlantis}}}
"""


def login(user: str, password: str) -> str:
    """A prompt that fails on a password that is no number (its error repeats the password)."""
    return f"hello {user}, pin {int(password)}"


FAILING_PROMPTS = [login]
