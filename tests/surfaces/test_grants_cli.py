"""Remembered approvals from the command line, for MCP calls: `toolcards approvals grant ID
--remember 1h --match ...` lets the waiting call run and remembers it; later MCP calls it
covers run without asking, each audited with the grant's id (also in the result's `_meta`);
`toolcards approvals grants list` shows the grant exactly as it will match and `grants revoke`
stops it for the next call of the serving process (real server over HTTP, official-SDK client,
real CLI processes sharing the approvals file)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_clients import http_session

from surfaces.surface_support import HttpServer, token_for
from surfaces.test_approvals_cli import AGENT, Served, call_while, configs
from surfaces.test_approvals_exact import ANN, Inbox, plain, toolcards
from toolcards.governance import AuditLog
from toolcards.governance.approvals.grants import Remember
from toolcards.surfaces.outcomes import ExitCode

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("grants")
    config, own = configs(base, approval_timeout=60)
    server = HttpServer(config, env={"NOTES_FILE": str(base / "notes.txt")})
    yield Served(base, server, config, own)
    server.stop()


async def remember_while_waiting(served: Served, body: str, *options: str) -> dict[str, Any]:
    """The agent's send_note waits; the CLI grants it with ``--remember`` and ``options``."""
    decided: list[Any] = []

    async def decide() -> None:
        (row,) = await served.pending()
        grant = ("approvals", "grant", row["approval_id"], "--remember", "1h", *options)
        decided.append(await served.cli(served.config, *grant))

    result = await call_while(served, {"to": "ops", "body": body}, decide)
    assert decided[0].returncode == ExitCode.OK, decided[0].stderr
    assert result.is_error is False
    shown: dict[str, Any] = json.loads(decided[0].stdout)["grant"]
    return shown


async def call_now(served: Served, body: str) -> Any:
    """The agent's send_note (one that waits for a human fails at the approval timeout)."""
    async with http_session(served.server.url, token_for(AGENT)) as session:
        return await session.call_tool("send_note", {"to": "ops", "body": body})


async def deny_when_waiting(served: Served) -> None:
    (row,) = await served.pending()
    await served.cli(served.config, "approvals", "deny", row["approval_id"])


async def test_a_remembered_grant_runs_later_covered_calls_and_revoking_stops_it(
    served: Served,
) -> None:
    grant = await remember_while_waiting(served, "daily first", "--match", "body=glob:daily *")
    shown = f'{AGENT.id} may call send_note with body matching "daily *"'
    assert grant["matches"].startswith(shown)
    assert grant["pattern"] == {"body": {"glob": "daily *"}, "to": {"eq": "ops"}}
    listed = json.loads((await served.cli(served.config, "approvals", "grants", "list")).stdout)
    assert [(g["grant_id"], g["matches"]) for g in listed] == [
        (grant["grant_id"], grant["matches"])
    ]

    later = await call_now(served, "daily report")
    assert later.is_error is False
    assert later.meta["toolcards/outcome"]["grant_id"] == grant["grant_id"]
    assert served.sent("daily report") == ["ops: daily report"]

    revoked = await served.cli(served.config, "approvals", "grants", "revoke", grant["grant_id"])
    assert revoked.returncode == ExitCode.OK, revoked.stderr
    after = await call_while(
        served, {"to": "ops", "body": "daily after"}, lambda: deny_when_waiting(served)
    )  # the very next call waits for a human again: the test denies it
    assert after.is_error is True
    assert served.sent("daily after") == []

    with AuditLog(served.base / "audit.db") as log:
        rows = log.query(grant_id=grant["grant_id"], limit=100)
    rows = sorted(rows, key=lambda e: e.ts)  # when each happened: the server writes its rows
    # in batches, so the CLI's revoke row may be stored before the served call's "ok" row
    assert [(e.principal, e.outcome) for e in rows] == [
        ("ann", "approval_granted"),
        ("ann", "grant_created"),
        (AGENT.id, "ok"),
        ("ann", "grant_revoked"),
    ]


async def test_a_caller_cannot_remember_its_own_call_from_the_cli(served: Served) -> None:
    decided: list[Any] = []
    listing = ("approvals", "grants", "list", "--all")
    before = [g["grant_id"] for g in json.loads((await served.cli(served.config, *listing)).stdout)]

    async def decide() -> None:
        (row,) = await served.pending()
        own = ("approvals", "grant", row["approval_id"], "--remember", "1h")
        decided.append(await served.cli(served.own, *own))
        await served.cli(served.config, "approvals", "deny", row["approval_id"])

    await call_while(served, {"to": "ops", "body": "mine"}, decide)
    assert decided[0].returncode == ExitCode.DENIED
    assert "a caller cannot approve its own call" in decided[0].stderr
    after = json.loads((await served.cli(served.config, *listing)).stdout)
    assert [g["grant_id"] for g in after] == before
    assert served.sent("mine") == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--remember", "90d"), "at most 30 days"),
        (("--remember", "soon"), "a duration looks like"),
        (("--session",), "--session and --match go with --remember"),
        (("--remember", "1h", "--match", "body"), "a match is NAME=any"),
    ],
)
async def test_a_malformed_remember_is_a_usage_error(
    served: Served, options: tuple[str, ...], message: str
) -> None:
    done = await served.cli(served.config, "approvals", "grant", "nope", *options)
    assert done.returncode == ExitCode.USAGE
    assert message in done.stderr


SECRET = "password=hunter2-7f3a"


def remembered(inbox: Inbox, body: str) -> None:
    """A grant ann made of the agent's send_note with ``body``, exactly."""
    request = inbox.waiting({"to": "ops", "body": body})
    inbox.broker.remember(request, approver=ANN, remember=Remember(3600))


def test_a_viewer_is_told_how_many_grants_there_are_not_their_patterns(tmp_path: Path) -> None:
    """A grant's pattern holds exact argument values: as on the dashboard, only an approver
    sees them (a viewer's `approvals list` is redacted too)."""
    inbox = Inbox(tmp_path)
    try:
        remembered(inbox, SECRET)
        listed = plain(inbox.viewer, "approvals", "grants", "list")
        as_json = toolcards(inbox.viewer, "approvals", "grants", "list")
    finally:
        inbox.store.close()
    assert listed.exit_code == as_json.exit_code == ExitCode.OK
    assert "hunter2" not in listed.stdout + listed.stderr + as_json.stdout + as_json.stderr
    assert "live grants: 1 (their patterns are shown to the 'approver' role)" in listed.stderr
    assert json.loads(as_json.stdout) == []


def test_an_approver_sees_each_pattern_whole_and_escaped(tmp_path: Path) -> None:
    """The one-line description cuts a long value: the pattern beside it is whole, and a
    bidi override in it is written as an escape."""
    body = "report\u202etxt.exe " + "x" * 120
    inbox = Inbox(tmp_path)
    try:
        remembered(inbox, body)
        listed = plain(inbox.approver, "approvals", "grants", "list")
    finally:
        inbox.store.close()
    header, line = listed.stdout.splitlines()
    row = dict(zip(header.split("\t"), line.split("\t"), strict=True))
    escaped = json.dumps(body, ensure_ascii=False).replace("\u202e", "\\u202e")
    assert json.loads(row["pattern"]) == {"body": {"eq": body}, "to": {"eq": "ops"}}
    assert escaped in row["pattern"] and "\u202e" not in listed.stdout


def test_a_grant_remembered_from_the_cli_is_shown_back_whole_and_escaped(tmp_path: Path) -> None:
    body = "report\u202etxt.exe " + "y" * 120
    inbox = Inbox(tmp_path)
    try:
        request = inbox.waiting({"to": "ops", "body": body})
        done = plain(inbox.approver, "approvals", "grant", request.approval_id, "--remember", "1h")
    finally:
        inbox.store.close()
    assert done.exit_code == ExitCode.OK, done.stderr
    escaped = json.dumps(body, ensure_ascii=False).replace("\u202e", "\\u202e")
    assert f'pattern: {{"body":{{"eq":{escaped}}},"to":{{"eq":"ops"}}}}' in done.stdout
    assert "\u202e" not in done.stdout
