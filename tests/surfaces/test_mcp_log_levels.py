"""The levels sessions set with ``logging/setLevel`` are bounded: a server that outlives
many sessions keeps at most ``MAX_LEVEL_SESSIONS`` of them (nothing tells a session's end),
forgetting the longest-standing setter first."""

from __future__ import annotations

import logging

from toolcards.surfaces.mcp_server.logs import MAX_LEVEL_SESSIONS, LogForwarder


class Session:
    """A stand-in for an MCP server session: the forwarder only keys and holds it."""


def test_levels_are_kept_for_at_most_max_level_sessions() -> None:
    forwarder = LogForwarder()
    sessions = [Session() for _ in range(MAX_LEVEL_SESSIONS + 10)]
    forwarder.set_level(sessions[0], "debug")
    for s in sessions[1:MAX_LEVEL_SESSIONS]:
        forwarder.set_level(s, "warning")
    forwarder.set_level(sessions[0], "error")  # set again: now the latest setter
    for s in sessions[MAX_LEVEL_SESSIONS:]:
        forwarder.set_level(s, "info")
    kept = [s for s in sessions if forwarder.level_of(s) is not None]
    assert len(kept) == MAX_LEVEL_SESSIONS
    assert forwarder.level_of(sessions[0]) == logging.ERROR
    assert [forwarder.level_of(s) for s in sessions[1:11]] == [None] * 10
    assert forwarder.level_of(sessions[11]) == logging.WARNING
    assert forwarder.level_of(sessions[-1]) == logging.INFO
