"""SkillTool: named skills listed in the system prompt, loaded on demand by the model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.channels import Channels
from toolcards.core.context import ContextState
from toolcards.core.errors import RetriableError
from toolcards.core.params import BaseToolParam
from toolcards.core.spec import annotate
from toolcards.governance.approvals.view import escaped_line
from toolcards.tools._common.batch import exact, one_line


class Skill(BaseModel):
    """One skill: a name, a one-line summary for the menu, and the full instructions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    summary: Annotated[
        str, StringConstraints(strip_whitespace=True, max_length=200), AfterValidator(one_line)
    ]
    """One line of the menu, in the system prompt: a line break in it (from a card list loaded
    as data) would add its own lines there, as if the host wrote them."""
    content: str


class UseSkill(BaseToolParam):
    """``use_skill(name)``: returns a skill's full instructions."""

    max_chars: int = Field(default=20_000, ge=100)
    """Longer skill texts are cut to this many characters, with a marker."""


class SkillMenu(BaseToolParam):
    """The menu of skills, in the system prompt and as per-turn context."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.SYSTEM_PROMPT})
    header: Annotated[
        str, StringConstraints(strip_whitespace=True, max_length=200), AfterValidator(one_line)
    ] = "Skills you can load with use_skill(name):"
    """First line of the menu, in the system prompt (and the title of the skills state): one
    line, as a skill's summary, so a card loaded as data adds no menu entries of its own."""


class ListSkills(BaseToolParam):
    """``/skills``: the menu for humans."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.COMMAND})


class SkillTool(ToolCard):
    """A menu of named skills: the model sees the menu and loads a skill when it needs it."""

    skills: list[Skill] = Field(default_factory=list)
    use_skill: bool | UseSkill = True
    skill_menu: bool | SkillMenu = True
    list_skills: bool | ListSkills = True

    @field_validator("skills")
    @classmethod
    def _unique_names(cls, skills: list[Skill]) -> list[Skill]:
        names = [s.name for s in skills]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate skill names: {', '.join(dupes)}")
        return skills

    def _menu(self, header: str) -> str:
        lines = [header, *(f"- {s.name}: {escaped_line(s.summary)}" for s in self.skills)]
        return "\n".join(lines) if self.skills else f"{header}\n(no skills configured)"

    def _use_skill(self, param: UseSkill) -> ToolFunc:
        by_name = {s.name: s for s in self.skills}
        limit = param.max_chars

        def use_skill(name: str) -> str:
            """Load the full instructions of one skill from the menu.

            Args:
                name: The skill's name exactly as listed in the menu.
            """
            skill = by_name.get(exact(name, "name"))  # as the policy decided on it
            if skill is None:
                valid = ", ".join(sorted(by_name)) or "(none)"
                raise RetriableError(f"unknown skill {name!r}; valid names: {valid}")
            text = skill.content
            if len(text) > limit:
                text = text[:limit] + f"\n[... truncated: {len(skill.content) - limit} more chars]"
            return f"# Skill: {skill.name}\n{text}"

        return annotate(use_skill, readonly=True, idempotent=True)

    def _menu_prompt(self, param: SkillMenu) -> Callable[[], str]:
        header = param.header
        return lambda: self._menu(header)

    def _menu_state(self, param: SkillMenu) -> Callable[[], ContextState]:
        title = param.header

        def state() -> ContextState:
            return ContextState(
                key="skills",
                title=title,
                items={s.name: f"{s.name}: {escaped_line(s.summary)}" for s in self.skills},
            )

        return state

    def _list_command(self, param: ListSkills) -> ToolFunc:
        def skills() -> str:
            """List the configured skills."""
            return self._menu("Skills:")

        return skills

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "use_skill": CardCapability(tool=_use_skill, command=_use_skill),
        "skill_menu": CardCapability(system_prompt=_menu_prompt, context=_menu_state),
        "list_skills": CardCapability(command=_list_command),
    }
