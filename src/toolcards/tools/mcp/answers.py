"""The MCP client's handlers for a server's requests (the fastmcp ``Client`` arguments).

Each handler governs the request (:class:`ServerRequests`) and answers it: elicitation from
the approvals inbox, sampling from the agent's model (or the card's ``sampling.model``),
roots from the card's workspace. A refused elicitation is a *decline*; a refused sampling
or roots request is an error the server reads (no reason beyond "refused": the audit row
has it). The server's log messages and progress notes are remote text: each is cut, escaped
onto one line and logged on ``toolcards.mcp`` (never fastmcp's logger, whose Rich handler
drew it raw to the terminal, on the event loop, in time quadratic in its length), a few per
connection.
"""

from __future__ import annotations

import logging
from typing import Any

from toolcards.governance.approvals.elicitation import ask_inbox, form_fault
from toolcards.governance.approvals.view import escaped_line
from toolcards.governance.redaction.redactor import canonical_json
from toolcards.tools.mcp.sampling import sample, sampling_args
from toolcards.tools.mcp.server_requests import Frame, Refused, ServerRequests

log = logging.getLogger("toolcards.mcp")
_MAX_MESSAGE_CHARS = 4_000
_MAX_SCHEMA_CHARS = 20_000
MAX_SERVER_LOG_CHARS = 300
"""What is logged of one log message or progress note of a server (characters, before escaping)."""
MAX_SERVER_LOGS = 50
"""The log messages and progress notes of a server logged per connection; the rest are dropped."""
_LOUD = frozenset({"warning", "error", "critical", "alert", "emergency"})


def client_handlers(requests: ServerRequests) -> dict[str, Any]:
    """``elicitation_handler``, ``sampling_handler`` and ``roots`` for a fastmcp Client."""
    rules = requests.rules

    async def elicit(message: str, _type: Any, params: Any, _ctx: Any) -> Any:
        from fastmcp.client.elicitation import ElicitResult  # lazy: extra mcp

        schema = getattr(params, "requested_schema", None)
        if (
            not isinstance(schema, dict)
            or len(canonical_json(schema)) > _MAX_SCHEMA_CHARS
            or form_fault(schema) is not None
        ):  # URL mode (nothing a human can answer here), a form too large or no flat form
            schema = None
        text = str(message)[:_MAX_MESSAGE_CHARS]
        args = {"message": text, "requested_schema": schema or {}}

        async def answer(frame: Frame, call_id: str) -> Any:
            governing = frame.governing
            assert governing is not None
            if schema is None:
                raise Refused("elicit refused: only a flat form of bounded size is answered")
            if requests.asking:  # a server floods the inbox no faster than a human answers
                raise Refused("elicit refused: one question of this server is already waiting")
            requests.asking = True
            try:
                reply = await _ask(frame, call_id)
            finally:
                requests.asking = False
            return {"action": reply.action, "content": reply.content}

        async def _ask(frame: Frame, call_id: str) -> Any:
            governing = frame.governing
            assert governing is not None and schema is not None
            return await ask_inbox(
                governing.executor.approvals,
                tool_id=requests.tool_id("elicit"),
                server=requests.server,
                message=text,
                schema=schema,
                identity=governing.identity,
                call_id=call_id,
                surface=governing.surface,
                timeout=rules.elicitation_timeout,
            )

        try:
            got = await requests.govern("elicit", args, answer, rules.elicitation_timeout + 5)
        except Refused as exc:
            log.info("MCP server %r: %s", requests.server, exc)
            return ElicitResult(action="decline")
        return ElicitResult(action=got["action"], content=got["content"])

    async def sampling(_messages: Any, params: Any, _ctx: Any) -> Any:
        args = sampling_args(params)

        async def answer(frame: Frame, _call_id: str) -> Any:
            model = frame.model if frame.model is not None else rules.sampling.model
            return await sample(
                model,
                params,
                max_tokens=rules.sampling.max_tokens,
                max_chars=rules.sampling.max_chars,
            )

        try:
            return await requests.govern("sample", args, answer, rules.timeout)
        except Refused as exc:
            log.info("MCP server %r: %s", requests.server, exc)
            raise RuntimeError(str(exc).split(":")[0]) from None

    async def roots(_ctx: Any) -> list[str]:
        async def answer(_frame: Frame, _call_id: str) -> list[str]:
            workspace = rules.workspace
            if workspace is None:
                return []
            return [workspace().resolve().as_uri()]

        try:
            found: list[str] = await requests.govern("roots", {}, answer, rules.timeout)
        except Refused as exc:
            log.info("MCP server %r: %s", requests.server, exc)
            raise RuntimeError(str(exc).split(":")[0]) from None
        return found

    return {
        "elicitation_handler": elicit,
        "sampling_handler": sampling,
        "roots": roots,
        **_server_logs(requests.server),
    }


def _server_logs(server: str) -> dict[str, Any]:
    """``log_handler`` and ``progress_handler``: the server's text cut, on one escaped line,
    on ``toolcards.mcp`` under the card's name (not a logger the server names): at INFO for
    its warnings and worse, else DEBUG; past :data:`MAX_SERVER_LOGS`, one line and no more."""
    seen = 0

    def note(level: int, kind: str, data: Any) -> None:
        """Log ``data`` (a string as it is, anything else as its ``repr``): made text only when
        it will be logged (a server's thousandth message, or one at a level not logged, costs
        no ``repr`` of whatever it sent)."""
        nonlocal seen
        seen += 1
        if seen > MAX_SERVER_LOGS:
            if seen == MAX_SERVER_LOGS + 1:
                log.info("MCP server %r: %d notes logged, the rest are dropped", server, seen - 1)
            return
        if not log.isEnabledFor(level):
            return
        text = data if isinstance(data, str) else repr(data)
        cut = text[:MAX_SERVER_LOG_CHARS] + ("..." if len(text) > MAX_SERVER_LOG_CHARS else "")
        log.log(level, "MCP server %r %s: %s", server, kind, escaped_line(cut))

    async def log_handler(message: Any) -> None:
        level = message.level  # one of the eight the protocol names (validated)
        note(logging.INFO if level in _LOUD else logging.DEBUG, f"logged ({level})", message.data)

    async def progress_handler(progress: float, total: float | None, message: str | None) -> None:
        note(logging.DEBUG, f"progress {progress}/{total}", message or "")

    return {"log_handler": log_handler, "progress_handler": progress_handler}
