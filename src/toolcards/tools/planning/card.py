"""PlanningTool: a team-shared plan the model reads, searches and changes in batches."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from pydantic import Field, PrivateAttr, StrictInt, TypeAdapter

from toolcards.core.actors import ActorHandle
from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.channels import Channels
from toolcards.core.context import ContextState
from toolcards.core.errors import RetriableError
from toolcards.core.params import BaseToolParam
from toolcards.core.spec import annotate
from toolcards.tools._common.batch import parse_batch
from toolcards.tools._common.caller import writer_of
from toolcards.tools._common.fusion import (
    StoreRef,
    VectorLink,
    store_actor_name,
    tool_actor_with_link,
)
from toolcards.tools.planning.actor import ACTOR_NAME, COLLECTION, PlanningActor, PlanningConfig
from toolcards.tools.planning.models import (
    MAX_OWNER,
    STATUSES,
    TaskCreate,
    TaskStatus,
    TaskUpdate,
)
from toolcards.tools.planning.render import planning_summary, task_detail, task_line
from toolcards.tools.planning.views import BOARD

MAX_BATCH = 100
_CREATES = TypeAdapter(list[TaskCreate])
_UPDATES = TypeAdapter(list[TaskUpdate])
_IDS = TypeAdapter(list[StrictInt])  # as the approver saw them: no "1_0", true or 1.0


class GetPlanning(BaseToolParam):
    """The plan summary: totals, owners, the tasks in scope and a hint line."""

    expose: set[Channels] = Field(
        default_factory=lambda: {Channels.SYSTEM_PROMPT, Channels.COMMAND, Channels.RESOURCE}
    )
    filter_by_agent: bool = True
    """Show only the calling member's tasks (owner or creator); False shows every task."""
    max_tasks: int = Field(default=30, ge=1, le=500)
    """At most this many task lines; the rest is counted."""


class GetPlanningTask(BaseToolParam):
    """``get_planning_task(id)``: one task in full."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL, Channels.COMMAND})


class UpdatePlanning(BaseToolParam):
    """``update_planning(create, update, delete)``: one atomic batch."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})


class SearchPlanning(BaseToolParam):
    """``search_planning(status, owner, creator, query)``: filters plus fused ranking."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL, Channels.COMMAND})
    top_k: int = Field(default=10, ge=1, le=200)
    """Most tasks returned."""
    score_threshold: float = Field(default=0.3, ge=-1.0, le=1.0)
    """Semantic hits below this cosine similarity are ignored."""
    rrf_k: float = Field(default=10.0, gt=0)
    """The reciprocal-rank fusion constant."""


class PlanningTool(ToolCard):
    """A plan shared by the whole team: tasks with owners, dependencies and versions."""

    vector_store: StoreRef = True
    """True: the team's ``#VectorStore``; a name: that store; False: keyword search only."""
    get_planning: bool | GetPlanning = True
    get_planning_task: bool | GetPlanningTask = True
    update_planning: bool | UpdatePlanning = True
    search_planning: bool | SearchPlanning = True

    run_state: ClassVar[frozenset[str]] = ToolCard.run_state | {"_handle", "_link"}

    _handle: ActorHandle[PlanningActor] | None = PrivateAttr(default=None)
    _link: VectorLink | None = PrivateAttr(default=None)

    @property
    def optional_depends_on(self) -> list[str]:
        return ["VectorStoreTool"] if self.vector_store else []

    # ---- runtime wiring -----------------------------------------------------------------------

    def _actor(self) -> ActorHandle[PlanningActor]:
        if self._handle is None:
            config = PlanningConfig(vector_store=store_actor_name(self.vector_store))
            self._handle, self._link = tool_actor_with_link(self, ACTOR_NAME, PlanningActor, config)
        return self._handle

    def get_tools(self) -> list[ToolFunc]:
        self._actor()  # bound now: another vector_store setting for the actor fails the bind
        return super().get_tools()

    def _member(self) -> str:
        return writer_of(self)

    def _exposed_tools(self) -> list[str]:
        fields = ("get_planning_task", "search_planning", "update_planning")
        return [f for f in fields if self.exposed(f, Channels.TOOL_CALL) is not None]

    def _summary(self, param: GetPlanning) -> str:
        member = self._member()
        view = self._actor().ask(
            PlanningActor.summary, member, param.filter_by_agent, param.max_tasks
        )
        return planning_summary(
            view, member, param.filter_by_agent, param.max_tasks, self._exposed_tools()
        )

    # ---- capabilities -------------------------------------------------------------------------

    def _get_planning_task(self, param: GetPlanningTask) -> ToolFunc:
        def get_planning_task(id: StrictInt) -> str:
            """Read one task in full: status, version, owner, creator, dependencies, output.

            Args:
                id: The task id assigned by the board.
            """
            if isinstance(id, bool) or not isinstance(id, int):
                raise RetriableError(f"id must be an integer task id, got {id!r}")
            actor = self._actor()
            task = actor.ask(PlanningActor.get, id)
            deps = [actor.ask(PlanningActor.get, d) for d in task.depends_on]
            return task_detail(task, deps)

        return annotate(get_planning_task, readonly=True, idempotent=True)

    def _update_planning(self, param: UpdatePlanning) -> ToolFunc:
        def update_planning(
            create: list[TaskCreate] | None = None,
            update: list[TaskUpdate] | None = None,
            delete: list[StrictInt] | None = None,
        ) -> str:
            """Create, update and delete tasks in one atomic batch; returns the created ids.

            The board assigns ids and records you as creator. Each update names the task's
            current `version` (from get_planning_task); if someone changed the task since,
            the batch is rejected as a conflict: read it again and retry. Any error rejects
            the whole batch. `description` is at most 300 characters; `output` at most 150
            (longer output is truncated). Statuses: pending, started, completed, failed,
            cancelled.

            Args:
                create: New tasks: description, optional owner and depends_on (task ids).
                update: Changes: id and version, plus any of status, owner, output,
                    description, depends_on.
                delete: Ids of tasks to delete.
            """
            creates = parse_batch(_CREATES, create, "create", MAX_BATCH)
            updates = parse_batch(_UPDATES, update, "update", MAX_BATCH)
            deletes = parse_batch(_IDS, delete, "delete", MAX_BATCH)
            if not (creates or updates or deletes):
                raise RetriableError("nothing to do: give create, update or delete")
            result = self._actor().ask_once(  # a retry of a committed call writes nothing
                PlanningActor.apply, self._member(), creates, updates, deletes
            )
            parts = [f"created ids: {result['created']}"]
            if result["updated"]:
                versions = ", ".join(f"{i} (v{v})" for i, v in result["updated"].items())
                more = result.get("more_updated", 0)  # absent from results recorded before
                parts.append(f"updated: {versions}" + (f" and {more} more" if more else ""))
            if result["deleted"]:
                parts.append(f"deleted: {result['deleted']}")
            return "; ".join(parts)

        return annotate(update_planning)

    def _search_planning(self, param: SearchPlanning) -> ToolFunc:
        def search_planning(
            status: TaskStatus | None = None,
            owner: str | None = None,
            creator: str | None = None,
            query: str | None = None,
        ) -> str:
            """Find tasks by status, owner and creator, ranked by a natural-language query.

            Args:
                status: One of pending, started, completed, failed, cancelled.
                owner: Member name of the owner.
                creator: Member name of the creator.
                query: Words or a sentence describing the tasks; matches by keywords and
                    by meaning.
            """
            if status is not None and status not in STATUSES:
                raise RetriableError(f"status must be one of {', '.join(STATUSES)}")
            for arg, value in (("owner", owner), ("creator", creator), ("query", query)):
                if value is not None and not isinstance(value, str):
                    raise RetriableError(f"{arg} must be a string")
            for arg, value in (("owner", owner), ("creator", creator)):
                if value is not None and len(value) > MAX_OWNER:
                    raise RetriableError(
                        f"{arg} must be a member name of at most {MAX_OWNER} characters"
                    )
            text = (query or "").strip()[:1000]
            hits = None
            notice = ""
            actor = self._actor()
            if text and self._link is not None:
                hits, notice = self._link.query_above(
                    COLLECTION, text, param.top_k * 3, param.score_threshold
                )
            tasks, total = actor.ask(
                PlanningActor.search,
                status,
                owner,
                creator,
                text or None,
                hits,
                param.top_k,
                param.rrf_k,
            )
            lines = [f"- {task_line(t)} [v{t.version}]" for t in tasks] or ["(no matching tasks)"]
            if not text and total > len(tasks):
                lines.append(f"... {total - len(tasks)} more; narrow the filters")
            return "\n".join(([notice] if notice else []) + lines)

        return annotate(search_planning, readonly=True, idempotent=True)

    def _summary_prompt(self, param: GetPlanning) -> Callable[[], str]:
        return lambda: self._summary(param)

    def _summary_command(self, param: GetPlanning) -> ToolFunc:
        def get_planning() -> str:
            """Show the team plan."""
            return self._summary(param)

        return get_planning

    def _context_state(self, param: GetPlanning) -> Callable[[], ContextState]:
        def state() -> ContextState:
            tasks = self._actor().ask(PlanningActor.head, param.max_tasks)
            return ContextState(
                key="planning",
                title="Team planning",
                items={str(t.id): task_line(t) for t in tasks},
            )

        return state

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "get_planning": CardCapability(
            system_prompt=_summary_prompt,
            context=_context_state,
            command=_summary_command,
            resource=lambda card, param: BOARD,
        ),
        "get_planning_task": CardCapability(tool=_get_planning_task, command=_get_planning_task),
        "update_planning": CardCapability(tool=_update_planning),
        "search_planning": CardCapability(tool=_search_planning, command=_search_planning),
    }
