"""The commands: ``toolcards dashboard`` and ``toolcards serve --transport http --dashboard``,
run as real processes on 127.0.0.1, with a real MCP client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.support import (
    TOKENS,
    Process,
    http_sign_in,
    listening_addresses,
    write_config,
)
from support.processes import free_port

pytestmark = pytest.mark.timeout(90)

APPROVE_PLANNING = {
    "default_effect": "deny",
    "rules": [
        {"callers": ["agent.*"], "targets": ["update_planning"], "effect": "approve",
         "description": "Plan changes need a human"},
        {"callers": ["agent.*"], "targets": ["*"], "effect": "allow"},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    config = write_config(tmp_path_factory.mktemp("served"), APPROVE_PLANNING)
    process = Process(
        "serve", "--config", str(config), "--transport", "http", "--dashboard", port=free_port()
    )
    yield process
    process.stop()


def _call_over_mcp(url: str, box: dict[str, Any]) -> None:
    from surfaces.mcp_clients import http_session

    async def run() -> None:
        async with http_session(url, TOKENS["agent"]) as session:
            box["result"] = await session.call_tool(
                "update_planning", {"create": [{"description": "Served task"}]}
            )

    try:
        asyncio.run(run())
    except Exception as exc:  # the test reads it
        box["error"] = repr(exc)


def _pending_form(client: httpx.Client, timeout: float = 20.0) -> tuple[str, dict[str, str]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        html = client.get("/panel/approvals").text
        action = re.search(r'action="/[\w-]+(/approvals/[^"]+/grant)"', html)  # under the base
        if action is not None:
            form = html[action.start() : html.index("</form>", action.start())]
            fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form))
            return action.group(1), fields
        time.sleep(0.1)
    raise AssertionError("no approval appeared in the inbox")


def test_serve_with_dashboard_puts_mcp_approvals_in_the_inbox(served: Process) -> None:
    box: dict[str, Any] = {}
    caller = threading.Thread(target=_call_over_mcp, args=(served.origin + "/mcp", box))
    caller.start()
    approver = http_sign_in(served.url, "approver")
    action, fields = _pending_form(approver)
    assert fields["tool"] == "update_planning" and fields["principal"] == "agent.bot"
    approval_id = action.split("/")[2]
    waiting = f"approval {approval_id}: update_planning by agent.bot waits"
    assert waiting in served.output()  # the operator's terminal says it too
    assert f"toolcards approvals grant {approval_id}" in served.output()
    assert approver.post(action, data=fields).status_code == 303
    caller.join(30)
    assert "error" not in box, box.get("error")
    result = box["result"]
    assert result.is_error is False and "created ids" in result.content[0].text
    assert "Served task" in approver.get("/panel/plan").text
    approver.close()


def test_serve_with_dashboard_still_refuses_an_unknown_bearer_token(served: Process) -> None:
    response = httpx.post(
        served.origin + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Authorization": "Bearer nope", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401


def test_the_dashboard_command_serves_the_config_team_on_loopback(tmp_path: Path) -> None:
    config = write_config(tmp_path, APPROVE_PLANNING)
    process = Process("dashboard", "--config", str(config), port=free_port())
    try:
        assert listening_addresses(process.port) == {"127.0.0.1"}
        client = http_sign_in(process.url, "viewer")
        assert "team served" in client.get("/").text
        client.close()
        assert f"http://127.0.0.1:{process.port}/" in process.output()
    finally:
        process.stop()


def _written(store: Path) -> list[tuple[Any, ...]]:
    """What the store holds of the team: every event, and the team's row."""
    with sqlite3.connect(store) as db:
        events = db.execute("SELECT pos, tool_id, seq, payload FROM events ORDER BY pos")
        return [*events.fetchall(), *db.execute("SELECT * FROM teams").fetchall()]


def test_the_dashboard_command_opens_a_store_read_only_with_a_one_time_token(
    tmp_path: Path,
) -> None:
    """The stored team is shown, and the dashboard writes nothing into its log (before: it
    started the team and its actors, and put off restoring the member, in 6 new events)."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolcards import PlanningTool
    from toolcards.runtime import RoleProfile, Team

    def quiet(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    profile = RoleProfile(role="writer", model=FunctionModel(quiet))  # not storable: deferred
    with Team("stored", store=tmp_path / "team.db", profiles=[profile]) as team:
        tools = {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)]).get_tools()}
        tools["update_planning"](create=[{"description": "Stored task"}])
        member = team.hire("writer")
    before = _written(tmp_path / "team.db")
    process = Process(
        "dashboard", "--store", str(tmp_path / "team.db"), "--team", "stored", port=free_port()
    )
    try:
        token = re.search(r"one-time token: (\S+)", process.output())
        assert token is not None
        client = httpx.Client(base_url=process.url)
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
        assert csrf is not None
        client.post("/login", data={"token": token.group(1), "csrf": csrf.group(1)})
        plan = client.get("/panel/plan").text
        assert "Stored task" in plan and ">1 task<" in plan  # not "1 tasks"
        team_panel = client.get("/panel/team").text
        assert member in team_panel and "#PlanningTool" in team_panel
        client.close()
    finally:
        process.stop()
    assert _written(tmp_path / "team.db") == before


PLAN_ONE_TASK = """
import sys
from toolcards import PlanningTool
from toolcards.runtime import Team

with Team("stored", store=sys.argv[1]) as team:
    tools = {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)]).get_tools()}
    tools["update_planning"](create=[{"description": sys.argv[2]}])
"""


def test_a_store_dashboard_leaves_the_store_to_its_writer_and_shows_what_it_writes(
    tmp_path: Path,
) -> None:
    """While `dashboard --store` shows a team, another process writes the store (`toolcards
    call`, `serve`, the demo) and the page shows what it commits (before: the dashboard held
    the store's writer lock, and the writer ended with "open for writing by another
    process")."""
    from toolcards.surfaces.dashboard.cli import _from_store

    store = tmp_path / "team.db"

    def plan(description: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", PLAN_ONE_TASK, str(store), description]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    assert plan("Before the page").returncode == 0
    with _from_store(str(store), "stored", None)("127.0.0.1") as dash:
        assert dash.team is not None
        written = plan("Written while shown")
        assert written.returncode == 0, written.stderr.strip().splitlines()[-1:]
        board = dash.panels["plan"].read(dash.team, {}, "")
    assert [t["description"] for t in board["tasks"]] == ["Before the page", "Written while shown"]


def test_a_store_dashboard_refuses_a_store_it_would_have_to_migrate(tmp_path: Path) -> None:
    """A reader migrates nothing: an older layout is refused in one line, and left as it was."""
    from toolcards.runtime import Team
    from toolcards.stores import StoreError

    store = tmp_path / "team.db"
    with Team("stored", store=store):
        pass
    with sqlite3.connect(store) as db:
        db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    before = store.read_bytes()
    with pytest.raises(StoreError, match="older layout .* open it once with a writer"):
        Team.open_read_only("stored", store)
    assert store.read_bytes() == before


def _audit_rows(path: Path) -> list[tuple[Any, ...]]:
    """Every row of the audit table, read from the file (its WAL included)."""
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        return db.execute("SELECT * FROM audit ORDER BY id").fetchall()


def _sign_in(client: httpx.Client, token: str) -> int:
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert csrf is not None
    return client.post("/login", data={"token": token, "csrf": csrf.group(1)}).status_code


def test_a_store_dashboard_writes_no_sign_in_into_the_team_trail(tmp_path: Path) -> None:
    """`dashboard --store --audit` only reads the trail: a sign-in, refused or not, is no row
    of it (before: each one, an anonymous caller's wrong token included, was appended to the
    team's hash chain by a process that does not own it)."""
    from toolcards.governance import AuditLog
    from toolcards.governance.audit.log import AuditRecord
    from toolcards.runtime import Team

    store, audit = tmp_path / "team.db", tmp_path / "audit.db"
    with Team("stored", store=store):
        pass
    with AuditLog(audit, team_id="stored", durability="sync") as trail:
        trail.record(
            AuditRecord(ts=time.time(), principal="agent.x", principal_type="agent", roles=(),
                        surface="cli", tool="t", call_id="c1", args={}, decision="allow",
                        outcome="ok")
        )  # fmt: skip
    before = _audit_rows(audit)
    process = Process(
        "dashboard", "--store", str(store), "--team", "stored", "--audit", str(audit),
        port=free_port(),
    )  # fmt: skip
    try:
        token = re.search(r"one-time token: (\S+)", process.output())
        assert token is not None
        client = httpx.Client(base_url=process.url)
        answers = [_sign_in(client, tried) for tried in ("wrong-1", "wrong-2", token.group(1))]
        assert answers == [401, 401, 303]
        assert "agent.x" in client.get("/panel/audit").text  # read, as before
        client.close()
    finally:
        process.stop()
    assert len(before) == 1 and _audit_rows(audit) == before


def test_a_store_dashboard_refuses_a_trail_it_would_have_to_migrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--audit` is read as the store is: a trail of an older layout is refused in one line
    and left as it was (before: the view migrated it, adding the columns its writer, an older
    version, does not expect)."""
    import typer

    from toolcards.governance import AuditLog
    from toolcards.runtime import Team
    from toolcards.surfaces.dashboard.cli import _from_store

    store, audit = tmp_path / "team.db", tmp_path / "audit.db"
    with Team("stored", store=store):
        pass
    AuditLog(audit, team_id="stored", durability="sync").close()
    with contextlib.closing(sqlite3.connect(audit)) as db:  # as the version before older_rows
        db.execute("ALTER TABLE audit_chain DROP COLUMN older_rows")
        db.commit()
    before = audit.read_bytes()
    with pytest.raises(typer.Exit), _from_store(str(store), "stored", audit)("127.0.0.1"):
        pass
    [error] = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"error: audit trail .* older layout .* writer.*", error)
    assert audit.read_bytes() == before


def test_a_dashboard_on_another_address_warns(caplog: pytest.LogCaptureFixture) -> None:
    from toolcards.surfaces.dashboard.serve import warn_if_exposed

    with caplog.at_level(logging.WARNING):
        warn_if_exposed("127.0.0.1")
        warn_if_exposed("0.0.0.0")
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "serving the dashboard on 0.0.0.0"
    ]
