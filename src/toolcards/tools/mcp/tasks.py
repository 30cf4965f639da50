"""MCPTool's side of a server's tasks (the MCP 2026-07-28 ``io.modelcontextprotocol/tasks``
extension): the client declares the extension, so a server may answer a long ``tools/call``
with a task; :class:`TaskDriver` then polls ``tasks/get`` with a growing interval (from 50 ms
to the server's suggested interval, at most 5 s), reports the task's status message as the
call's progress, and reads the result, all within the call's timeout. When the call is
cancelled, or its time runs out, the task is cancelled on the server (``tasks/cancel``). A
server without tasks answers as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, Literal

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.types import CallToolResult, Request, RequestParams, Result, TextContent
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field

from toolcards.core.progress import report_progress

log = logging.getLogger("toolcards.mcp")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
_TERMINAL = ("completed", "failed", "cancelled")
_FIRST_POLL = 0.05
_LONGEST_POLL = 5.0
_CANCEL_WAIT = 5.0


class _Flat(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    task_id: str = Field(alias="taskId", max_length=512)
    status: str = Field(max_length=40)
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: float | None = Field(default=None, alias="pollIntervalMs")


class CreatedTask(Result, _Flat):
    """A ``tools/call`` the server runs as a task (``resultType: "task"``)."""

    result_type: Literal["task"] = Field(default="task", alias="resultType")


class TaskState(Result, _Flat):
    """What ``tasks/get`` answers: the task, with its result, error or questions."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class _TaskIdParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(alias="taskId")


class _GetTask(Request[_TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskIdParams


class _CancelTask(Request[_TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskIdParams


class TaskDriver(ClientExtension):
    """Drives a server's tasks to their end for one client (see the module docstring)."""

    identifier = TASKS_EXTENSION

    def __init__(self, server: str = "mcp") -> None:
        self.server = server
        self.started = 0
        """Tasks this client was given (a count, for the card's status)."""

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (
            ResultClaim(
                result_type="task",
                model=CreatedTask,
                resolve=self._drive,
                protocol_versions=frozenset(MODERN_PROTOCOL_VERSIONS),
            ),
        )

    async def _drive(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.started += 1
        session, task_id = ctx.session, created.task_id
        budget = ctx.read_timeout_seconds
        deadline = None if budget is None else time.monotonic() + budget
        delay, said, polls = _FIRST_POLL, created.status_message, 0
        try:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"task {task_id} of {ctx.tool_name} outlasted {budget:g} s")
                state = await session.send_request(
                    _GetTask(params=_TaskIdParams(taskId=task_id)),
                    TaskState,
                    request_read_timeout_seconds=left,
                )
                if state.status in _TERMINAL:
                    return _ending(state, ctx.tool_name)
                polls += 1
                if state.status_message and state.status_message != said:
                    said = state.status_message
                    report_progress(polls, None, said[:500])
                ceiling = _LONGEST_POLL
                if state.poll_interval_ms and state.poll_interval_ms > 0:
                    ceiling = min(max(state.poll_interval_ms / 1000, _FIRST_POLL), _LONGEST_POLL)
                wait = min(delay, ceiling)
                if deadline is not None:
                    wait = min(wait, max(deadline - time.monotonic(), 0.0))
                await anyio.sleep(wait)
                delay = min(delay * 2, ceiling)
        except BaseException:  # cancelled, out of time, or the connection broke
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT):
                try:
                    await session.send_request(
                        _CancelTask(params=_TaskIdParams(taskId=task_id)),
                        Result,
                        request_read_timeout_seconds=_CANCEL_WAIT,
                    )
                except Exception as exc:
                    log.info("cancelling task %s on %r: %s", task_id, self.server, exc)
            raise


def _ending(state: TaskState, tool: str) -> CallToolResult:
    """The call's result from the task's end."""
    if state.status == "completed":
        return CallToolResult.model_validate(state.result or {"content": []})
    if state.status == "failed":
        error = state.error or {}
        text = str(error.get("message") or state.status_message or "the task failed")[:2000]
    else:
        text = f"the task running {tool} was cancelled on the server"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
