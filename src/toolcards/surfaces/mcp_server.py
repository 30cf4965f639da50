"""An MCP server over the governed executor (official ``mcp`` SDK, low-level server).

tools/list shows the capabilities the caller may call (the policy's listing filter) with
their JSON schemas and MCP annotations; tools/call runs through the executor with
``surface="mcp"``. Calls that need a human ask through MCP elicitation when the client
declared that capability, and fail closed otherwise. Every failure is an ``isError`` result
whose text is safe to show a model; ``_meta["toolcards/outcome"]`` names the outcome.

Requires mcp 1.x (``mcp.server.lowlevel``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from pydantic_core import to_jsonable_python

from toolcards.governance.approvals import ApprovalRequest
from toolcards.governance.capability import Capability
from toolcards.governance.identity import Identity
from toolcards.surfaces.outcomes import classify
from toolcards.surfaces.runtime import SurfaceRuntime

log = logging.getLogger(__name__)

IDENTITY_SCOPE_KEY = "toolcards.identity"
"""Where the HTTP transport leaves the resolved caller in the ASGI scope."""
META_KEY = "toolcards/outcome"
APPROVAL_TIMEOUT = 300.0
_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this call",
            "description": "Yes runs the call once, with exactly these arguments.",
        }
    },
    "required": ["approve"],
}

IdentityOf = Callable[[Any], Identity]


def mcp_tool(cap: Capability) -> types.Tool:
    """The MCP view of a capability: schema and the four hints, always explicit (MCP assumes
    a tool with no hints is destructive and open-world)."""
    ann = cap.annotations
    return types.Tool(
        name=cap.id,
        description=cap.description or None,
        inputSchema=cap.json_schema or {"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(
            readOnlyHint=ann.readonly,
            destructiveHint=ann.destructive and not ann.readonly,
            idempotentHint=ann.idempotent or ann.readonly,
            openWorldHint=ann.open_world,
        ),
    )


def render_value(value: Any) -> tuple[str, dict[str, Any] | None]:
    """A tool value as text (strings as they are, the rest as JSON) and, for objects, the
    structured content."""
    if isinstance(value, str):
        return value, None
    plain = to_jsonable_python(value, fallback=str)
    text = json.dumps(plain, ensure_ascii=False, indent=2)
    return text, plain if isinstance(plain, dict) else None


def approval_prompt(request: ApprovalRequest) -> str:
    """What a human reads before approving (arguments redacted by governance)."""
    args = json.dumps(to_jsonable_python(dict(request.args), fallback=str), ensure_ascii=False)
    return (
        f"Approve a tool call?\n"
        f"tool: {request.tool_id}\ncaller: {request.principal}\n"
        f"arguments: {args[:4000]}\nwhy: {request.reason}"
    )


class GovernedMCPServer:
    """Builds the low-level MCP ``Server`` for a :class:`SurfaceRuntime`.

    ``identity_of(request_context)`` names the caller: stdio uses the runtime's local
    principal; HTTP reads what the auth middleware put in the ASGI scope.
    """

    def __init__(
        self,
        runtime: SurfaceRuntime,
        *,
        identity_of: IdentityOf | None = None,
        name: str = "toolcards",
        approval_timeout: float = APPROVAL_TIMEOUT,
        approvals: Any = None,
    ) -> None:
        self.runtime = runtime
        self.identity_of = identity_of or (lambda _ctx: runtime.local)
        self.approval_timeout = approval_timeout
        self.approvals = approvals
        """An approver channel asked instead of the client: ``approvals.for_call(ctx)`` gives
        ``.approver`` and ``.human_asked`` (the dashboard's inbox)."""
        self.server: Server[Any, Any] = Server(name)
        self._tools = {cap.id: mcp_tool(cap) for cap in runtime.registry}
        self.server.request_handlers[types.ListToolsRequest] = self._list_tools
        self.server.request_handlers[types.CallToolRequest] = self._call_tool

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions())

    def _caller(self) -> Identity:
        return self.identity_of(self.server.request_context)

    async def _list_tools(self, _req: types.ListToolsRequest) -> types.ServerResult:
        who = self._caller()
        visible = self.runtime.visible_to(who)
        return types.ServerResult(types.ListToolsResult(tools=[self._tools[i] for i in visible]))

    async def _call_tool(self, req: types.CallToolRequest) -> types.ServerResult:
        ctx = self.server.request_context
        who = self.identity_of(ctx)
        asked = False
        approver = None
        channel = self.approvals.for_call(ctx) if self.approvals is not None else None
        if channel is not None:
            approver = channel.approver
        elif _can_elicit(ctx.session):

            async def approver(request: ApprovalRequest) -> bool:
                nonlocal asked
                asked = True
                return await self._elicit(ctx.session, request, ctx.request_id)

        try:
            result = await self.runtime.executor.call(
                req.params.name, req.params.arguments, who, surface="mcp", approver=approver
            )
        except Exception:  # a deferral or a bug below: never a crash of the session
            log.exception("tool call %s failed outside the executor", req.params.name)
            return _error(f"error: {req.params.name} failed", {"outcome": "error"})
        view = classify(result, human_asked=asked or bool(channel and channel.human_asked))
        if not view.is_error:
            text, structured = render_value(result.value)
            return types.ServerResult(
                types.CallToolResult(
                    content=[types.TextContent(type="text", text=text)],
                    structuredContent=structured,
                    isError=False,
                )
            )
        return _error(view.message, view.meta(result.retry_after))

    async def _elicit(self, session: Any, request: ApprovalRequest, request_id: Any) -> bool:
        with anyio.move_on_after(self.approval_timeout):
            answer = await session.elicit(
                approval_prompt(request), _APPROVAL_SCHEMA, related_request_id=request_id
            )
            content = answer.content or {}
            return bool(answer.action == "accept" and content.get("approve") is True)
        return False


def _can_elicit(session: Any) -> bool:
    params = getattr(session, "client_params", None)
    caps = getattr(params, "capabilities", None)
    return getattr(caps, "elicitation", None) is not None


def _error(message: str, meta: dict[str, Any]) -> types.ServerResult:
    return types.ServerResult(
        types.CallToolResult(
            content=[types.TextContent(type="text", text=message)],
            isError=True,
            _meta={META_KEY: meta},
        )
    )


async def run_stdio(runtime: SurfaceRuntime) -> None:
    """Serve over stdin/stdout as the runtime's local principal until the client leaves."""
    from mcp.server.stdio import stdio_server

    mcp_server = GovernedMCPServer(runtime)
    async with stdio_server() as (read, write):
        await mcp_server.server.run(read, write, mcp_server.initialization_options())
