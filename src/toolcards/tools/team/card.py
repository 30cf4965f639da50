"""TeamTool: hire and fire team members, see the roster and roles, and who is busy on what."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from pydantic import Field, PrivateAttr

from toolcards.core.actors import ActorUnavailable
from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.context import ContextState
from toolcards.core.errors import RetriableError, TransientError
from toolcards.core.names import glob_matcher
from toolcards.core.observer import TeamManagementToolObserver
from toolcards.core.pathargs import PathArgs
from toolcards.core.spec import annotate
from toolcards.governance.approvals.view import escaped_line
from toolcards.runtime.host import TeamHost
from toolcards.runtime.messaging import EVENT_TEXT_CHARS, member_activity, member_name, truncate
from toolcards.tools._common.caller import caller_address
from toolcards.tools._common.team import team_of
from toolcards.tools.team.guards import Outcome, fire_refusal, report, role_name, shown
from toolcards.tools.team.params import (
    ActivitySummarizer,
    FireMember,
    FireMembers,
    HireMember,
    HireMembers,
    TeamActivity,
    TeamMembersView,
    TeamRolesView,
)


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class TeamTool(ToolCard):
    """Team management for an agent: hire members by role, fire them, read the roster.

    The caller is the member the card is bound to (its observer's address): it never fires
    itself, a ``#`` tool actor, or a member matching ``protected``; it hires only the roles
    of ``hireable``. A model never names whom it hires: a member's name is its policy
    identity (``agent.<name>``), so a caller rule on ``agent.@lead-*`` holds.
    """

    protected: list[str] = Field(default_factory=list)
    """Globs of member names this card never fires (``@lead-*``, ``reviewer-1``)."""
    hireable: list[str] | None = None
    """Globs of the roles this card hires (``helper``, ``research-*``). None: the roles whose
    profile holds no policy role the caller's own profile lacks, so a member never hires its
    way to a policy role it does not have."""
    hire_members: bool | HireMembers = True
    fire_members: bool | FireMembers = True
    hire_member: bool | HireMember = True
    fire_member: bool | FireMember = True
    team_members: bool | TeamMembersView = True
    team_roles: bool | TeamRolesView = True
    team_activity: bool | TeamActivity = True

    _clock: Callable[[], float] = PrivateAttr(default=time.time)

    # ---- runtime wiring -----------------------------------------------------------------------

    def _team(self) -> TeamHost:
        return team_of(self)

    def _caller(self) -> str:
        return caller_address(self)

    def _manager(self) -> TeamManagementToolObserver:
        observer = self.observer_or_none()
        if not isinstance(observer, TeamManagementToolObserver):
            raise RetriableError("team management needs this card bound to a team member")
        return observer

    # ---- hire and fire ------------------------------------------------------------------------

    def _may_hire(self, role: str) -> bool:
        """``role`` matches ``hireable``; by default, its profile's policy roles are all held
        by the caller's own profile (an unknown role is left to the roster to report)."""
        if self.hireable is not None:
            return glob_matcher(self.hireable)(role)
        team, caller = self._team(), self._caller()
        own = {m.role for m in team.members() if m.name == caller}
        held = {r for p in team.profiles if p.role in own for r in p.roles}
        return all(set(p.roles) <= held for p in team.profiles if p.role == role)

    def _hire_one(self, role: object, name: object = None) -> Outcome:
        subject = shown(role)
        try:
            role = role_name(role)
        except RetriableError as exc:
            return Outcome(subject, False, f"not hired: {exc}")
        if name is not None and not isinstance(name, str):
            return Outcome(subject, False, "not hired: a name is a string")
        if not self._may_hire(role):
            return Outcome(subject, False, f"not hired: role {role!r} is not hireable here")
        try:
            hired = self._manager().on_hire(role, name)
        except ActorUnavailable as exc:  # the member's actor did not start
            return Outcome(subject, False, f"not hired: {_reason(exc)}")
        except (RetriableError, TransientError):
            raise
        except Exception as exc:  # unknown role, taken name, full role, a start failure
            return Outcome(subject, False, f"not hired: {_reason(exc)}")
        return Outcome(subject, True, f"hired {hired}")

    def _fire_one(self, name: object) -> Outcome:
        team = self._team()
        member, refusal = fire_refusal(name, self._caller(), self.protected, team.is_member)
        if member is None:
            return Outcome(shown(name), False, refusal or "not fired")
        try:
            self._manager().on_fire(member)
        except LookupError:
            return Outcome(member, False, "not fired: no such member (already fired)")
        except ActorUnavailable as exc:
            return Outcome(member, False, f"not fired: {_reason(exc)}")
        except (RetriableError, TransientError):
            raise
        except Exception as exc:
            return Outcome(member, False, f"not fired: {_reason(exc)}")
        return Outcome(member, True, "fired")

    @staticmethod
    def _batch(items: object, what: str, limit: int) -> list[object]:
        if isinstance(items, str):
            items = [items]
        if not isinstance(items, list) or not items:
            raise RetriableError(f"{what} must be a non-empty list")
        if len(items) > limit:
            raise RetriableError(f"at most {limit} {what} per call, got {len(items)}")
        return items

    def _hire_members(self, param: HireMembers) -> ToolFunc:
        def hire_members(roles: list[str]) -> str:
            """Hire one new team member per listed role; reports each hire with its name.

            Args:
                roles: Role names from the team's roles, one entry per member to hire
                    (repeat a role to hire several members of it).
            """
            items = self._batch(roles, "roles", param.max_per_call)
            return report("hired", [self._hire_one(role) for role in items])

        return annotate(hire_members)

    def _fire_members(self, param: FireMembers) -> ToolFunc:
        def fire_members(names: list[str]) -> str:
            """Fire team members by name; reports exactly what happened to each name.

            You cannot fire yourself, tool actors (names starting with '#') or protected
            members.

            Args:
                names: Member names as shown in the roster, such as @researcher-1.
            """
            items = self._batch(names, "names", param.max_per_call)
            return report("fired", [self._fire_one(name) for name in items])

        return annotate(fire_members, destructive=True)

    def _hired(self, role: object, name: object = None) -> str:
        outcome = self._hire_one(role, name)
        return outcome.detail if outcome.ok else f"{outcome.subject}: {outcome.detail}"

    def _hire_member(self, param: HireMember) -> ToolFunc:
        def hire_member(role: str) -> str:
            """Hire one member for a role; the team names it (@<role>-<n>)."""
            return self._hired(role)

        return annotate(hire_member, paths=PathArgs(role_name, fields=("role",)))

    def _hire_member_command(self, param: HireMember) -> ToolFunc:
        def hire_member(role: str, name: str | None = None) -> str:
            """Hire one member for a role, optionally under a chosen unique name."""
            return self._hired(role, name)

        return hire_member

    def _fire_member(self, param: FireMember) -> ToolFunc:
        def fire_member(name: str) -> str:
            """Fire one member by name (never yourself, a tool actor or a protected member)."""
            outcome = self._fire_one(name)
            return f"{outcome.subject}: {outcome.detail}"

        names = PathArgs(member_name, fields=("name",))  # `x` is `@x` before a policy decides
        return annotate(fire_member, destructive=True, paths=names)

    # ---- roster and roles ---------------------------------------------------------------------

    def _roster_items(self) -> dict[str, str]:
        caller = self._caller()
        return {
            m.name: f"{m.name} ({m.role}){' - you' if m.name == caller else ''}"
            for m in self._team().members()
        }

    def _role_items(self) -> dict[str, str]:
        items: dict[str, str] = {}
        for profile in self._team().profiles:
            about = " ".join(profile.description.split()) or "(no description)"
            items[profile.role] = f"{profile.role}: {about[:300]}"
        return items

    def _team_members_command(self, param: TeamMembersView) -> ToolFunc:
        def team_members() -> str:
            """List the team's members with their role, and whether each is busy."""
            caller = self._caller()
            lines = [
                f"- {m.name} ({m.role}) {'busy' if m.busy else 'idle'}"
                + (" - you" if m.name == caller else "")
                for m in self._team().members()
            ]
            return "\n".join(["Team members:", *lines]) if lines else "no members on the team"

        return team_members

    def _team_roles_command(self, param: TeamRolesView) -> ToolFunc:
        def team_roles() -> str:
            """List the roles members can be hired for."""
            lines = [f"- {line}" for line in self._role_items().values()]
            return "\n".join(["Roles:", *lines]) if lines else "no roles configured"

        return team_roles

    # ---- activity -----------------------------------------------------------------------------

    def _activity_report(self, param: TeamActivity, summarize_over: int | None) -> str:
        # lazy: deferred results, ~1x python -c pass; only the activity report
        from toolcards.tools.team.activity import Row, render

        team = self._team()
        caller = self._caller()
        roles = {m.name: m.role for m in team.members() if m.name != caller}
        now = self._clock()
        activities = member_activity(
            team.log.recent(),
            members=list(roles),
            max_task_chars=EVENT_TEXT_CHARS,
            stale_after=param.stale_after_seconds,
            now=now,
        )
        rows: list[Row] = []
        for name, activity in activities.items():
            text = activity.task or ""  # another member's words: one line, hidden characters shown
            task, summarized = truncate(escaped_line(text), param.max_task_chars), False
            if (
                activity.busy
                and summarize_over is not None
                and param.summarizer is not None
                and activity.message_id
                and len(text) > summarize_over
            ):
                summary = self._summary(param.summarizer, activity.message_id, text)
                if summary is not None:
                    task, summarized = escaped_line(summary), True
            rows.append(Row(name, roles[name], activity, task, summarized))
        return render(rows, now)

    def _summary(self, summarizer: ActivitySummarizer, message_id: str, text: str) -> str | None:
        # lazy: deferred results, ~1x python -c pass; only the activity report
        from toolcards.runtime import DeferredConfig, fetch_deferred
        from toolcards.tools.team.activity import CACHE_NAME, SummaryCache

        config = DeferredConfig(worker_timeout=summarizer.timeout_seconds)
        cache = self._team().tool_actor(CACHE_NAME, SummaryCache, config)
        payload = (summarizer.model, text, summarizer.max_summary_chars)
        found = fetch_deferred(
            cache,
            message_id,
            payload,
            attempts=summarizer.poll_attempts,
            delay=summarizer.poll_delay_seconds,
        )
        return found if isinstance(found, str) else None

    def _team_activity(self, param: TeamActivity) -> ToolFunc:
        if param.summarizer is None:

            def team_activity() -> str:
                """Show which other team members are busy right now and on what."""
                return self._activity_report(param, None)

            return annotate(team_activity, readonly=True)

        def team_activity_summarized(summarize_over: int | None = None) -> str:
            """Show which other team members are busy right now and on what.

            Args:
                summarize_over: Summarize tasks longer than this many characters (costs a
                    model call per new task); omit to get truncated task text only.
            """
            if summarize_over is not None and (
                isinstance(summarize_over, bool) or not isinstance(summarize_over, int)
            ):
                raise RetriableError("summarize_over must be a whole number of characters")
            if summarize_over is not None and summarize_over < 0:
                raise RetriableError("summarize_over must be 0 or more")
            return self._activity_report(param, summarize_over)

        team_activity_summarized.__name__ = "team_activity"
        team_activity_summarized.__qualname__ = "team_activity"
        return annotate(team_activity_summarized, readonly=True)

    def _roster_state(self, param: TeamMembersView) -> Callable[[], ContextState]:
        return lambda: ContextState(
            key="team_members",
            title="Team members",
            items=self._roster_items(),
            added_label="joined",
            removed_label="left",
        )

    def _roles_state(self, param: TeamRolesView) -> Callable[[], ContextState]:
        return lambda: ContextState(
            key="team_roles",
            title="Roles you can hire",
            items=self._role_items(),
            added_label="new role",
            removed_label="role removed",
        )

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "hire_members": CardCapability(tool=_hire_members, command=_hire_members),
        "fire_members": CardCapability(tool=_fire_members, command=_fire_members),
        "hire_member": CardCapability(tool=_hire_member, command=_hire_member_command),
        "fire_member": CardCapability(tool=_fire_member, command=_fire_member),
        "team_members": CardCapability(
            tool=_team_members_command, command=_team_members_command, context=_roster_state
        ),
        "team_roles": CardCapability(
            tool=_team_roles_command, command=_team_roles_command, context=_roles_state
        ),
        "team_activity": CardCapability(tool=_team_activity, command=_team_activity),
    }
