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
