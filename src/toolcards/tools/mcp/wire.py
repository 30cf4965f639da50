"""The MCP client's transports, reading each server message within bounds while it arrives
(:mod:`.wire_json`): what a server sends costs this process what it keeps of it.

:class:`BoundedStdio` runs a stdio server (a process of its own group, stopped with it) and
reads its standard output through a :class:`~.wire_json.JsonTrimmer`; :func:`bounded_client`
makes the HTTP client of the streamable-HTTP and SSE transports, whose responses are read the
same way: a JSON body as one message, an event stream event by event, anything else cut.

Every transport hands on a tool listing without its tools' output schemas
(:func:`_session_message`): the client never keeps one, so no result is checked against a
server's schema, nor a type made of it, at each call on the event loop (a 4,000-character
schema of 18 nested unions held the loop 9 s and 941 MB per call, past the call's timeout).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import signal
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urljoin

import anyio
import mcp.types as mcp_types
from anyio.abc import Process
from fastmcp.client.transports import ClientTransport
from fastmcp.client.transports.base import TransportOptions
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from toolcards.core.tls import default_verify
from toolcards.tools.mcp._http import http
from toolcards.tools.mcp.oauth import scope_refusal
from toolcards.tools.mcp.wire_json import JsonTrimmer, WireBounds

__all__ = ["BoundedStdio", "bounded_client"]

STOP_GRACE = 2.0
"""Seconds a server has to exit once its input is closed, then once it is asked (SIGTERM)."""
OTHER_BODY = 1 << 20
"""Bytes kept of an HTTP body that is neither JSON nor an event stream (an error page)."""
FIELD = 4096
"""Characters kept of an event-stream line that is not data (``event:``, ``id:``)."""
KEPT_FIELDS = ("event", "id", "retry")
"""An event's fields kept besides its data, the last line of each: the SDK reads only these,
and only the last of each. Comments and other fields are dropped as they are read (kept until
the event ended, a server sending them and never ending it grew this process by 90 MiB a
second)."""
RAW_DATA = 1 << 16
"""Characters kept of an event's data that is not JSON (the SSE ``endpoint`` event)."""


_SCHEMA_KEYS = ("outputSchema", "output_schema")
"""The keys of a tool's output schema the MCP SDK reads (its alias and its field's name)."""
_MAY_NAME_SCHEMA = re.compile(r"output(?:S|_s)chema|\\u")
"""What the text of a message naming an output schema holds: the key, or a ``\\u`` escape
spelling it."""


def _session_message(item: str | ValueError) -> SessionMessage | Exception:
    """The message of JSON text ``item`` as the SDK reads it (or why it is none), each tool it
    lists (a ``tools/list`` result) without its output schema."""
    if isinstance(item, ValueError):
        return item
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(item, by_name=False)
    except ValueError as exc:  # not an MCP message: the session reports it
        return exc
    tools = message.result.get("tools") if isinstance(message, mcp_types.JSONRPCResponse) else None
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict):
            for key in _SCHEMA_KEYS:
                tool.pop(key, None)
    return SessionMessage(message)


def _sdk_text(item: str) -> str:
    """JSON text ``item`` for an HTTP transport of the SDK to read: a message that may name an
    output schema (:data:`_MAY_NAME_SCHEMA`) is read as :func:`_session_message` reads it and
    written again, any other text is unchanged."""
    message = _session_message(item) if _MAY_NAME_SCHEMA.search(item) else None
    if not isinstance(message, SessionMessage):
        return item  # none named, or no MCP message (the SDK reports it)
    return message.message.model_dump_json(by_alias=True, exclude_unset=True)


class BoundedStdio(ClientTransport):
    """A stdio MCP server started per connection; its messages read within ``bounds``."""

    def __init__(
        self,
        command: str,
        args: list[str],
        *,
        env: dict[str, str],
        cwd: str | None,
        bounds: WireBounds,
    ) -> None:
        self.command, self.args, self.env, self.cwd, self.bounds = command, args, env, cwd, bounds

    def __repr__(self) -> str:
        return f"<BoundedStdio {self.command!r}>"

    @contextlib.asynccontextmanager
    async def connect_session(
        self, *, transport_options: TransportOptions | None = None, **session_kwargs: Any
    ) -> AsyncIterator[Any]:
        options = transport_options or TransportOptions()
        process = await anyio.open_process(
            [self.command, *self.args],
            env={**get_default_environment(), **self.env},
            cwd=self.cwd,
            stderr=None,
            start_new_session=True,  # its own group: stopped with everything it started
        )
        into, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, out = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._read, process, into)
                tasks.start_soon(self._write, process, out)
                try:
                    async with options.session_class(read, write, **session_kwargs) as session:
                        yield session
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
                for stream in (into, read, write, out):
                    await stream.aclose()

    async def _read(self, process: Process, into: Any) -> None:
        assert process.stdout is not None
        trimmer = JsonTrimmer(self.bounds)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with into:
                async for chunk in process.stdout:
                    for item in trimmer.feed(decoder.decode(chunk)):
                        await into.send(_session_message(item))

    async def _write(self, process: Process, out: Any) -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with out:
                async for message in out:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode())


async def _stop(process: Process) -> None:
    """Close the server's input, give it :data:`STOP_GRACE` to exit, then end its group."""
    assert process.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    for sig in (None, signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if hasattr(os, "killpg"):
                    os.killpg(process.pid, sig)
                else:  # pragma: no cover - Windows: the server alone
                    process.send_signal(sig)
        with anyio.move_on_after(STOP_GRACE):
            while process.returncode is None:  # not wait(): a child holding the pipes blocks it
                await anyio.sleep(0.02)
        if process.returncode is not None:
            break
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.aclose()


# -- HTTP -------------------------------------------------------------------------------------


def bounded_client(bounds: WireBounds, url: str, granted: str | None = None) -> Callable[..., Any]:
    """An ``httpx_client_factory`` for the MCP HTTP transports of the server at ``url`` whose
    responses are read within ``bounds`` (asking servers not to compress them) and whose
    requests go only under ``url``'s folder and the host's grant ``granted`` that admitted it
    (:func:`~.oauth.scope_refusal`): the server may point the client elsewhere on its origin
    (an SSE ``endpoint`` event, a redirect the SDK follows), where the card's headers and
    credential would reach another tenant: such a request fails before it is sent, an
    endpoint event as it is read. Nor may a request name another host than its URL's in its
    ``Host`` header: a front end routing by it would take the credential to that host."""
    refusal = scope_refusal(url, granted)

    async def within(request: Any) -> None:
        if refused := refusal(str(request.url)) or _other_host(request):
            raise http.RequestError(refused, request=request)

    def endpoint(data: str) -> None:  # the SSE server names where its messages go
        if refused := refusal(urljoin(url, data)):
            raise http.SSEError(refused)  # the SDK reports it (a POST failing, it would wait)

    def factory(
        headers: dict[str, str] | None = None,
        timeout: Any = None,
        auth: Any = None,
        **options: Any,
    ) -> Any:
        async def bound(response: Any) -> None:
            response.stream = _BoundedBody(response, bounds, endpoint)
            # the body is read as UTF-8 whatever charset the server names: the JSON and event
            # streams are re-encoded so, and a charset like punycode decodes in quadratic time
            response.encoding = "utf-8"

        if "verify" not in options and "cert" not in options:  # a cert is loaded into verify
            options["verify"] = default_verify(http)
        options["follow_redirects"] = False  # the SDK follows within the origin: checked here
        return http.AsyncClient(
            headers={"Accept-Encoding": "identity", **(headers or {})},
            timeout=timeout if timeout is not None else http.Timeout(30.0, read=300.0),
            auth=auth,
            event_hooks={"request": [within], "response": [bound]},
            **options,
        )

    return factory


def _other_host(request: Any) -> str | None:
    """Why ``request`` may not be sent (None when it may): its ``Host`` headers are not just
    the one httpx sets from its URL (a card's or a caller's headers may add or replace it)."""
    own = request.url.netloc.decode("ascii")
    hosts = request.headers.get_list("host")
    if hosts == [own]:
        return None
    return f"not sent to {own!r} with Host {', '.join(hosts)!r}: only the URL names the host"


_KINDS = ("application/json", "text/event-stream")
"""The bodies read message by message, each known by how its content type starts."""


class _BoundedBody(http.AsyncByteStream):
    """A response body read within bounds: JSON as one message, an event stream event by
    event, anything else cut at :data:`OTHER_BODY` bytes."""

    def __init__(self, response: Any, bounds: WireBounds, endpoint: Callable[[str], None]) -> None:
        self._inner = response.stream
        self._bounds = bounds
        self._endpoint = endpoint
        # named as the SDK names them (a type that starts so): an ``application/jsonx`` body it
        # reads as JSON must not pass here as another kind, unbounded and with its schemas
        kind = response.headers.get("content-type", "").strip().lower()
        self._kind = next((k for k in _KINDS if kind.startswith(k)), kind)
        self._encoded = response.headers.get("content-encoding", "identity").lower()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._encoded not in ("", "identity"):  # asked for identity, got something else
            yield b"the server compressed its answer, which this client does not read"
            return
        if self._kind == "application/json":
            trimmer = JsonTrimmer(self._bounds, lines=False)
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            async for chunk in self._inner:
                trimmer.feed(decoder.decode(chunk))
            for item in trimmer.end():
                yield (_sdk_text(item) if isinstance(item, str) else json.dumps(str(item))).encode()
        elif self._kind == "text/event-stream":
            events = _Events(self._bounds, self._endpoint)
            async for chunk in self._inner:
                out = events.feed(chunk)
                if out:
                    yield out
        else:
            left = OTHER_BODY
            async for chunk in self._inner:
                if left > 0:
                    yield chunk[:left]
                left -= len(chunk)


class _Events:
    """An event stream, passed on event by event with each event's JSON data bounded."""

    def __init__(self, bounds: WireBounds, endpoint: Callable[[str], None] | None = None) -> None:
        self._bounds = bounds
        self._endpoint = endpoint
        """Called with the data of an ``endpoint`` event before it is passed on (and may
        raise)."""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._carry = ""
        self._state = _START
        self._line = ""
        """The start of a line not yet known to be data, or the field line being read."""
        self._space = False
        """A data value's first character is still to come (one space after ``data:`` goes)."""
        self._json: JsonTrimmer | None = None
        self._raw: list[str] | None = None
        self._raw_size = 0
        self._fields: dict[str, str] = {}

    def feed(self, chunk: bytes) -> bytes:
        text = self._carry + self._decoder.decode(chunk)
        self._carry = ""
        if text.endswith("\r"):  # perhaps the first half of a CRLF
            text, self._carry = text[:-1], "\r"
        out: list[str] = []
        start = 0
        for end in _LINE_END.finditer(text):
            self._piece(text[start : end.start()], True, out)
            start = end.end()
        if start < len(text):
            self._piece(text[start:], False, out)
        return "".join(out).encode()

    def _piece(self, piece: str, ended: bool, out: list[str]) -> None:
        if self._state == _START:
            line = self._line + piece
            if not ended and len(line) < 5 and "data:".startswith(line):
                self._line = line  # too short to tell yet
                return
            self._line = ""
            if line.startswith("data:"):
                self._state, self._space = _DATA, True
                self._begin_data()
                piece = line[5:]
            elif not line and ended:
                self._end_event(out)
                return
            else:
                self._state, piece = _FIELD, line
        if self._state == _DATA:
            self._data(piece)
        elif len(self._line) < FIELD:
            self._line = (self._line + piece)[:FIELD]
        if ended:
            if self._state == _FIELD:
                self._field(self._line)
            self._state, self._line = _START, ""

    def _field(self, line: str) -> None:
        name = line.partition(":")[0]
        if name in KEPT_FIELDS:
            self._fields[name] = line  # the last one counts, for the SDK as here

    def _begin_data(self) -> None:
        if self._json is not None:
            self._json.feed("\n")  # a second data line: joined by a line break
        elif self._raw is not None:
            self._keep_raw("\n")

    def _data(self, value: str) -> None:
        if self._space and value:
            self._space = False
            value = value[1:] if value.startswith(" ") else value
        if self._json is None and self._raw is None:
            first = value.lstrip()
            if not first:
                return  # the kind of data shows with its first character
            if first[0] in "{[":
                self._json = JsonTrimmer(self._bounds, lines=False)
            else:
                self._raw = []
        if self._json is not None:
            self._json.feed(value)
        elif self._raw is not None:
            self._keep_raw(value)

    def _keep_raw(self, value: str) -> None:
        """Raw data is kept up to :data:`RAW_DATA` characters, the line breaks joining its
        lines counted (uncounted, each further ``data:`` line kept one past the bound)."""
        assert self._raw is not None
        if self._raw_size < RAW_DATA:
            self._raw.append(value[: RAW_DATA - self._raw_size])
        self._raw_size += len(value)

    def _end_event(self, out: list[str]) -> None:
        data: list[str] = []
        if self._json is not None:
            data = [_sdk_text(item) for item in self._json.end() if isinstance(item, str)]
        elif self._raw is not None:
            data = ["".join(self._raw)]
        event = self._fields.get("event", "").partition(":")[2].strip()
        if event == "endpoint" and self._endpoint is not None:
            self._endpoint("\n".join(data))
        if data or self._fields:
            lines = (f"data: {line}" for d in data for line in d.split("\n"))
            out.append("\n".join([*self._fields.values(), *lines]) + "\n\n")
        self._json, self._raw, self._raw_size, self._fields = None, None, 0, {}


_START, _DATA, _FIELD = range(3)
_LINE_END = re.compile(r"\r\n|\r|\n")
