"""A pydantic-ai toolset over one MCP server that survives failures and restarts.

Wraps ``pydantic_ai.mcp.MCPToolset``: a server that cannot be reached contributes no tools and
a readable note instead of failing the run; a broken connection is replaced by a fresh one;
tool names are made safe for every model provider. (No tool carries the output schema its
server declares: the transports leave it out of the listing, :mod:`.wire`.)

A call whose connection broke is repeated only when the server marks the tool read-only or
idempotent: a lost connection cannot tell whether the request reached the server (a server
that has its effect and then drops the connection looks the same as one that was gone before
the request), and a repeat would run an approved call twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import anyio
from pydantic_ai import ModelRetry, RunContext, ToolFailed, ToolReturn
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from toolcards.core.errors import ToolcardsError
from toolcards.governance.approvals.view import escaped_line
from toolcards.tools.mcp._http import HTTP_ERRORS, TRANSPORT_ERRORS
from toolcards.tools.mcp.names import sanitize_names
from toolcards.tools.mcp.oauth import OAuthError
from toolcards.tools.mcp.server_requests import ServerRequests
from toolcards.tools.mcp.wire_json import truncated

log = logging.getLogger("toolcards.mcp")

_RUN_NAMES = frozenset({"search_tools"})  # pydantic-ai's tool search
_OUTPUT_PREFIX = "final_result"  # pydantic-ai's output tools: final_result, final_result_<type>
LISTING_TOOLS = 10_000
"""Tools one listing (all its pages) may hold: the client keeps every page of it."""
LISTING_CHARS = 20_000_000
"""Characters of names, descriptions, schemas and cursors one listing may hold (a server
sending 250 pages of 9 M characters, each page under the message bound, took 3 GiB)."""
LISTING_PAGES = 250
"""Pages one listing may take (a server answering empty pages, each with a new cursor, kept
the listing going forever)."""
_CONNECTION_WORDS = ("connection closed", "session terminated", "not connected", "session not")


def require_mcp_client() -> Any:
    """The ``pydantic_ai.mcp`` module; ImportError naming the ``toolcards[mcp]`` extra."""
    try:
        # lazy: extra mcp
        import fastmcp  # noqa: F401
        from pydantic_ai import mcp
    except ImportError as exc:
        raise ImportError(
            "MCPTool needs the MCP client packages: pip install 'toolcards[mcp]'"
        ) from exc
    return mcp


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection to the server is gone (not a tool failure)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(is_connection_error(e) for e in exc.exceptions)
    gone = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    if isinstance(exc, (*gone, ConnectionError, EOFError, *TRANSPORT_ERRORS)):
        return True
    error = getattr(exc, "error", None)
    code = getattr(error, "code", getattr(exc, "code", None))
    if code == -32000:
        return True
    from fastmcp import exceptions  # lazy: extra mcp

    protocol_error = getattr(exceptions, "McpError", RuntimeError)
    if isinstance(exc, getattr(exceptions, "ToolError", ())):
        return False
    text = str(exc).lower()
    return isinstance(exc, RuntimeError | OSError | protocol_error) and any(
        w in text for w in _CONNECTION_WORDS
    )


def _short(exc: BaseException) -> str:
    """``exc`` as one line for a log or a model: its type and the first line of its text,
    escaped (:func:`escaped_line`), since the text is often the remote server's own (a
    JSON-RPC error's message) and must not act on a terminal or read as more lines."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return f"{name}: {escaped_line(text[:240])}" if text else name


class ListingTooLarge(ToolcardsError):
    """A server's tool listing holds more than :data:`LISTING_TOOLS` tools,
    :data:`LISTING_CHARS` characters or :data:`LISTING_PAGES` pages."""


def bounded_listing(client: Any, seconds: float | None = None) -> Callable[[], Any]:
    """``client.list_tools`` (a fastmcp client's) reading the pages of one listing within
    :data:`LISTING_TOOLS`, :data:`LISTING_CHARS` and :data:`LISTING_PAGES`, else
    :class:`ListingTooLarge`, and within ``seconds`` in all, else TimeoutError: the client's
    own follows up to 250 pages and keeps them all, and its timeout bounds each page, not
    the listing."""

    async def list_tools() -> list[Any]:
        with anyio.move_on_after(seconds):
            return await _read_pages(client)
        raise TimeoutError(f"the server's tool listing took longer than {seconds:g} s; not read")

    return list_tools


async def _read_pages(client: Any) -> list[Any]:
    """Every page of one listing of ``client``, until a page has no new cursor."""
    tools: list[Any] = []
    chars, cursor, seen = 0, None, set()
    for _ in range(LISTING_PAGES):
        page = await client.list_tools_mcp(cursor=cursor)
        tools += page.tools
        chars += len(page.next_cursor or "") + sum(
            len(t.name) + len(t.description or "") + len(str(t.input_schema)) for t in page.tools
        )
        if len(tools) > LISTING_TOOLS or chars > LISTING_CHARS:
            break
        if page.next_cursor is None or page.next_cursor in seen:
            return tools
        seen.add(page.next_cursor)
        cursor = page.next_cursor
    raise ListingTooLarge(
        f"the server lists more than {LISTING_TOOLS:,} tools, {LISTING_CHARS:,} characters "
        f"or {LISTING_PAGES} pages; not read"
    )


def _trusted_text(exc: BaseException) -> bool:
    """Whether the message of ``exc`` is written by this library or the HTTP stack (not by
    the server), so it may go into the model's instructions."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    ours = (OAuthError, ListingTooLarge, OSError, TimeoutError, ImportError)
    return isinstance(exc, (*ours, *HTTP_ERRORS))


def bound_result(result: Any, limit: int) -> Any:
    """``result`` with text longer than ``limit`` cut, with a marker; other content unchanged.

    A large structured result is turned into its JSON text, cut the same way. (The transport
    has already cut each string while reading it: a marker it left counts here.) A
    ``ToolReturn`` (an MCP Apps tool's) has what reaches the model bounded the same way: its
    return value and its content.
    """
    if isinstance(result, ToolReturn):
        value = bound_result(result.return_value, limit)
        return replace(result, return_value=value, content=bound_result(result.content, limit))
    if isinstance(result, str):
        return truncated(result, limit)
    if not isinstance(result, dict | list):
        return result
    text = json.dumps(result, default=str, ensure_ascii=False)
    return result if len(text) <= limit else truncated(text, limit)


def _annotations(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """Card annotation keys from the MCP tool hints (MCP defaults when a hint is absent)."""
    hints = (metadata or {}).get("annotations") or {}
    readonly = bool(hints.get("readOnlyHint", False))
    destructive = hints.get("destructiveHint")
    open_world = hints.get("openWorldHint")
    return {
        "readonly": readonly,
        "destructive": (not readonly)
        if destructive is None
        else bool(destructive) and not readonly,
        "idempotent": bool(hints.get("idempotentHint", False)),
        "open_world": True if open_world is None else bool(open_world),
        "requires_approval": False,
        "sensitive": [],
    }


def _repeatable(tool: ToolsetTool[Any]) -> bool:
    """Whether the server marks ``tool`` read-only or idempotent (running it twice is harmless)."""
    found = _annotations(tool.tool_def.metadata)
    return bool(found["readonly"] or found["idempotent"])


class MCPServerToolset(AbstractToolset[Any]):
    """The tools of one MCP server, renamed, isolated from failures and reconnecting."""

    def __init__(
        self,
        *,
        name: str,
        build: Callable[[], AbstractToolset[Any]],
        prefix: str = "",
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        retry_interval: float = 5.0,
        max_result_chars: int = 100_000,
        defer_loading: bool = False,
        max_listed_tools: int = 100,
        requests: ServerRequests | None = None,
        listing_seconds: float | None = None,
    ) -> None:
        self.name = name
        self._listing_seconds = listing_seconds  # one listing, all its pages (None: unbounded)
        self._requests = requests  # the server's own requests, answered per the card
        self._deferred = defer_loading  # every tool hidden until a tool search finds it
        self._max_listed = max_listed_tools  # more: every tool deferred, and said so
        self._crowded: int | None = None  # how many tools the server lists, when too many
        self._build = build
        self._prefix = prefix
        self._include = None if include is None else set(include)
        self._exclude = set(exclude)
        self._reserved: frozenset[str] = frozenset()
        self._refused: set[str] = set()
        self._retry_interval = retry_interval
        self._max_result_chars = max_result_chars
        self._inner: AbstractToolset[Any] | None = None
        self._entered = 0
        self._lock: asyncio.Lock | None = None
        self._last_attempt = float("-inf")
        self._routes: dict[str, tuple[str, ToolsetTool[Any]]] = {}
        self.last_error: str | None = None
        """Why the server is unavailable, or None while it is connected."""
        self._note: str | None = None
        self.connections = 0
        """How many connections were opened (reconnections included)."""

    @property
    def id(self) -> str | None:
        return f"mcp-{self.name}"

    @property
    def label(self) -> str:
        return f"MCP server {self.name!r}"

    @property
    def connected(self) -> bool:
        """Whether a session to the server is open."""
        return self._inner is not None

    def __repr__(self) -> str:
        return f"MCPServerToolset(name={self.name!r}, connected={self.connected})"

    # ---- lifecycle -----------------------------------------------------------------------

    def _get_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def __aenter__(self) -> MCPServerToolset:
        self._entered += 1
        if self._entered == 1:
            await self._connect(force=True)
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        if self._entered == 0:
            return None
        self._entered -= 1
        if self._entered == 0:
            async with self._get_lock():
                await self._close()
        return None

    async def _connect(self, *, force: bool = False) -> bool:
        async with self._get_lock():
            if self._inner is not None:
                return True
            now = time.monotonic()
            if not force and now - self._last_attempt < self._retry_interval:
                return False
            self._last_attempt = now
            try:
                inner = self._build()
                client = getattr(inner, "client", None)
                if client is not None:  # its listing within bounds (replaced on this one client)
                    client.list_tools = bounded_listing(client, self._listing_seconds)
                with ServerRequests.outside_calls():  # its tasks belong to no call
                    await inner.__aenter__()
            except Exception as exc:
                self._failed(exc)
                log.warning("MCP server %r is unavailable: %s", self.name, self.last_error)
                return False
            self._inner = inner
            self.last_error = self._note = None
            self.connections += 1
            return True

    async def _close(self) -> None:
        inner, self._inner = self._inner, None
        self._routes = {}
        if inner is None:
            return
        try:
            await inner.__aexit__(None, None, None)
        except Exception as exc:  # a dead connection often fails to close cleanly
            log.debug("closing MCP server %r: %s", self.name, _short(exc))

    async def _reconnect(self, broken: AbstractToolset[Any], reason: BaseException) -> bool:
        """Replace the ``broken`` session (unless a concurrent call already did) and connect."""
        async with self._get_lock():
            if self._inner is broken:
                log.info(
                    "MCP server %r connection lost (%s); reconnecting", self.name, _short(reason)
                )
                await self._close()
        connected = await self._connect(force=True)
        if not connected and self.last_error is None:
            self._failed(reason)
        return connected

    # ---- toolset -------------------------------------------------------------------------

    async def get_instructions(self, ctx: RunContext[Any]) -> str | None:
        if self._note is not None:
            note = f"{self.label} is unavailable ({self._note}); its tools are missing for now"
            return f"Note: {note}."
        if self._crowded is not None:
            return (
                f"Note: {self.label} offers {self._crowded} tools, more than "
                f"{self._max_listed}: find the one you need with tool search."
            )
        return None

    def _failed(self, exc: BaseException) -> None:
        self.last_error = _short(exc)
        self._note = self.last_error if _trusted_text(exc) else type(exc).__name__

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        if self._entered == 0:
            async with self:
                return await self.get_tools(ctx)
        for attempt in range(2):
            if self._inner is None and not await self._connect(force=attempt > 0):
                return {}
            inner = self._inner
            assert inner is not None
            try:
                found = await inner.get_tools(ctx)
            except Exception as exc:
                if attempt == 0 and is_connection_error(exc):
                    await self._reconnect(inner, exc)
                    continue
                self._failed(exc)
                log.warning("listing tools of MCP server %r failed: %s", self.name, self.last_error)
                return {}
            return self._rename(found)
        return {}

    def reserve(self, names: frozenset[str]) -> None:
        """Names this server's tools may not take (the local tools' beside it)."""
        self._reserved = names

    def _taken(self, name: str) -> bool:
        """Whether ``name`` is a local tool's: a card tool's, or one pydantic-ai adds to a run
        (tool search, the output tools) and refuses a toolset tool of that name, failing the
        run."""
        return name in self._reserved or name in _RUN_NAMES or name.startswith(_OUTPUT_PREFIX)

    def _rename(self, found: dict[str, ToolsetTool[Any]]) -> dict[str, ToolsetTool[Any]]:
        wanted = {
            n: t
            for n, t in found.items()
            if (self._include is None or n in self._include) and n not in self._exclude
        }
        names = sanitize_names(wanted, self._prefix)
        for original in [n for n in wanted if self._taken(names[n])]:
            del wanted[original]  # the server's name: it never shadows a local tool
            if original not in self._refused:
                self._refused.add(original)
                log.warning(
                    "MCP server %r lists a tool named %r, the name of a local tool: it is "
                    "left out (a tool_prefix on the card keeps it)",
                    self.name,
                    names[original],
                )
        tools: dict[str, ToolsetTool[Any]] = {}
        routes: dict[str, tuple[str, ToolsetTool[Any]]] = {}
        crowded = len(wanted) > self._max_listed
        if crowded and self._crowded != len(wanted):
            log.warning(
                "MCP server %r lists %d tools (more than max_listed_tools=%d): every one is "
                "deferred to tool search",
                self.name,
                len(wanted),
                self._max_listed,
            )
        self._crowded = len(wanted) if crowded else None
        for original, tool in wanted.items():
            new = names[original]
            metadata = {**(tool.tool_def.metadata or {}), **_annotations(tool.tool_def.metadata)}
            metadata["mcp_name"] = original
            deferred = self._deferred or crowded or tool.tool_def.defer_loading
            tool_def = replace(tool.tool_def, name=new, metadata=metadata, defer_loading=deferred)
            tools[new] = replace(tool, toolset=self, tool_def=tool_def)
            routes[new] = (original, tool)
        self._routes = routes
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if self._entered == 0:
            async with self:
                return await self.call_tool(name, tool_args, ctx, tool)
        route = self._routes.get(name)
        original, inner_tool = route if route is not None else (name, tool)
        if route is None:
            original = str((tool.tool_def.metadata or {}).get("mcp_name", name))
        if self._requests is None:
            return await self._call(name, original, tool_args, ctx, inner_tool)
        with self._requests.during(ctx, original):
            return await self._call(name, original, tool_args, ctx, inner_tool)

    async def _call(
        self,
        name: str,
        original: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        inner_tool: ToolsetTool[Any],
    ) -> Any:
        failure: BaseException | None = None
        for attempt in range(2):
            if self._inner is None and not await self._connect(force=True):
                break
            inner = self._inner
            assert inner is not None
            try:
                result = await inner.call_tool(original, tool_args, ctx, inner_tool)
            except ModelRetry:
                raise
            except Exception as exc:
                if not is_connection_error(exc):
                    return self._tool_failure(original, exc)
                failure = exc
                if attempt == 0:
                    await self._reconnect(inner, exc)
                if not _repeatable(inner_tool):
                    raise self._not_repeated(name, exc) from exc
                continue
            return bound_result(result, self._max_result_chars)
        reason = self.last_error or (_short(failure) if failure else "not connected")
        ending = "did not complete" if failure else "did not run"
        return f"error: {self.label} is unavailable ({reason}); the call to {name} {ending}"

    def _not_repeated(self, name: str, exc: BaseException) -> ToolFailed:
        """The end of a call whose connection broke once it was sent: a failure (audited as
        an error) that says it may have had its effect."""
        log.warning(
            "MCP server %r: the connection broke during a call of %r (%s); not repeated",
            self.name,
            name,
            _short(exc),
        )
        return ToolFailed(
            f"error: the connection to {self.label} broke during the call to {name}: it may "
            "have had its effect, and it is not repeated; check before you call it again"
        )

    def _tool_failure(self, original: str, exc: Exception) -> Any:
        from fastmcp import exceptions  # lazy: extra mcp

        model_fixable = tuple(
            getattr(exceptions, n) for n in ("ToolError", "McpError") if hasattr(exceptions, n)
        )
        if isinstance(exc, model_fixable):
            raise ModelRetry(f"{original} failed: {str(exc)[:2000]}") from exc
        log.warning("MCP tool %r of %r failed: %s", original, self.name, _short(exc))
        return f"error: {original} on {self.label} failed ({_short(exc)})"
