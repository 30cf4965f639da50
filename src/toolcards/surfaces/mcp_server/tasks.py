"""MCP tasks: a ``tools/call`` that asks for a task is answered at once with the task, and the
governed call runs in the server's background through the same executor (identity, policy,
approvals, timeout, guardrails, one audit row). Both forms are served:

- **2025-11-25** (core): ``params.task`` on ``tools/call`` gives ``{"task": {...}}``;
  ``tasks/get``, ``tasks/result`` (waits for the end, then answers the call's result),
  ``tasks/cancel`` and ``tasks/list``; tools say ``execution.taskSupport: "optional"``.
- **2026-07-28** (the ``io.modelcontextprotocol/tasks`` extension): a client that declares
  the extension in a request's capabilities gets a task (``resultType: "task"``) for a tool
  that supports one; ``tasks/get`` inlines the result (or ``inputRequests`` while the task
  waits for the client's answer to an approval), ``tasks/update`` delivers the answer,
  ``tasks/cancel`` acknowledges.

Tasks live in the team's store (:mod:`toolcards.stores.tasks`): any connection or process of
the team reads them, but only the principal that created a task (another's reads as unknown,
``-32602``). The process running a call keeps a lease on it; a task whose server stopped reads
``failed`` with that reason. A task is kept ``ttl`` after its creation (one hour by default,
at most a day), and however long its call runs: a running task stays listed, cancellable and
counted, so a principal never runs more than :attr:`TaskLimits.per_principal` tasks whatever
ttl it asks for. A result is kept up to :attr:`TaskLimits.max_result_bytes`. Cancelling a
task asks the process running its call to stop it (within a second, from any connection): the
task ends ``cancelled`` when the call was stopped (audited ``cancelled``), else with the call's
own result, since its effect happened; waiting for an approval, a task says so in
``statusMessage`` (and is ``input_required`` when the client itself is asked).
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp.types as types
from anyio.abc import TaskGroup
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from toolcards.core.identity import Identity
from toolcards.core.progress import progress_reporter
from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    ApprovalError,
    ApprovalRequest,
    ApprovalState,
    ApprovalTimedOut,
    Approver,
    GrantedEdit,
)
from toolcards.governance.redaction.redactor import storable
from toolcards.stores import tasks as rows
from toolcards.stores.tasks import SqlTasks, TaskRecord, TooManyTasks
from toolcards.surfaces.mcp_server.asking import APPROVAL_KEY, approves, question
from toolcards.surfaces.mcp_server.content import visible_json
from toolcards.surfaces.mcp_server.logs import LogForwarder
from toolcards.surfaces.mcp_server.sessions import InFlight

log = logging.getLogger(__name__)

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
TASK_CALL = "toolcards/tasks/call"
"""The internal method a task-asking ``tools/call`` is routed to (never served from the wire:
its result is a task, which the ``tools/call`` result check of the SDK would refuse)."""
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TOO_MANY = -32000
"""A wait refused past its caller's in-flight bound (a server error, as the HTTP guard's)."""
CANCELLED = "cancelled by the client"
CANCEL_WAIT = 5.0
"""Seconds a 2025-11-25 ``tasks/cancel`` waits for the call to stop before it answers the task
as it is (a tool in a thread runs to its end)."""

RunCall = Callable[[str, dict[str, Any], Identity, Approver | None, str], Awaitable[Any]]
"""``(tool, arguments, caller, approver, call id) -> CallToolResult``: one governed call."""


@dataclass(frozen=True)
class TaskLimits:
    """How long and how much the server keeps for tasks."""

    ttl: float = 3600.0
    """Seconds a task is kept from its creation (or until it ends, if later) when the
    client asks for no ttl."""
    max_ttl: float = 86400.0
    """The longest a client may ask for (seconds)."""
    per_principal: int = 100
    """Tasks one principal may hold: running ones, and ended ones not yet expired."""
    max_result_bytes: int = 1_048_576
    """The largest result kept (its JSON); a larger one is replaced by an error result."""
    poll_interval: float = 0.5
    """Seconds a client is told to wait between two polls."""
    lease: float = 15.0
    """Seconds a running task's lease lasts; the owner renews it every third of it."""
    page: int = 50
    """Tasks per ``tasks/list`` page."""


class TaskIdParams(types.RequestParams):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")
    task_id: str = Field(alias="taskId", max_length=200)


class TaskUpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def modern(ctx: Any) -> bool:
    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def declares_tasks(ctx: Any) -> bool:
    """Whether the 2026-07-28 request declares the tasks extension in its capabilities."""
    caps = getattr(ctx.session, "client_capabilities", None)
    extensions = getattr(caps, "extensions", None) or {}
    return TASKS_EXTENSION in extensions


def _not_found(task_id: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"task {task_id[:80]} not found")


@dataclass
class Running:
    """A task this process runs: its cancel scope and the caller's answer, when it comes."""

    scope: anyio.CancelScope
    answered: anyio.Event = field(default_factory=anyio.Event)


class TaskServer:
    """Creates, runs and answers tasks for one MCP server (``run_call`` is its governed call,
    ``store`` the team's task rows, ``broker`` its approvals, ``logs`` where a task's log
    records go)."""

    def __init__(
        self,
        store: SqlTasks,
        run_call: RunCall,
        identity_of: Callable[[Any], Identity],
        broker: ApprovalBroker,
        *,
        logs: LogForwarder,
        inbox: Approver | None,
        ask_client: bool,
        approval_timeout: float,
        limits: TaskLimits | None = None,
        in_flight: InFlight | None = None,
    ) -> None:
        self.store = store
        self.run_call = run_call
        self.identity_of = identity_of
        self.broker = broker
        self.logs = logs
        self.inbox = inbox
        self.ask_client = ask_client
        self.approval_timeout = approval_timeout
        self.limits = limits or TaskLimits()
        self.in_flight = in_flight
        """Where a 2025-11-25 wait for a task's end counts (None: unbounded, as over stdio)."""
        self.owner = f"{secrets.token_hex(8)}"
        self._running: dict[str, Running] = {}
        self._group: TaskGroup | None = None
        self._loop_thread: int | None = None

    # -- wiring ---------------------------------------------------------------------------

    def capabilities(self) -> types.ServerTasksCapability:
        """The 2025-11-25 ``tasks`` capability: list, cancel, task-augmented tools/call."""
        return types.ServerTasksCapability(
            list=types.TasksListCapability(),
            cancel=types.TasksCancelCapability(),
            requests=types.ServerTasksRequestsCapability(
                tools=types.TasksToolsCapability(call=types.TasksCallCapability())
            ),
        )

    def register(self, server: Any, create: Callable[..., Awaitable[Any]]) -> None:
        """Serve the task methods on ``server`` (``create``: the handler of a task call)."""
        server.add_request_handler(TASK_CALL, types.CallToolRequestParams, create)
        server.add_request_handler("tasks/get", TaskIdParams, self._get)
        server.add_request_handler("tasks/result", TaskIdParams, self._result)
        server.add_request_handler("tasks/cancel", TaskIdParams, self._cancel)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self._list)
        server.add_request_handler("tasks/update", TaskUpdateParams, self._update)
        server.middleware.append(self._route)

    async def _route(self, ctx: Any, call_next: Any) -> Any:
        """A ``tools/call`` asking for a task goes to :data:`TASK_CALL`; that method itself is
        not callable from the wire."""
        if ctx.method == TASK_CALL:
            raise MCPError(METHOD_NOT_FOUND, "Method not found", TASK_CALL)
        if ctx.method == "tools/call" and self.asks(ctx):
            return await call_next(replace(ctx, method=TASK_CALL))
        if ctx.method in ("tasks/result", "tasks/list") and modern(ctx):
            raise MCPError(METHOD_NOT_FOUND, "Method not found", ctx.method)
        if ctx.method == "tasks/update" and not modern(ctx):
            raise MCPError(METHOD_NOT_FOUND, "Method not found", ctx.method)
        return await call_next(ctx)

    def asks(self, ctx: Any) -> bool:
        """Whether this ``tools/call`` asks for a task (2025-11-25: ``params.task``;
        2026-07-28: the extension declared, and no answer to an earlier question)."""
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if modern(ctx):
            return declares_tasks(ctx) and not params.get("inputResponses")
        return isinstance(params.get("task"), dict)

    @contextmanager
    def running(self, group: TaskGroup) -> Iterator[None]:
        """Run tasks in ``group`` while the server serves; tasks still running when it stops
        end ``failed`` (the server stopped), and so do live tasks of a server that died."""
        self._group = group
        group.start_soon(self._keep_leases)
        try:
            yield
        finally:
            self._group = None
            left = list(self._running)
            with _quiet("ending the tasks of a stopping server"):
                self.store.end_owned(self.owner, left, "the server stopped before it finished")

    async def _keep_leases(self) -> None:
        """While tasks run here: renew their leases, and learn of cancels and answers made
        elsewhere (within a second: a cancel noticed late lets the call run to its end)."""
        every = min(self.limits.lease / 3, 1.0)
        since = time.time()
        while True:
            now = time.time()
            if not self._running:  # nothing to renew or to hear of
                since = now - 1.0
            else:
                with _quiet("renewing task leases"):
                    await anyio.to_thread.run_sync(
                        self.store.renew, self.owner, now + self.limits.lease
                    )
                    changed = await anyio.to_thread.run_sync(self.store.changed, self.owner, since)
                    since = now - 1.0
                    self._heard(changed)
            await anyio.sleep(every)

    def _heard(self, changed: list[tuple[str, str | None]]) -> None:
        """Cancel the calls whose cancel was asked; wake those waiting for an answer."""
        for task_id, answer in changed:
            running = self._running.get(task_id)
            if running is None or answer is None:
                continue
            if answer == rows.CANCEL:
                running.scope.cancel()
            else:
                running.answered.set()

    # -- creating -------------------------------------------------------------------------

    async def create(
        self, ctx: Any, params: types.CallToolRequestParams, who: Identity, call_id: str
    ) -> dict[str, Any]:
        """Record the task and start its call; the task as the creating revision shows it."""
        if self._group is None:
            raise MCPError(INTERNAL_ERROR, "tasks are not served here")
        limits = self.limits
        asked = params.task.ttl if params.task is not None else None
        ttl = limits.ttl if asked is None else min(max(asked / 1000, 1.0), limits.max_ttl)
        now = time.time()
        record = TaskRecord(
            task_id=secrets.token_urlsafe(18),
            principal=who.id,
            tool_id=params.name,
            call_id=call_id,
            status=rows.WORKING,
            status_message=None,
            created_at=now,
            updated_at=now,
            expires_at=now + ttl,
            owner=self.owner,
            lease_until=now + limits.lease,
        )
        try:
            await anyio.to_thread.run_sync(
                lambda: self.store.create(record, per_principal=limits.per_principal)
            )
        except TooManyTasks as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        running = Running(anyio.CancelScope())
        self._running[record.task_id] = running
        args = dict(params.arguments or {})
        self._group.start_soon(self._run, record, args, who, running, ctx.session, modern(ctx))
        return self._created(ctx, record)

    def _created(self, ctx: Any, record: TaskRecord) -> dict[str, Any]:
        task = self._task(record)
        if modern(ctx):
            return {**self._flat(record), "resultType": "task"}
        return {"task": task}

    # -- running --------------------------------------------------------------------------

    async def _run(
        self,
        record: TaskRecord,
        args: dict[str, Any],
        who: Identity,
        running: Running,
        session: Any,
        ask_client: bool,
    ) -> None:
        """Run the task's call to its end, its log records (and its failure's) going to the
        connection that created it (``session``, that request's), never to another's."""
        task_id, store = record.task_id, self.store
        approver = self._approver(record, running, ask_client and self.ask_client)
        with self.logs.for_task(session, {RELATED_TASK: {"taskId": task_id}}):
            try:
                with running.scope, self._progress(task_id):
                    result = await self.run_call(
                        record.tool_id, args, who, approver, record.call_id
                    )
                status: str = rows.CANCELLED  # stopped before its end: audited cancelled
                message: str | None = CANCELLED
                text = None
                if not running.scope.cancelled_caught:  # a cancel too late changes nothing
                    status, message, text = self._ending(record.tool_id, result)
                await anyio.to_thread.run_sync(
                    lambda: store.update(
                        task_id,
                        status=status,
                        status_message=message,
                        result=text,
                        input_requests=None,
                    )
                )
            except Exception as exc:  # one task's failure never reaches the server's task group
                await self._failed(record, exc)
            except BaseException:  # the server stops under it: never silently lost
                with anyio.CancelScope(shield=True), _quiet("ending a task"):
                    await anyio.to_thread.run_sync(
                        lambda: store.update(
                            task_id,
                            status=rows.FAILED,
                            status_message="the server stopped before it finished",
                            input_requests=None,
                        )
                    )
                raise
            finally:
                self._running.pop(task_id, None)

    async def _failed(self, record: TaskRecord, exc: Exception) -> None:
        """End the task ``failed`` with an error result. Logged by type and a short message:
        a traceback could carry the call's arguments."""
        kind = type(exc).__name__
        log.warning("task %s of %s failed: %s: %s", record.task_id, record.tool_id, kind,
                    storable(str(exc)[:200]))  # fmt: skip
        message = f"error: the task failed ({kind})"
        text = json.dumps({"result": _error_result(message)})
        with anyio.CancelScope(shield=True), _quiet("ending a failed task"):
            await anyio.to_thread.run_sync(
                lambda: self.store.update(
                    record.task_id,
                    status=rows.FAILED,
                    status_message=message,
                    result=text,
                    input_requests=None,
                )
            )

    def _ending(self, tool_id: str, result: Any) -> tuple[str, str | None, str]:
        """The status, message and stored result of a call that ran to its end (a result
        too large to keep is replaced by an error)."""
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        text = _json_text({"result": dumped})
        if len(text.encode()) > self.limits.max_result_bytes:
            dumped = _error_result(
                f"error: the result of {tool_id} is larger than the "
                f"{self.limits.max_result_bytes} bytes a task keeps"
            )
            text = json.dumps({"result": dumped})
        if dumped.get("isError"):
            first = _first_text(dumped)
            return rows.FAILED, None if first is None else storable(first), text
        return rows.COMPLETED, None, text

    @contextmanager
    def _progress(self, task_id: str) -> Iterator[None]:
        """The tool's progress reports, as the task's status message (one a second at most,
        written from a worker thread)."""
        last = [0.0]
        lock = threading.Lock()

        def report(done: float, total: float | None, message: str | None) -> None:
            now = time.monotonic()
            with lock:
                if now - last[0] < 1.0:
                    return
                last[0] = now
            of = f"/{total:g}" if total else ""
            text = f"progress {done:g}{of}" + (f": {storable(message[:200])}" if message else "")
            with _quiet("recording task progress"):
                self.store.update(task_id, status_message=text)

        with progress_reporter(report):
            yield

    def _approver(self, record: TaskRecord, running: Running, ask_client: bool) -> Approver:
        """Who decides the task's call when it needs approval: the client (its answer to the
        task's question, ``tasks/update``) or the out-of-band inbox, whichever answers first;
        the task says that it waits meanwhile."""
        store, broker, inbox, task_id = self.store, self.broker, self.inbox, record.task_id
        timeout = self.approval_timeout

        async def approver(request: ApprovalRequest) -> bool | GrantedEdit:
            waits = f"waiting for approval {request.approval_id}"
            if ask_client:
                asking = {
                    APPROVAL_KEY: question(request).model_dump(
                        by_alias=True, mode="json", exclude_none=True
                    )
                }
                fields: dict[str, Any] = {
                    "status": rows.INPUT_REQUIRED,
                    "status_message": f"{waits}: answer it, or an approver decides it",
                    "input_requests": json.dumps(asking),
                    "approval_id": request.approval_id,
                }
            elif inbox is not None:
                hint = f"toolcards approvals grant {request.approval_id}"
                fields = {"status_message": f"{waits} by an approver ({hint})"}
            else:
                return False
            await anyio.to_thread.run_sync(lambda: store.update(task_id, **fields))
            try:
                if not ask_client:
                    assert inbox is not None
                    return await inbox(request)
                return await _client_or_inbox(broker, store, record, request, running, timeout)
            finally:
                with anyio.CancelScope(shield=True), _quiet("updating a task"):
                    await anyio.to_thread.run_sync(
                        lambda: store.update(
                            task_id, status=rows.WORKING, status_message=None, input_requests=None
                        )
                    )

        return approver

    # -- reading --------------------------------------------------------------------------

    async def _record(
        self, ctx: Any, task_id: str, *, expired: bool = False, result: bool = False
    ) -> TaskRecord:
        """The caller's task (``result``: with its stored result, read only for an answer
        that carries it)."""
        who = self.identity_of(ctx)
        found = await anyio.to_thread.run_sync(
            lambda: self.store.get(task_id, who.id, expired=expired, result=result)
        )
        if found is None:
            raise _not_found(task_id)
        return found

    async def _ended(
        self, ctx: Any, task_id: str, *, expired: bool = False, result: bool = False
    ) -> TaskRecord:
        """The task once it ended (polling the store, growing to the poll interval)."""
        delay = 0.02
        while True:
            record = await self._record(ctx, task_id, expired=expired, result=result)
            if record.terminal:
                return record
            await anyio.sleep(delay)
            delay = min(delay * 2, self.limits.poll_interval)

    def _task(self, record: TaskRecord) -> dict[str, Any]:
        """The 2025-11-25 task object."""
        task: dict[str, Any] = {
            "taskId": record.task_id,
            "status": record.status,
            "createdAt": _iso(record.created_at),
            "lastUpdatedAt": _iso(record.updated_at),
            "ttl": int(record.ttl * 1000),
            "pollInterval": int(self.limits.poll_interval * 1000),
        }
        if record.status_message:
            task["statusMessage"] = record.status_message
        return task

    def _flat(self, record: TaskRecord) -> dict[str, Any]:
        """The 2026-07-28 task fields (a tool's error result is a completed task there)."""
        status = record.status
        stored = json.loads(record.result) if record.result else {}
        if status == rows.FAILED and "result" in stored:
            status = rows.COMPLETED
        flat: dict[str, Any] = {
            "taskId": record.task_id,
            "status": status,
            "createdAt": _iso(record.created_at),
            "lastUpdatedAt": _iso(record.updated_at),
            "ttlMs": int(record.ttl * 1000),
            "pollIntervalMs": int(self.limits.poll_interval * 1000),
        }
        if record.status_message:
            flat["statusMessage"] = record.status_message
        return flat

    async def _get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        record = await self._record(ctx, params.task_id, result=modern(ctx))  # inlined
        if not modern(ctx):
            return self._task(record)
        got = {**self._flat(record), "resultType": "complete"}
        stored = json.loads(record.result) if record.result else {}
        if got["status"] == rows.COMPLETED:
            got["result"] = stored.get("result", {})
        elif got["status"] == rows.FAILED:
            got["error"] = {"code": INTERNAL_ERROR, "message": record.status_message or "failed"}
        elif got["status"] == rows.INPUT_REQUIRED and record.input_requests:
            got["inputRequests"] = json.loads(record.input_requests)
        return got

    @contextmanager
    def _counted(self, ctx: Any) -> Iterator[None]:
        """A 2025-11-25 request that waits for a task's end, counted in its caller's requests in
        flight while it waits: it waits on in the session when its client closes the POST, so
        only this count bounds how many one caller has at once (a 2026-07-28 request counts in
        the HTTP guard). Past the bound, an error at once."""
        in_flight = self.in_flight
        if in_flight is None or modern(ctx):
            yield
            return
        who = self.identity_of(ctx)
        if not in_flight.enter(who):
            limit = in_flight.limit
            raise MCPError(TOO_MANY, f"too many requests in flight for {who.id} (at most {limit})")
        try:
            yield
        finally:
            in_flight.leave(who)

    async def _result(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        """Waits until the task ends (counted in the caller's requests in flight)."""
        with self._counted(ctx):
            record = await self._ended(ctx, params.task_id, result=True)
        stored = json.loads(record.result) if record.result else {}
        related = {RELATED_TASK: {"taskId": record.task_id}}
        if "result" in stored:
            result = {k: v for k, v in stored["result"].items() if k != "resultType"}
            return {**result, "_meta": {**result.get("_meta", {}), **related}}
        if record.status == rows.CANCELLED:
            return {**_error_result("cancelled: the task was cancelled"), "_meta": related}
        raise MCPError(INTERNAL_ERROR, record.status_message or "the task failed")

    async def _cancel(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        """Ask the process running the call to stop it: the task ends with what the call did
        (a call at its end completes). A 2025-11-25 client is answered the task once it
        ended, or as it is after :data:`CANCEL_WAIT` (counted in its requests in flight)."""
        with self._counted(ctx):
            return await self._stop(ctx, params)

    async def _stop(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        record = await self._record(ctx, params.task_id)
        if record.terminal:
            if modern(ctx):
                return {"resultType": "complete"}
            raise MCPError(INVALID_PARAMS, f"task {record.task_id} already ended ({record.status})")
        task_id, running = record.task_id, self._running.get(record.task_id)
        fields: dict[str, Any] = {"answer": rows.CANCEL}
        if running is None and record.owner == self.owner:  # its call no longer runs here
            fields = {"status": rows.CANCELLED, "status_message": CANCELLED, "input_requests": None}
        await anyio.to_thread.run_sync(lambda: self.store.update(task_id, **fields))
        if running is not None:
            running.scope.cancel()
        if modern(ctx):
            return {"resultType": "complete"}
        with anyio.move_on_after(CANCEL_WAIT):  # read back past its ttl too: it just ended
            return self._task(await self._ended(ctx, task_id, expired=True))
        return self._task(await self._record(ctx, task_id, expired=True))

    async def _list(self, ctx: Any, params: types.PaginatedRequestParams) -> dict[str, Any]:
        who = self.identity_of(ctx)
        after = None
        if params.cursor:
            after = await anyio.to_thread.run_sync(self.store.get, params.cursor, who.id)
            if after is None:
                raise MCPError(INVALID_PARAMS, "unknown cursor")
        size = self.limits.page
        found = await anyio.to_thread.run_sync(self.store.page, who.id, after, size + 1)
        listed: dict[str, Any] = {"tasks": [self._task(r) for r in found[:size]]}
        if len(found) > size:
            listed["nextCursor"] = found[size - 1].task_id
        return listed

    async def _update(self, ctx: Any, params: TaskUpdateParams) -> dict[str, Any]:
        """The client's answer to the task's question (an approval): a yes grants the pending
        request as the caller's own grant (``approval: client``); a no refuses the call. An
        answer to a question no longer asked changes nothing."""
        record = await self._record(ctx, params.task_id)
        answer = params.input_responses.get(APPROVAL_KEY)
        asked = record.status == rows.INPUT_REQUIRED and record.answer != rows.CANCEL
        if not asked or record.approval_id is None or answer is None:
            return {"resultType": "complete"}
        yes = approves(answer)
        if yes:
            request = self.broker.get(record.approval_id)
            if request is not None and request.principal == record.principal:
                with contextlib.suppress(ApprovalError):  # the inbox answered first
                    self.broker.grant_by_caller(request, surface="mcp")
        await anyio.to_thread.run_sync(
            lambda: self.store.update(record.task_id, answer="yes" if yes else "no")
        )
        running = self._running.get(record.task_id)
        if running is not None:
            running.answered.set()
        return {"resultType": "complete"}


async def _client_or_inbox(
    broker: ApprovalBroker,
    store: SqlTasks,
    record: TaskRecord,
    request: ApprovalRequest,
    running: Running,
    timeout: float,
) -> bool:
    """The first answer to ``request``: a decision in the inbox (or the client's yes, which
    is one), or the client's no; :class:`ApprovalTimedOut` when none comes in time."""
    deadline = time.monotonic() + min(timeout, request.expires_at - time.time())
    delay = 0.02
    while True:
        state = await anyio.to_thread.run_sync(broker.state, request)
        if state is ApprovalState.GRANTED:
            return True
        if state is not ApprovalState.PENDING:
            return False
        current = await anyio.to_thread.run_sync(store.get, record.task_id, record.principal)
        if current is not None and current.answer == "no":
            broker.withdraw(request)
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise ApprovalTimedOut(timeout)
        with anyio.move_on_after(min(delay, left)):
            await running.answered.wait()
        running.answered = anyio.Event()
        delay = min(delay * 2, 0.5)


def _json_text(value: Any) -> str:
    """JSON text every store and client takes: a lone surrogate (a name decoded from bytes
    that are not UTF-8, which no UTF-8 store or JSON writer takes) is kept as the text of its
    ``\\u`` escape, as the audit shows it."""
    return json.dumps(visible_json(value), ensure_ascii=False)


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _first_text(dumped: dict[str, Any]) -> str | None:
    for block in dumped.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text", ""))[:500]
    return None


@contextmanager
def _quiet(what: str) -> Iterator[None]:
    """Log (never raise) a store failure of background bookkeeping."""
    try:
        yield
    except Exception:
        log.warning("%s failed", what, exc_info=True)
