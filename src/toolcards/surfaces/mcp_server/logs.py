"""The MCP logging capability: ``logging/setLevel`` per connection, and toolcards' own log
records (the ``toolcards`` logger and its children) forwarded as ``notifications/message``
at or above that level.

A record emitted while a request is served (a tool call, a resource read, a prompt, a
completion: in its task or its worker thread) goes to the connection that made the request, on
the request's own stream, at or above the connection's level (``info`` until it sets one). A
task's call runs after its request was answered: its records go to the connection that created
the task, on that connection's own stream, marked with the task (nowhere once it closed). Other
records (the server's own), and those marked for everyone (a policy file that broke), go to
every connection that set a level. On MCP 2026-07-28 there is no ``logging/setLevel``: a
request's records are sent only when it opts in with a level
(``_meta["io.modelcontextprotocol/logLevel"]``), at or above it, and a task's never (a message
rides only the stream of a request's response).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import mcp.types as types
from anyio.abc import TaskGroup

from toolcards.governance.policy.policy import EVERYONE
from toolcards.surfaces.mcp_server.spawner import Spawner

ROOT_LOGGER = "toolcards"
DEFAULT_CALL_LEVEL = logging.INFO
LOG_LEVEL_META_KEY = "io.modelcontextprotocol/logLevel"
_SILENT = logging.CRITICAL + 100  # above every level: nothing is sent
# RFC 5424 severities as MCP names them, and the stdlib level each starts at
_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}


def mcp_level(levelno: int) -> str:
    """The MCP severity name for a stdlib level number."""
    name = "debug"
    for candidate, start in _LEVELS.items():
        if levelno >= start:
            name = candidate
    return name


@dataclass
class _Listener:
    session: Any
    level: int
    request_id: Any = None
    sent: list[asyncio.Future[None]] | None = None  # a call's sends, awaited before its result
    meta: dict[str, Any] | None = None  # a task's records: the task they belong to


MAX_LEVEL_SESSIONS = 1024
"""Sessions whose ``logging/setLevel`` is kept: past it, the longest-standing session's level
is forgotten (it falls back to the default; a session that ended leaves its level behind
until a send to it fails, and nothing else tells its end)."""

_current: contextvars.ContextVar[_Listener | None] = contextvars.ContextVar(
    "toolcards_mcp_log_listener", default=None
)


class LogForwarder(logging.Handler):
    """Installed on the ``toolcards`` logger while a server runs."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._levels: dict[int, _Listener] = {}
        self._lock = threading.Lock()
        self._sending = threading.local()
        self._spawner: Spawner | None = None

    # -- connections ------------------------------------------------------------------------

    def set_level(self, session: Any, level: str) -> None:
        key = _connection_key(session)
        with self._lock:
            self._levels.pop(key, None)  # the latest setter is the last to be forgotten
            if len(self._levels) >= MAX_LEVEL_SESSIONS:
                del self._levels[next(iter(self._levels))]
            self._levels[key] = _Listener(session, _LEVELS[level])

    def level_of(self, session: Any) -> int | None:
        listener = self._levels.get(_connection_key(session))
        return None if listener is None else listener.level

    @contextmanager
    def for_call(self, session: Any, request_id: Any, params: Any = None) -> Iterator[_Listener]:
        """Records emitted in this context go to ``session``'s call ``request_id`` (on a
        2026-07-28 connection only as its request's ``params`` opted in)."""
        listener = _Listener(session, self._call_level(session, params), request_id, [])
        token = _current.set(listener)
        try:
            yield listener
        finally:
            _current.reset(token)

    @contextmanager
    def for_task(self, session: Any, meta: dict[str, Any]) -> Iterator[None]:
        """Records emitted in this context (a task's call, run once the request that created it
        was answered) go to ``session``'s connection on its own stream, with ``meta``: the
        request's stream has ended, so its id would route them nowhere. On 2026-07-28 they
        are not sent (a message rides only the stream of a request's response)."""
        token = _current.set(_Listener(session, self._call_level(session, None), meta=meta))
        try:
            yield
        finally:
            _current.reset(token)

    async def per_request(self, ctx: Any, call_next: Any) -> Any:
        """Server middleware: every request is served in its connection's log context (a
        resource read, a prompt or a completion runs card code), so its records never reach
        another connection."""
        with self.for_call(ctx.session, ctx.request_id, ctx.params) as listener:
            result = await call_next(ctx)
        await self.drain(listener)
        return result

    def _call_level(self, session: Any, params: Any) -> int:
        """The level a request's records are sent at: on 2026-07-28 as ``params`` opted in
        (none: silent), else the connection's (``info`` until it sets one)."""
        if _per_request(session):
            return _opted_in(params)
        level = self.level_of(session)
        return DEFAULT_CALL_LEVEL if level is None else level

    async def drain(self, listener: _Listener) -> None:
        """Wait (briefly) until the records of a call are sent, so they precede its result.
        (A worker thread's records were queued to the loop before its result was, so they
        are all in ``sent`` once the call returned.)"""
        if listener.sent:
            await asyncio.wait(listener.sent, timeout=2.0)
            listener.sent.clear()

    # -- lifetime -----------------------------------------------------------------------------

    @contextmanager
    def installed(self, tasks: TaskGroup) -> Iterator[LogForwarder]:
        """Forward records while the context is open; sends run in ``tasks``."""
        self._spawner = Spawner(tasks)
        logger = logging.getLogger(ROOT_LOGGER)
        logger.addHandler(self)
        previous = logger.level
        if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
            logger.setLevel(logging.DEBUG)  # the per-connection level filters
        try:
            yield self
        finally:
            logger.removeHandler(self)
            logger.setLevel(previous)
            spawner, self._spawner = self._spawner, None
            if spawner is not None:
                spawner.close()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._sending, "active", False) or self._spawner is None:
            return
        current = _current.get()
        targets = [current] if current is not None and record.levelno >= current.level else []
        if current is None or getattr(record, EVERYONE, False):
            with self._lock:
                others = [t for t in self._levels.values() if record.levelno >= t.level]
            mine = {_connection_key(t.session) for t in targets}
            targets += [t for t in others if _connection_key(t.session) not in mine]
        if not targets:
            return
        self._sending.active = True
        try:
            params = types.LoggingMessageNotificationParams(
                level=mcp_level(record.levelno),  # type: ignore[arg-type]
                logger=record.name,
                data=self._data(record),
            )
            for target in targets:
                self._schedule(target, params)
        finally:
            self._sending.active = False

    def _data(self, record: logging.LogRecord) -> str:
        try:
            return record.getMessage()
        except Exception:
            return str(record.msg)

    def _schedule(self, target: _Listener, params: types.LoggingMessageNotificationParams) -> None:
        spawner = self._spawner
        if spawner is None:
            return
        sent = target.sent
        if sent is None:
            spawner.spawn(self._send, target, params)
            return

        def track() -> None:  # a call's record: tracked, awaited before its result
            sent.append(spawner.loop.create_task(self._send(target, params)))

        spawner.call(track)

    async def _send(
        self, target: _Listener, params: types.LoggingMessageNotificationParams
    ) -> None:
        if target.meta is not None:
            params = params.model_copy(update={"meta": target.meta})
        note = types.LoggingMessageNotification(params=params)
        try:
            await target.session.send_notification(note, related_request_id=target.request_id)
        except Exception:  # a connection that went away takes its listener with it
            with self._lock:
                key = _connection_key(target.session)
                if self._levels.get(key) is target:
                    del self._levels[key]


def _connection_key(session: Any) -> int:
    return id(getattr(session, "_connection", session))


def _per_request(session: Any) -> bool:
    """Whether log delivery is the request's opt-in (MCP 2026-07-28 and later)."""
    version = getattr(session, "protocol_version", None)
    if not isinstance(version, str):
        return False
    # lazy: mcp 2.x only (mcp 1.x, with the apcore extra, lacks it)
    from mcp.types.version import MODERN_PROTOCOL_VERSIONS

    return version in MODERN_PROTOCOL_VERSIONS


def _opted_in(params: Any) -> int:
    """The level a 2026-07-28 request asked its log messages at (none asked: silent)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    asked = meta.get(LOG_LEVEL_META_KEY) if isinstance(meta, Mapping) else None
    return _LEVELS.get(asked, _SILENT) if isinstance(asked, str) else _SILENT
