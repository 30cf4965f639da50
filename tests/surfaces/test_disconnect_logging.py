"""Routine client disconnects are logged at debug, not as errors with a traceback."""

from __future__ import annotations

import logging

import anyio
import pytest

from toolcards.surfaces.mcp_server.http import quiet_disconnects


def _log_with(exc: BaseException) -> None:
    try:
        raise exc
    except BaseException:
        logging.getLogger("mcp.server.streamable_http").exception("stream failed")


def test_closed_stream_tracebacks_are_demoted_to_debug(caplog: pytest.LogCaptureFixture) -> None:
    quiet_disconnects()
    with caplog.at_level(logging.DEBUG, logger="mcp.server.streamable_http"):
        _log_with(anyio.ClosedResourceError())
        _log_with(BaseExceptionGroup("closed", [anyio.BrokenResourceError()]))
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.DEBUG]


def test_other_errors_stay_errors(caplog: pytest.LogCaptureFixture) -> None:
    quiet_disconnects()
    with caplog.at_level(logging.DEBUG, logger="mcp.server.streamable_http"):
        _log_with(RuntimeError("real trouble"))
    assert [r.levelno for r in caplog.records] == [logging.ERROR]


def test_the_error_answer_to_a_request_of_a_client_that_left_is_demoted_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A notification of a client that then left (its 202 already sent, its session closing):
    the SDK's error answer to it fails in the server, raised while handling the closed stream."""
    quiet_disconnects()
    with caplog.at_level(logging.DEBUG, logger="uvicorn.error"):
        try:
            try:
                raise anyio.ClosedResourceError()
            except anyio.ClosedResourceError:
                raise RuntimeError("Unexpected ASGI message 'http.response.start' sent")  # noqa: B904
        except RuntimeError:
            logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
        _log_with(RuntimeError("real trouble"))  # the same error without a closed stream
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.ERROR]
