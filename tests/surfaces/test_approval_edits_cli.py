"""`toolcards approvals grant ID --args '{...}'`: the approver's edit is what the waiting call
runs, once, without asking again; the serving process checks it as a fresh call's arguments
(real server, official-SDK client over HTTP, the CLI in process sharing the approvals file)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.scripted import wait_until
from surfaces.surface_support import HttpServer, write_config
from surfaces.surface_support import toolcards_in_process as toolcards
from surfaces.test_approvals_cli import AGENT, ANN, Served, audit_outcomes, call_while
from toolcards.governance import AuditLog, Identity
from toolcards.governance.redaction.redactor import args_digest
from toolcards.surfaces.outcomes import ExitCode

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

POLICY = """default_effect: allow
rules:
  - description: No note goes to mallory, approved or not
    targets: ["send_note"]
    effect: deny
    conditions: {arguments: {to: ["mallory"]}}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("edits")
    policy = base / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    shared = {
        "policy": policy,
        "tools": ["approval_tools:TOOLS"],
        "audit": base / "audit.db",
        "approvals": str(base / "approvals.db"),
        "approval_timeout": 60,
    }
    config = write_config(base, local=ANN, tokens=[AGENT], **shared)
    own = write_config(
        base, local=Identity(AGENT.id, "agent", ["approver"]), name="agent.yaml", **shared
    )
    server = HttpServer(config, env={"NOTES_FILE": str(base / "notes.txt")})
    yield Served(base, server, config, own)
    server.stop()


async def edit_while_waiting(
    served: Served, body: str, edit: dict[str, Any], config: Path | None = None
) -> tuple[Any, subprocess.CompletedProcess[str]]:
    """The agent's send_note call, and the CLI's grant of it with ``edit``."""
    granted: list[subprocess.CompletedProcess[str]] = []

    async def decide() -> None:
        (row,) = await served.pending()
        grant = ("approvals", "grant", row["approval_id"], "--args", json.dumps(edit))
        granted.append(await served.cli(config or served.config, *grant))
        if granted[0].returncode != ExitCode.OK:  # refused: the call still waits
            await served.cli(served.config, "approvals", "deny", row["approval_id"])

    result = await call_while(served, {"to": "ops", "body": body}, decide)
    return result, granted[0]


async def test_the_edited_arguments_run_once_and_not_the_call(served: Served) -> None:
    edit = {"to": "ops", "body": "edited-body"}
    result, granted = await edit_while_waiting(served, "original-body", edit)
    assert granted.returncode == ExitCode.OK, granted.stderr
    shown = json.loads(granted.stdout)
    assert shown["edited_args"] == edit and shown["approved_args_digest"] == args_digest(edit)
    assert result.is_error is False  # run without asking again
    assert served.sent("body") == ["ops: edited-body"]


async def test_the_caller_is_told_the_edited_arguments_ran_and_meta_has_their_digest(
    served: Served,
) -> None:
    edit = {"to": "ops", "body": "told-edit"}
    result, granted = await edit_while_waiting(served, "told-original", edit)
    assert granted.returncode == ExitCode.OK, granted.stderr
    assert result.is_error is False
    note = json.dumps(edit, sort_keys=True, separators=(",", ":"))
    assert result.content[0].text == f"approved with edited arguments: {note}"
    assert result.meta["toolcards/outcome"]["approved_args_digest"] == args_digest(edit)


async def test_the_audit_has_the_digest_of_the_call_and_of_the_edit(served: Served) -> None:
    called, edit = {"to": "ops", "body": "audited"}, {"to": "ops", "body": "audited-edit"}
    result, granted = await edit_while_waiting(served, "audited", edit)
    assert granted.returncode == ExitCode.OK, granted.stderr
    assert result.is_error is False

    def rows() -> list[Any]:  # the server's audit writer may land the row after the answer
        with AuditLog(served.base / "audit.db") as log:
            return [e for e in log.query(principal=AGENT.id, limit=1000) if e.args == edit]

    assert wait_until(lambda: bool(rows()), 60)
    (ran,) = rows()
    assert ran.outcome == "ok"
    assert (ran.args_digest, ran.approved_args_digest) == (args_digest(called), args_digest(edit))


async def test_an_edit_the_policy_denies_is_denied(served: Served) -> None:
    result, granted = await edit_while_waiting(served, "to-ops", {"to": "mallory", "body": "x"})
    assert granted.returncode == ExitCode.OK  # recorded here; checked where the call runs
    assert result.is_error is True
    text = result.content[0].text  # type: ignore[union-attr]
    assert text == f"denied: send_note with the edited arguments is not permitted for {AGENT.id}"
    assert served.sent("mallory") == [] and served.sent("to-ops") == []


async def test_an_edit_failing_validation_is_refused_in_one_line(served: Served) -> None:
    result, _ = await edit_while_waiting(served, "kept-back", {"body": "no recipient"})
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True and "\n" not in text
    assert text.startswith("denied: edited arguments: invalid arguments for send_note: to:")
    assert served.sent("kept-back") == [] and served.sent("no recipient") == []


async def test_an_edit_that_is_not_json_is_a_usage_error_in_one_line(served: Served) -> None:
    async def decide() -> None:
        (row,) = await served.pending()
        grant = ("approvals", "grant", row["approval_id"], "--args", "{to: ops")
        bad.append(await served.cli(served.config, *grant))
        await served.cli(served.config, "approvals", "deny", row["approval_id"])

    bad: list[subprocess.CompletedProcess[str]] = []
    await call_while(served, {"to": "ops", "body": "not-json"}, decide)
    assert bad[0].returncode == ExitCode.USAGE
    assert bad[0].stderr.strip().startswith("error: --args: the arguments are not valid JSON")
    assert len(bad[0].stderr.strip().splitlines()) == 1


async def test_the_caller_cannot_grant_its_own_call_by_editing_it(served: Served) -> None:
    edit = {"to": "ops", "body": "self-edited"}
    result, refused = await edit_while_waiting(served, "self", edit, config=served.own)
    assert refused.returncode == ExitCode.DENIED
    assert "a caller cannot approve its own call" in refused.stderr
    assert result.is_error is True and served.sent("self") == []
    assert ("approval_rejected", "cli", "send_note") in audit_outcomes(served.base, AGENT.id)


def test_grant_help_names_the_edit_option(served: Served) -> None:
    done = toolcards(served.config, "approvals", "grant", "--help")
    assert done.returncode == 0 and "--args" in done.stdout


async def test_pending_is_empty_after_the_edits(served: Served) -> None:
    with anyio.fail_after(30):
        rows = json.loads(toolcards(served.config, "approvals", "list").stdout)
    assert rows == []
