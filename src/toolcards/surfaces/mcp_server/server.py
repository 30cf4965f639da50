"""An MCP server over the governed executor (official ``mcp`` SDK 2.x, low-level server).

tools/list shows the capabilities the caller may call (the policy's listing filter) with
their JSON schemas and MCP annotations; tools/call runs through the executor with
``surface="mcp"``. Every failure is an ``isError`` result whose text is safe to show a
model; ``_meta["toolcards/outcome"]`` names the outcome. A call the client cancels
(``notifications/cancelled``) is stopped, gets no response, and is audited ``cancelled`` (by the
executor: one row per call, under the call id its approval rows carry too).
Approvals go through :mod:`toolcards.surfaces.approval`; progress through :mod:`.progress`;
logging through :mod:`.logs`; resources and prompts through :mod:`.resources` and
:mod:`.prompts`; ``completion/complete`` through :mod:`.completions`; output schemas and
structured content through :mod:`.structured`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn, TypeVar

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from toolcards.core.identity import Identity
from toolcards.governance.approvals.types import GrantedEdit
from toolcards.governance.capability import ToolCapability
from toolcards.governance.executor.calls import fresh_call_id
from toolcards.stores.tasks import SqliteTasks
from toolcards.surfaces.approval import (
    ApprovalChannel,
    AskedApprover,
    InboxApprover,
    approval_channel,
)
from toolcards.surfaces.mcp_server.asking import AskingClient
from toolcards.surfaces.mcp_server.completions import Completer
from toolcards.surfaces.mcp_server.content import tool_content
from toolcards.surfaces.mcp_server.logs import LogForwarder
from toolcards.surfaces.mcp_server.options import MCPOptions
from toolcards.surfaces.mcp_server.progress import CallProgress
from toolcards.surfaces.mcp_server.prompts import PromptCatalog
from toolcards.surfaces.mcp_server.resources import ResourceCatalog
from toolcards.surfaces.mcp_server.sessions import SESSION_HEADER, InFlight, header
from toolcards.surfaces.mcp_server.stdio import stdio_transport
from toolcards.surfaces.mcp_server.structured import (
    JSON_SCHEMA_DIALECT,
    StructuredOutput,
    output_schemas,
    structured_text,
)
from toolcards.surfaces.mcp_server.tasks import TASKS_EXTENSION, TOO_MANY, TaskServer, modern
from toolcards.surfaces.outcomes import classify
from toolcards.surfaces.runtime import SurfaceRuntime

log = logging.getLogger(__name__)

IDENTITY_SCOPE_KEY = "toolcards.identity"
"""Where the HTTP transport leaves the resolved caller in the ASGI scope."""
META_KEY = "toolcards/outcome"
SESSION_NAME_KEY = "toolcards.session"
"""Where a connection's lifespan context holds its session name."""

IdentityOf = Callable[[Any], Identity]
Handler = Callable[[Any, Any], Awaitable[Any]]
T = TypeVar("T")

COUNTED = (
    "on_list_resources", "on_read_resource", "on_subscribe_resource", "on_get_prompt",
    "on_completion",
)  # fmt: skip
"""The requests besides ``tools/call`` that count in their caller's requests in flight: each
looks something up, and runs on in its 2025-11-25 session when its client closes the POST."""


def toolcards_version() -> str:
    """This package's version, as ``serverInfo.version`` reports it."""
    try:
        return version("toolcards")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def mcp_tool(
    cap: ToolCapability, output: StructuredOutput | None = None, *, tasks: bool = False
) -> types.Tool:
    """The MCP view of a capability: its JSON schema (dialect declared: 2020-12, as pydantic
    writes it), its output schema when its return type has one (:mod:`.structured`), the
    four hints, always explicit (MCP assumes a tool with no hints is destructive and
    open-world), and ``execution.taskSupport: "optional"`` when it runs as a task."""
    ann = cap.annotations
    schema = cap.json_schema or {"type": "object", "properties": {}}
    execution = types.ToolExecution(task_support="optional") if tasks else None
    return types.Tool(
        name=cap.id,
        description=cap.description or None,
        input_schema={"$schema": JSON_SCHEMA_DIALECT, **schema},
        output_schema=None if output is None else output.schema,
        annotations=types.ToolAnnotations(
            read_only_hint=ann.readonly,
            destructive_hint=ann.destructive and not ann.readonly,
            idempotent_hint=ann.idempotent or ann.readonly,
            open_world_hint=ann.open_world,
        ),
        execution=execution,
    )


def _fresh_name() -> str:
    return f"mcp-{secrets.token_hex(8)}"


@contextlib.asynccontextmanager
async def _connection_named(_server: Any) -> AsyncIterator[dict[str, Any]]:
    """The server's lifespan, which ``Server.run`` enters for each connection it serves (stdio,
    in memory): the connection's session name, in every request's ``lifespan_context``. The
    HTTP session manager enters it once for all its sessions: never read over HTTP."""
    yield {SESSION_NAME_KEY: _fresh_name()}


def _error(message: str, meta: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        is_error=True,
        _meta={META_KEY: meta},
    )


def _too_many_calls(caller: str, limit: int) -> types.CallToolResult:
    message = f"too many calls in flight for {caller} (at most {limit}): wait for one to end"
    return _error(message, {"outcome": "rate_limited", "kind": "rate_limited"})


def _too_many_requests(caller: str, limit: int) -> NoReturn:
    raise MCPError(TOO_MANY, f"too many requests in flight for {caller} (at most {limit})")


class _TaskServing(Server[Any]):
    """The low-level server, declaring the 2025-11-25 ``tasks`` capability beside the others
    (2026-07-28 clients see the tasks extension instead)."""

    task_capability: types.ServerTasksCapability | None = None

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        if kwargs.get("protocol_version") not in MODERN_PROTOCOL_VERSIONS:
            capabilities.tasks = self.task_capability
        return capabilities


class GovernedMCPServer:
    """Builds the low-level MCP ``Server`` for a :class:`SurfaceRuntime`.

    ``identity_of(request_context)`` names the caller: stdio uses the runtime's local
    principal; HTTP reads what the auth middleware put in the ASGI scope. ``options``: what
    the server offers beside the tools (default: :meth:`MCPOptions.of` the runtime).
    ``in_flight``: where a tool call, a read of a resource or a prompt, a subscription, a
    completion or a resource listing (:data:`COUNTED`), or a wait for a task's end, of a
    2025-11-25 session counts while it runs (HTTP: the count that bounds each caller's
    2026-07-28 requests too; None: unbounded, as over stdio).
    """

    def __init__(
        self,
        runtime: SurfaceRuntime,
        *,
        identity_of: IdentityOf | None = None,
        name: str = "toolcards",
        approvals: ApprovalChannel | None = None,
        options: MCPOptions | None = None,
        in_flight: InFlight | None = None,
    ) -> None:
        self.runtime = runtime
        self.in_flight = in_flight
        self.options = options = options if options is not None else MCPOptions.of(runtime)
        self.identity_of = identity_of or (lambda _ctx: runtime.local)
        self.approvals = approvals or approval_channel(
            runtime.approval,
            runtime.executor.approvals,
            runtime.approval_timeout,
            runtime.has_approver(),
        )
        self.logs = LogForwarder()
        self.resources = ResourceCatalog(runtime, options, self.identity_of)
        self.prompts = PromptCatalog(runtime, options.prompts, self.identity_of)
        self.completions = Completer(runtime, self.identity_of, self.prompts, self.resources)
        self._outputs = output_schemas(options.tool_functions)
        outputs = self._outputs
        self._tools = {cap.id: mcp_tool(cap, outputs.get(cap.id)) for cap in runtime.registry}
        self._tasked = {
            cap.id: mcp_tool(cap, outputs.get(cap.id), tasks=True) for cap in runtime.registry
        }
        handlers: dict[str, Any] = {
            **self.resources.handlers(),
            **self.prompts.handlers(),
            **self.completions.handlers(),
        }
        for counted in COUNTED:
            handlers[counted] = self._counting(handlers[counted])
        with warnings.catch_warnings():  # logging is deprecated only for a later protocol
            warnings.simplefilter("ignore")
            self.server = _TaskServing(
                name,
                version=toolcards_version(),
                on_list_tools=self._list_tools,
                on_call_tool=self._bounded_call,
                on_set_logging_level=self._set_level,
                lifespan=_connection_named,
                **handlers,
            )
        self.server.middleware.append(self.logs.per_request)  # a request's records: its own
        self._task_sessions: dict[str, str] = {}
        """The session of each task created here whose call has not started (by its call id)."""
        self.tasks = self._task_server(runtime)
        self.asking = AskingClient(runtime.executor.approvals)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions())

    @property
    def capabilities(self) -> types.ServerCapabilities:
        return self.server.get_capabilities(NotificationOptions())

    async def serve(self, read: Any, write: Any) -> None:
        """Serve one connection (the log forwarder and resource watchers run meanwhile)."""
        async with self.running():
            await self.server.run(read, write, self.initialization_options())

    def running(self) -> Any:
        """An async context for the server's background work (log forwarding, team events)."""

        @contextlib.asynccontextmanager
        async def scope() -> Any:
            async with anyio.create_task_group() as tasks:
                with (
                    self.logs.installed(tasks),
                    self.resources.watching(tasks),
                    self.tasks.running(tasks),
                ):
                    try:
                        yield self
                    finally:
                        tasks.cancel_scope.cancel()

        return scope()

    def _task_server(self, runtime: SurfaceRuntime) -> TaskServer:
        """Tasks over the runtime's task rows (this process's memory without one)."""
        store = self.options.tasks
        if store is None:
            store = SqliteTasks(":memory:")
            runtime.own(store.close)
        broker = runtime.executor.approvals
        inbox = InboxApprover(broker, runtime.approval_timeout) if runtime.has_approver() else None
        served = TaskServer(
            store,
            self._task_call,
            self.identity_of,
            broker,
            logs=self.logs,
            inbox=inbox,
            ask_client=runtime.approval == "client",
            approval_timeout=runtime.approval_timeout,
            in_flight=self.in_flight,
        )
        served.register(self.server, self._create_task)
        self.server.task_capability = served.capabilities()
        self.server.extensions = {TASKS_EXTENSION: {}}
        return served

    def task_support(self, who: Identity, tool_id: str) -> bool:
        """Whether ``who``'s call of ``tool_id`` runs as a task when asked: a long-running
        tool, or one that may wait for a human's approval."""
        cap = self.runtime.registry.get(tool_id)
        if cap is None:
            return False
        ann = cap.annotations
        return (
            ann.long_running
            or ann.requires_approval
            or self.runtime.policy.may_approve(who, tool_id)
        )

    def _session_name(self, ctx: Any) -> str:
        """The name of the MCP session a request comes in: the run of its calls (per-run
        budgets) and the session a grant or an approval is bound to. Not ``ctx.session``: the
        SDK makes a new one for every request. Over HTTP, the session's ``mcp-session-id``
        (hashed: the name is stored, the id lets one in); over a connection of its own (stdio,
        in memory), the name its lifespan holds. A 2026-07-28 request opens no session: it is
        its own run (and so is any request that names no session)."""
        request = getattr(ctx, "request", None)
        if modern(ctx):
            return _fresh_name()
        if request is None:  # a connection of its own: its lifespan is entered for it alone
            named = getattr(ctx, "lifespan_context", None) or {}
            return str(named.get(SESSION_NAME_KEY) or _fresh_name())
        opened = header(getattr(request, "scope", None) or {}, SESSION_HEADER)
        if opened is None:
            return _fresh_name()
        return f"mcp-{hashlib.sha256(opened.encode()).hexdigest()[:16]}"

    # -- handlers -----------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: Any, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        who = self.identity_of(ctx)
        visible = self.runtime.visible_to(who)
        listed = [self._tasked[i] if self.task_support(who, i) else self._tools[i] for i in visible]
        return types.ListToolsResult(tools=listed)

    async def _create_task(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        """A ``tools/call`` that asked for a task: the task, when the tool runs as one; else
        (2026-07-28: the server decides) the call's result, or (2025-11-25) ``-32601``."""
        who = self.identity_of(ctx)
        name = params.name
        visible = self.runtime.policy.visible(who, name) and name in self._tools
        if not (visible and self.task_support(who, name)):
            if visible and not modern(ctx):
                raise MCPError(-32601, f"{name} does not run as a task")
            result = await self._bounded_call(ctx, params)
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)
        call_id = fresh_call_id(f"mcp-task-{ctx.request_id}")
        self._task_sessions[call_id] = self._session_name(ctx)  # its call is the session's too
        try:
            return await self.tasks.create(ctx, params, who, call_id)
        except BaseException:
            self._task_sessions.pop(call_id, None)
            raise

    async def _task_call(
        self, name: str, args: dict[str, Any], who: Identity, approver: Any, call_id: str
    ) -> types.CallToolResult:
        """A task's governed call (in the server's background): its MCP result."""
        asked: list[bool] = []

        async def asking(request: Any) -> bool | GrantedEdit:
            asked.append(True)
            return await approver(request)  # type: ignore[no-any-return]

        session = self._task_sessions.pop(call_id, None)
        result = await self.runtime.executor.call(
            name, args, who, surface="mcp", approver=asking, call_id=call_id, session=session
        )
        with anyio.CancelScope(shield=True):  # audited: a cancel now would contradict its row
            made = await self._result(name, result, human_asked=bool(asked), note=None)
        return made

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.logs.set_level(ctx.session, params.level)
        return types.EmptyResult()

    async def _bounded(
        self, ctx: Any, run: Callable[[], Awaitable[T]], refused: Callable[[str, int], T]
    ) -> T:
        """``run()``, counted in :attr:`in_flight` while it runs when it comes in a 2025-11-25
        session: it runs on in the session when its client closes the POST, so only this count
        bounds how many one caller has at once (a 2026-07-28 request counts for as long as it
        lasts, in the HTTP guard). Past the bound, ``refused(caller id, bound)`` at once, as the
        guard's 429: nothing is looked up, decided or audited."""
        in_flight = self.in_flight
        if in_flight is None or modern(ctx):
            return await run()
        who = self.identity_of(ctx)
        if not in_flight.enter(who):
            return refused(who.id, in_flight.limit)
        try:
            return await run()
        finally:
            in_flight.leave(who)

    def _counting(self, handler: Handler) -> Handler:
        """``handler``, counted in its caller's requests in flight (:meth:`_bounded`); past the
        bound, a ``-32000`` error."""

        async def counted(ctx: Any, params: Any) -> Any:
            return await self._bounded(ctx, lambda: handler(ctx, params), _too_many_requests)

        return counted

    async def _bounded_call(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        """A tools/call, counted in its caller's requests in flight (:meth:`_bounded`); past the
        bound, an error result: no call is made, so none is audited."""
        return await self._bounded(ctx, lambda: self._call_tool(ctx, params), _too_many_calls)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        who = self.identity_of(ctx)
        name, args = params.name, params.arguments
        asking = self.runtime.approval == "client" and modern(ctx)
        approval: Any = AskedApprover(None) if asking else self.approvals.for_call(ctx)
        # one id for every row of the call (approval request and decision, its end): the
        # request id to find it by, made unique (a client's ids repeat across sessions)
        call_id = fresh_call_id(f"mcp-{ctx.request_id}")
        session = self._session_name(ctx)
        if asking:  # a retry carrying the client's answer resumes the call it answers
            resumed, approval.approver = self.asking.resume(who, name, params)
            if resumed is not None:  # in the request's session: a retry comes in one of its own
                call_id, session = resumed.call_id, resumed.session
        progress = CallProgress(ctx)
        # its records: the request's (the ``logs.per_request`` middleware, drained before the
        # response); a cancelled call (notifications/cancelled) is audited by the executor
        try:
            with progress.bound():
                result = await self.runtime.executor.call(
                    name, args, who, surface="mcp", approver=approval.approver, call_id=call_id,
                    session=session,
                )  # fmt: skip
            await progress.drain()
        except Exception:  # a deferral or a bug below: never a crash of the session
            log.exception("tool call %s failed outside the executor", name)
            return _error(f"error: {name} failed", {"outcome": "error"})
        if result.approval is not None and asking:  # the client answers, or the inbox
            return self.asking.ask(result.approval, args)
        if result.approval is not None:  # nobody decides it later: an MCP call never resumes
            self.runtime.executor.approvals.withdraw(result.approval)
        note = getattr(approval, "note", None)  # why it was not decided where configured
        return await self._result(name, result, human_asked=approval.human_asked, note=note)

    async def _result(
        self, name: str, result: Any, *, human_asked: bool, note: str | None
    ) -> types.CallToolResult:
        """The MCP result of a governed call's :class:`ExecutionResult`."""
        view = classify(result, human_asked=human_asked)
        if view.is_error:
            message = (
                view.message
                if note is None or view.kind != "approval"
                else f"{view.message}; {note}"
            )
            return _error(message, view.meta(result.retry_after))
        output = self._outputs.get(name)
        if output is not None:
            done = await _structured(name, output, result.value)
        else:
            content, structured = await _content(result.value)
            done = types.CallToolResult(
                content=content, structured_content=structured, is_error=False
            )
        if result.edit is None and result.grant_id is None:
            return done
        meta = {META_KEY: view.meta()}  # other arguments ran, or a grant let the call run
        told = [types.TextContent(type="text", text=result.edit.note)] if result.edit else []
        return done.model_copy(update={"content": [*told, *done.content], "meta": meta})


_INLINE_CHARS = 65_536
_INLINE_ITEMS = 64


def _small(value: Any) -> bool:
    """Cheap to encode on the event loop: a short string, a scalar, or a shallow container
    of a few scalars and short strings."""
    if isinstance(value, str):
        return len(value) < _INLINE_CHARS
    if value is None or isinstance(value, bool | int | float):
        return True
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return False
    if len(value) > _INLINE_ITEMS:
        return False
    return all(
        v is None or isinstance(v, bool | int | float) or (isinstance(v, str) and len(v) < 1024)
        for v in items
    )


async def _content(value: Any) -> tuple[list[types.ContentBlock], dict[str, Any] | None]:
    """Small values inline; anything bigger is encoded off the event loop."""
    if _small(value):
        return tool_content(value)
    return await anyio.to_thread.run_sync(tool_content, value)


async def _structured(name: str, output: StructuredOutput, value: Any) -> types.CallToolResult:
    """The result of a tool with an output schema: its value dumped by the declared type, as
    structured content and as the same JSON in text; a value of another type is an error
    (structured content that the schema would refuse is never sent)."""
    plain = (
        output.dump(value) if _small(value) else await anyio.to_thread.run_sync(output.dump, value)
    )
    if plain is None:
        log.warning("tool %s returned a value that is not of its declared return type", name)
        return _error(f"error: {name} returned a value that does not match its output schema",
                      {"outcome": "error"})  # fmt: skip
    text = types.TextContent(type="text", text=structured_text(plain))
    return types.CallToolResult(content=[text], structured_content=plain, is_error=False)


async def run_stdio(runtime: SurfaceRuntime, options: MCPOptions | None = None) -> None:
    """Serve over stdin/stdout as the runtime's local principal until the client leaves."""
    mcp_server = GovernedMCPServer(runtime, options=options)
    async with stdio_transport(runtime.http_limits.max_body) as (read, write):
        await mcp_server.serve(read, write)
