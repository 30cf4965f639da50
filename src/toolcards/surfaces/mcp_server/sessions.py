"""MCP sessions over HTTP: each bound to the caller that opened it, and bounded.

A session holds server memory (its server task, streams and state: about 30 KiB), so an
unbounded number of them, anonymous ones included, is a way to exhaust the server. Here:

- a session belongs to the caller that opened it (its type and id: a principal whose id
  reads like the anonymous one's is still another caller); a request for it from another caller
  gets 403, and that binding is kept for as long as the session lives (never evicted to make
  room);
- one caller (all anonymous callers count as one) holds at most ``per_principal`` sessions: one
  more gets 429; all callers together at most ``max``: one more gets 503. Both answers carry a
  JSON-RPC error body saying why;
- a session with no request in flight (no call, no open stream) for ``idle_timeout`` seconds
  ends (the SDK's idle timeout); its id then answers 404 and its binding is forgotten; an id
  that no caller opened answers 404 here, before the SDK sees it;
- a 2026-07-28 request (one the SDK serves statelessly, see :func:`is_stateless`) opens no
  session, so it counts against neither bound and any ``mcp-session-id`` it carries is ignored
  (as the SDK ignores it); one caller has at most ``per_principal`` of them in flight, one more
  gets 429. The tool calls, resource reads and listings, subscriptions, prompts, completions
  and task waits its sessions run count there too (:class:`InFlight`): such a request runs on
  when its client closes the POST, so one session could otherwise run any number at once.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Container, MutableMapping
from typing import Any, TypeVar

from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.types.jsonrpc import INVALID_REQUEST
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS

from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.surfaces.config import SessionLimits

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Caller = tuple[str, str]
"""Who holds a session or a count: ``(type, id)`` of the caller."""
_K = TypeVar("_K")

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
TOO_MANY_SESSIONS = -32000
"""The JSON-RPC error code of a refused new session (a server error, in the implementation's
range)."""


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if bytes(key).lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def reply(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def refuse(send: Send, status: int, message: str, code: int = TOO_MANY_SESSIONS) -> None:
    """An HTTP error whose body is a JSON-RPC error (no request id)."""
    error = {"code": code, "message": message}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    await reply(send, status, body, b"application/json")


def is_stateless(scope: Scope) -> bool:
    """Whether the SDK serves this request on its stateless (2026-07-28) path, which opens no
    session and ignores ``mcp-session-id``: its first ``mcp-protocol-version`` header names a
    revision other than the handshake ones. The same test as the SDK's session manager
    (``StreamableHTTPSessionManager._handle_request``), so that the guard never counts, nor lets
    through, a request the SDK routes the other way."""
    found = (bytes(v).decode("latin-1") for k, v in scope["headers"] if k == VERSION_HEADER)
    version = next(found, None)
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def caller_of(who: Identity) -> Caller:
    """The key of ``who``'s sessions and counts: its type with its id, so that no
    authenticated principal shares them with the unauthenticated callers whatever its id."""
    return who.type, who.id


def release(counter: Counter[_K], caller: _K) -> None:
    """One less of ``caller`` in ``counter`` (no zero entries are kept)."""
    counter[caller] -= 1
    if not counter[caller]:
        del counter[caller]


class InFlight:
    """What each caller has running, at most ``limit``: its 2026-07-28 requests (counted by
    :class:`SessionGuard` while they last) and its requests in 2025-11-25 sessions (counted by
    the server while they run: such a request outlives its POST, which its client may close as
    soon as the answer starts). One count for both, so that mixing them gets a caller no more."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts: Counter[Caller] = Counter()

    def enter(self, who: Identity) -> bool:
        """Count one more for ``who``; False, counting nothing, when it has ``limit``."""
        caller = caller_of(who)
        if self.counts[caller] >= self.limit:
            return False
        self.counts[caller] += 1
        return True

    def leave(self, who: Identity) -> None:
        release(self.counts, caller_of(who))


class SessionGuard:
    """ASGI middleware in front of the SDK's session manager (behind the authentication that
    put the caller in the scope under ``identity_key``).

    ``live()`` returns the ids of the sessions the manager still serves; a binding is dropped
    only once its session is gone from there. ``in_flight``: the count shared with the server's
    calls in sessions (a count of its own by default).
    """

    def __init__(
        self,
        app: ASGIApp,
        live: Callable[[], Container[str]],
        limits: SessionLimits,
        identity_key: str,
        in_flight: InFlight | None = None,
    ) -> None:
        self.app = app
        self.live = live
        self.limits = limits
        self.identity_key = identity_key
        self.owners: dict[str, Caller] = {}
        """Session id -> the caller that opened it."""
        self._opening: Counter[Caller] = Counter()
        self.in_flight = in_flight or InFlight(limits.per_principal)

    def sessions_of(self, caller: Caller) -> int:
        """Open sessions of ``caller`` (forgetting the ones that ended first)."""
        self._forget_ended()
        return sum(1 for owner in self.owners.values() if owner == caller)

    def _forget_ended(self) -> None:
        live = self.live()
        for session in [s for s in self.owners if s not in live]:
            del self.owners[session]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = scope.get(self.identity_key)
        who = found if isinstance(found, Identity) else ANONYMOUS
        if is_stateless(scope):
            await self._stateless_request(who, scope, receive, send)
            return
        caller = caller_of(who)
        session = header(scope, SESSION_HEADER)
        if session is not None:
            await self._session_request(caller, session, scope, receive, send)
            return
        problem = self._admission(who)
        if problem is not None:
            await refuse(send, *problem)
            return
        self._opening[caller] += 1
        opening = [caller]  # emptied once this request counts as opening no more
        try:
            await self.app(scope, receive, self._binder(opening, send))
        finally:
            self._opened(opening)

    async def _stateless_request(
        self, who: Identity, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A request that opens no session holds server memory only while it runs: bounded by
        the number ``who`` has in flight, whatever sessions it holds (and whatever
        ``mcp-session-id`` it carries: the SDK ignores that header here)."""
        in_flight = self.in_flight
        if not in_flight.enter(who):
            limit = in_flight.limit
            message = f"too many requests in flight for {who.id} (at most {limit}): retry later"
            await refuse(send, 429, message)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            in_flight.leave(who)

    async def _session_request(
        self, caller: Caller, session: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A request for an open session: only its own caller's, and only a session that is
        known (an unknown id gets the SDK's own 404 here, so it never passes unadmitted)."""
        owner = self.owners.get(session)
        if owner is None and session not in self.live():
            await refuse(send, 404, "Session not found", INVALID_REQUEST)
            return
        if owner is not None and owner != caller:
            await reply(send, 403, b"this session belongs to another caller\n", b"text/plain")
            return
        await self.app(scope, receive, send)

    def _admission(self, who: Identity) -> tuple[int, str] | None:
        """(status, message) when ``who`` may not open one more session now."""
        limits, caller = self.limits, caller_of(who)
        mine = self.sessions_of(caller) + self._opening[caller]
        if mine >= limits.per_principal:
            return 429, (
                f"too many open sessions for {who.id} (at most {limits.per_principal}): end one "
                f"(HTTP DELETE) or let an idle one expire ({limits.idle_timeout:g} s)"
            )
        if len(self.owners) + sum(self._opening.values()) >= limits.max:
            return 503, f"the server holds its maximum of {limits.max} sessions: retry later"
        return None

    def _opened(self, opening: list[Caller]) -> None:
        """The opening request of ``opening`` (``[caller]``, emptied here) counts no more:
        its session is bound, or it has ended without one. Once only, so that a session bound
        while its opening request still streams is not counted twice."""
        if opening:
            release(self._opening, opening.pop())

    def _binder(self, opening: list[Caller], send: Send) -> Send:
        caller = opening[0]

        async def bind(message: Message) -> None:
            if message["type"] == "http.response.start" and int(message["status"]) < 400:
                for key, value in message.get("headers") or ():
                    if bytes(key).lower() == SESSION_HEADER:
                        self.owners[bytes(value).decode("latin-1")] = caller
                        self._opened(opening)
            await send(message)

        return bind


def manager_sessions(manager: Any) -> Callable[[], Container[str]]:
    """The live session ids of an SDK ``StreamableHTTPSessionManager`` (mcp 2.x keeps them in
    ``_server_instances``, removing a session when it ends or expires)."""
    if not isinstance(getattr(manager, "_server_instances", None), dict):  # pragma: no cover
        raise TypeError("unsupported mcp SDK: the session manager keeps no session table")
    return lambda: manager._server_instances  # noqa: SLF001 - checked above; the SDK has no API
