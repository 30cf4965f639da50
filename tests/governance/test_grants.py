"""Remembered approvals (grants): an approver who decides a pending call may remember it for
later calls of the same principal and tool whose canonical arguments match a pattern, until a
time (or in one session). Every call a grant lets run is audited with its id; a grant never
widens a deny, never lets a principal approve itself, and stops at once, in every process, when
it expires or is revoked. In memory, in a SQLite file shared by processes, and in PostgreSQL
shared by processes."""

from __future__ import annotations

import asyncio
import json
import posixpath
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.launch import PYTHON
from support.scripted import wait_until
from toolcards.core.errors import RetriableError
from toolcards.core.pathargs import PathArgs
from toolcards.core.spec import annotate
from toolcards.governance import (
    ApprovalBroker,
    ApprovalError,
    AuditLog,
    CapabilityRegistry,
    Executor,
    Identity,
    Outcome,
    Policy,
)
from toolcards.governance.approvals.grants import Remember, covers, describe
from toolcards.stores.open import open_approvals

CAROL = Identity("carol", roles=["writer"])
MALLORY = Identity("mallory", roles=["writer"])
RITA = Identity("rita", roles=["approver"])
HOUR = 3600.0
writes: list[tuple[str, str]] = []


def canonical(path: str) -> str:
    """The name the tool writes: relative, normalised, never above the workspace."""
    name = posixpath.normpath(path.lstrip("/"))
    if name == ".." or name.startswith("../"):
        raise RetriableError(f"{path} is outside the workspace")
    return name


def write(path: str, content: str, mode: str = "w") -> str:
    """Write a file (a human approves each call)."""
    writes.append((path, content))
    return f"wrote {path}"


annotate(write, requires_approval=True, paths=PathArgs(canonical))
DENY_DEPLOY = {
    "default_effect": "allow",
    "rules": [
        {
            "description": "nothing under deploy/",
            "targets": ["write"],
            "effect": "deny",
            "conditions": {"arguments": {"path": {"glob": "deploy/*"}}},
        }
    ],
}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return ":memory:" if request.param == "memory" else str(tmp_path / "approvals.db")


@pytest.fixture
def desk(location: str, tmp_path: Path) -> Iterator[tuple[Executor, AuditLog]]:
    """An executor whose approvals (and grants) live at ``location``, with an audit log."""
    writes.clear()
    store, close = open_approvals(location, "t1")
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    broker = ApprovalBroker(store=store, audit=audit)
    executor = Executor(
        CapabilityRegistry.from_tools([write]), Policy.allow_all(), audit=audit, approvals=broker
    )
    yield executor, audit
    audit.close()
    if close is not None:
        close()


def call(executor: Executor, args: dict[str, Any], who: Identity = CAROL, **kw: Any) -> Any:
    return asyncio.run(executor.call("write", args, who, **kw))


def remembered(executor: Executor, args: dict[str, Any], remember: Remember) -> Any:
    """Make ``args`` wait, then grant that request and remember it."""
    waiting = call(executor, args)
    assert waiting.outcome is Outcome.NEEDS_APPROVAL
    return executor.approvals.remember(waiting.approval, approver=RITA, remember=remember)


WIDE = {"path": {"glob": "notes/*"}, "content": "any"}


def test_a_remembered_grant_runs_a_later_covered_call_and_its_row_names_the_grant(
    desk: tuple[Executor, AuditLog],
) -> None:
    executor, audit = desk
    first = {"path": "notes/a.md", "content": "a"}
    grant = remembered(executor, first, Remember(HOUR, pattern=WIDE))
    later = call(executor, {"path": "notes/b.md", "content": "b"})
    assert later.outcome is Outcome.OK and later.grant_id == grant.grant_id
    assert writes == [("notes/b.md", "b")]
    [row] = [e for e in audit.query(limit=100) if e.call_id == later.call_id]
    assert (row.outcome, row.decision, row.grant_id) == ("ok", "allow", grant.grant_id)
    made = audit.query(outcome="grant_created")
    assert [(e.principal, e.grant_id, e.args) for e in made] == [("rita", grant.grant_id, WIDE)]


@pytest.mark.parametrize(
    "args",
    [
        {"path": "deploy/b.md", "content": "b"},  # another path
        {"path": "notes/b.md", "content": "b", "mode": "a"},  # an argument the pattern lacks
        {"path": "notes/../secrets/b.md", "content": "b"},  # a spelling of another path
    ],
    ids=["other-path", "extra-argument", "dot-dot-spelling"],
)
def test_a_call_the_pattern_does_not_cover_still_asks(
    desk: tuple[Executor, AuditLog], args: dict[str, Any]
) -> None:
    executor, _ = desk
    remembered(executor, {"path": "notes/a.md", "content": "a"}, Remember(HOUR, pattern=WIDE))
    assert call(executor, args).outcome is Outcome.NEEDS_APPROVAL
    assert writes == []


def test_the_pattern_is_matched_on_the_canonical_path(desk: tuple[Executor, AuditLog]) -> None:
    executor, _ = desk
    remembered(executor, {"path": "notes/a.md", "content": "a"}, Remember(HOUR, pattern=WIDE))
    assert call(executor, {"path": "./notes/x/../b.md", "content": "b"}).ok
    assert writes == [("notes/b.md", "b")]  # the name decided on is the name written


def test_a_grant_covers_only_its_principal_and_exact_values_by_default(
    desk: tuple[Executor, AuditLog],
) -> None:
    executor, _ = desk
    remembered(executor, {"path": "notes/a.md", "content": "a"}, Remember(HOUR))
    assert call(executor, {"path": "notes/a.md", "content": "a"}).ok
    assert call(executor, {"path": "notes/a.md", "content": "b"}).outcome is Outcome.NEEDS_APPROVAL
    other = call(executor, {"path": "notes/a.md", "content": "a"}, who=MALLORY)
    assert other.outcome is Outcome.NEEDS_APPROVAL


def test_a_grant_never_widens_a_deny_of_the_policy(tmp_path: Path) -> None:
    writes.clear()
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps({"default_effect": "allow"}))
    executor = Executor(
        CapabilityRegistry.from_tools([write]), Policy.from_yaml(policy, reload_interval=0)
    )
    remembered(executor, {"path": "a.md", "content": "a"}, Remember(HOUR, pattern={"path": "any"}))
    assert call(executor, {"path": "deploy/x", "content": "a"}).ok  # allowed, and granted
    policy.write_text(json.dumps(DENY_DEPLOY))
    executor.policy.refresh(force=True)
    denied = call(executor, {"path": "deploy/x", "content": "a"})
    assert denied.outcome is Outcome.DENIED and denied.grant_id is None
    assert writes == [("deploy/x", "a")]


def test_a_principal_never_remembers_its_own_call(desk: tuple[Executor, AuditLog]) -> None:
    executor, audit = desk
    waiting = call(executor, {"path": "a.md", "content": "a"})
    itself = Identity(CAROL.id, roles=["writer", "approver"])
    with pytest.raises(ApprovalError, match="a caller cannot approve its own call"):
        executor.approvals.remember(waiting.approval, approver=itself, remember=Remember(HOUR))
    assert executor.approvals.grants() == []
    assert [e.outcome for e in audit.query(principal=CAROL.id)][-1] == "approval_rejected"


def test_a_grant_stops_when_it_is_revoked(desk: tuple[Executor, AuditLog]) -> None:
    executor, audit = desk
    grant = remembered(executor, {"path": "a.md", "content": "a"}, Remember(HOUR))
    assert call(executor, {"path": "a.md", "content": "a"}).ok
    executor.approvals.revoke(grant.grant_id, approver=RITA)
    assert call(executor, {"path": "a.md", "content": "a"}).outcome is Outcome.NEEDS_APPROVAL
    assert [e.grant_id for e in audit.query(outcome="grant_revoked")] == [grant.grant_id]
    with pytest.raises(ApprovalError, match="already expired or was revoked"):
        executor.approvals.revoke(grant.grant_id, approver=RITA)


def pay(account: str, memo: str, payee: str) -> str:
    """Pay (a human approves each call)."""
    return "paid"


annotate(pay, requires_approval=True, sensitive=["account"])
IBAN, ACME = "DE89370400440532013000", "ACME-123456"


def test_a_grants_rows_redact_its_values_as_the_calls_own_rows_do(tmp_path: Path) -> None:
    """The rows of a grant made and revoked hide the sensitive argument and the values the
    policy's redaction patterns match, as the call's own rows do; a revoke (another broker,
    the request not at hand) withholds every value."""
    policy = Policy.from_dict(
        {"default_effect": "allow", "redaction": {"patterns": {"acme": r"ACME-[0-9]{6}"}}}
    )
    where = str(tmp_path / "approvals.db")
    store, close = open_approvals(where, "t1")
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    broker = ApprovalBroker(store=store, audit=audit)
    executor = Executor(CapabilityRegistry.from_tools([pay]), policy, audit=audit, approvals=broker)
    args = {"account": IBAN, "memo": f"ref {ACME} march", "payee": "acme gmbh"}
    waiting = asyncio.run(executor.call("pay", args, CAROL))
    globs = {"memo": {"glob": f"ref {ACME} *"}, "payee": {"glob": "acme *"}}
    assert waiting.approval is not None
    grant = broker.remember(waiting.approval, approver=RITA, remember=Remember(HOUR, pattern=globs))
    assert asyncio.run(executor.call("pay", {**args, "memo": f"ref {ACME} april"}, CAROL)).ok
    other, close_other = open_approvals(where, "t1")  # as another process would
    ApprovalBroker(store=other, audit=audit).revoke(grant.grant_id, approver=RITA)
    for done in (close, close_other):
        if done is not None:
            done()
    rows = {e.outcome: e for e in audit.query(limit=100)}
    assert rows["approval_granted"].args["account"] == "[REDACTED]"
    assert rows["grant_created"].args == {
        "account": {"eq": "[REDACTED]"},
        "memo": {"glob": "[REDACTED]"},  # the approver's glob spells the secret
        "payee": {"glob": "acme *"},
    }
    assert rows["grant_revoked"].args == {
        "account": {"eq": "[REDACTED]"},
        "memo": {"glob": "[REDACTED]"},
        "payee": {"glob": "[REDACTED]"},  # no request at hand: every value withheld
    }
    audit.close()
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("audit.db*"))
    assert IBAN.encode() not in stored and ACME.encode() not in stored


def test_a_grant_stops_when_it_expires(desk: tuple[Executor, AuditLog]) -> None:
    executor, _ = desk
    remembered(executor, {"path": "a.md", "content": "a"}, Remember(0.5))
    assert wait_until(
        lambda: call(executor, {"path": "a.md", "content": "a"}).outcome is Outcome.NEEDS_APPROVAL,
        timeout=10,
    )


def test_a_session_grant_covers_only_its_session(desk: tuple[Executor, AuditLog]) -> None:
    executor, _ = desk
    waiting = call(executor, {"path": "a.md", "content": "a"}, session="s1")
    executor.approvals.remember(waiting.approval, approver=RITA, remember=Remember(HOUR, True))
    assert call(executor, {"path": "a.md", "content": "a"}, session="s1").ok
    again = call(executor, {"path": "a.md", "content": "a"}, session="s2")
    assert again.outcome is Outcome.NEEDS_APPROVAL


@pytest.mark.parametrize(
    ("remember", "message"),
    [
        (Remember(HOUR, pattern={"path": {"glob": "deploy/*"}}), "does not cover the request"),
        (Remember(HOUR, pattern={"owner": "any"}), "names owner, which the request does not"),
        (Remember(HOUR, pattern={"path": {"regex": ".*"}}), "a matcher is"),
        (Remember(40 * 86400.0), "at most"),
        (Remember(HOUR, session=True), "came from no session"),
    ],
    ids=["not-the-request", "unknown-argument", "bad-matcher", "too-long", "no-session"],
)
def test_a_grant_that_cannot_be_made_is_refused_and_the_request_still_waits(
    desk: tuple[Executor, AuditLog], remember: Remember, message: str
) -> None:
    executor, _ = desk
    waiting = call(executor, {"path": "notes/a.md", "content": "a"})
    with pytest.raises(ApprovalError, match=message):
        executor.approvals.remember(waiting.approval, approver=RITA, remember=remember)
    assert executor.approvals.grants() == []
    assert [r.approval_id for r in executor.approvals.pending()] == [waiting.approval.approval_id]


def test_a_grant_is_shown_exactly_as_it_matches() -> None:
    pattern = {"path": {"glob": "notes/*"}, "content": "any", "mode": {"eq": "w"}}
    assert covers(pattern, {"path": "notes/a/b.md", "content": [1], "mode": "w"})
    assert not covers(pattern, {"path": "notes/a.md", "mode": True})  # True is not "w"
    assert not covers({"n": {"eq": 1}}, {"n": True}) and not covers({"n": {"eq": 1}}, {"n": 1.0})
    grant = Remember(HOUR, pattern=pattern).grant(_request(), RITA, 0.0)
    assert describe(grant) == (
        'carol may call write with content any value, mode = "w", path matching "notes/*", '
        "until 1970-01-01 01:00:00 UTC"
    )


def _request() -> Any:
    from toolcards.core.approvals import ApprovalRequest
    from toolcards.governance.redaction.redactor import args_digest, canonical_json

    args = {"path": "notes/a.md", "content": "a", "mode": "w"}
    return ApprovalRequest(
        "c1", "write", args_digest(args), "carol", args, "why", 60.0, args_json=canonical_json(args)
    )


# -- several processes ----------------------------------------------------------------------

CALLER = textwrap.dedent(
    """
    import asyncio, sys
    from toolcards.core.spec import annotate
    from toolcards.governance import ApprovalBroker, CapabilityRegistry, Executor, Identity, Policy
    from toolcards.stores.open import open_approvals

    def write(path: str, content: str) -> str:
        "Write."
        return "wrote " + path

    annotate(write, requires_approval=True)
    store, _ = open_approvals(sys.argv[1], "t1")
    executor = Executor(CapabilityRegistry.from_tools([write]), Policy.allow_all(),
                        approvals=ApprovalBroker(store=store))
    print("ready", flush=True)
    for line in sys.stdin:
        result = asyncio.run(executor.call("write", {"path": "a.md", "content": "a"},
                                           Identity("carol")))
        print(result.outcome.value, result.grant_id, flush=True)
    """
)


LAST = chr(0x10FFFF)


@pytest.mark.parametrize(
    ("pattern", "args", "covered"),
    [
        # a prefix glob: a string from the prefix on, and nothing that merely sorts near it
        ({"path": {"glob": "notes/*"}}, {"path": "notes/"}, True),
        ({"path": {"glob": "notes/*"}}, {"path": f"notes/{LAST}"}, True),
        ({"path": {"glob": "notes/*"}}, {"path": "notes0"}, False),
        ({"path": {"glob": "notes/*"}}, {"path": "notes."}, False),
        ({"path": {"glob": "notes/*"}}, {"path": "notes"}, False),
        ({"path": {"glob": "notes/*"}}, {"path": 5}, False),
        ({"path": {"glob": "notes/*"}}, {"path": None}, False),
        ({"path": {"glob": "notes/*"}}, {"path": ["notes/a"]}, False),
        ({"path": {"glob": "notes/*"}}, {}, False),
        ({"path": {"glob": f"x{LAST}*"}}, {"path": f"x{LAST}y"}, True),
        ({"path": {"glob": f"x{LAST}*"}}, {"path": "y"}, False),
        ({"path": {"glob": "*"}}, {"path": ""}, True),
        ({"path": {"glob": "*"}}, {"path": 1}, False),
        ({"a": {"glob": "x/*"}, "b": {"glob": "y/*"}}, {"a": "x/1", "b": "y/2"}, True),
        ({"a": {"glob": "x/*"}, "b": {"glob": "y/*"}}, {"a": "x/1", "b": "x/2"}, False),
        # exact values, alone or several, null included; every argument named, no other
        ({"a": {"eq": "w"}}, {"a": "w"}, True),
        ({"a": {"eq": "w"}}, {"a": "w", "c": "w"}, False),
        ({"a": {"eq": "w"}}, {}, False),
        ({"a": {"eq": None}}, {"a": None}, True),
        ({"a": {"eq": None}}, {}, False),
        ({"a": {"eq": None}}, {"a": "None"}, False),
        ({"a": {"eq": None}, "b": {"eq": "x"}}, {"a": None, "b": "x"}, True),
        ({"a": {"eq": None}, "b": {"eq": "x"}}, {"a": "x", "b": "x"}, False),
        ({"a": {"eq": "w"}, "p": {"glob": "n/*"}}, {"a": "w", "p": "n/1"}, True),
        ({"a": {"eq": "w"}, "p": {"glob": "n/*"}}, {"a": "r", "p": "n/1"}, False),
        ({"a": {"eq": "w"}, "p": {"glob": "n/*"}}, {"p": "n/1"}, False),
        ({"a": {"eq": [1]}, "b": {"eq": 2}}, {"a": [1], "b": 2}, True),
        ({"a": {"eq": [1]}, "b": {"eq": 2}}, {"a": [1], "b": 2.0}, False),
        # "any": any value or none, and still no argument the pattern does not name
        ({"a": "any", "b": {"eq": "w"}}, {"b": "w"}, True),
        ({"a": "any", "b": {"eq": "w"}}, {"a": {"k": 1}, "b": "w"}, True),
        ({"a": "any", "b": {"eq": "w"}}, {"c": 1, "b": "w"}, False),
        ({}, {}, True),
        ({}, {"a": 1}, False),
    ],
)
def test_a_pattern_covers_exactly_what_its_matchers_say(
    pattern: dict[str, Any], args: dict[str, Any], covered: bool
) -> None:
    assert covers(pattern, args) is covered


def test_every_path_of_a_call_that_names_several_must_match() -> None:
    pattern = {"path": {"glob": "notes/*"}}
    assert covers(pattern, {"path": "notes/a"}, {"path": ("notes/a", "notes/b")})
    assert not covers(pattern, {"path": "notes/a"}, {"path": ("notes/a", "etc/passwd")})


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_grant_made_in_one_process_runs_in_another_and_stops_there_once_revoked(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    where = (
        str(request.getfixturevalue("postgres_url"))
        if backend == "postgres"
        else str(tmp_path / "approvals.db")
    )
    store, close = open_approvals(where, "t1")
    broker = ApprovalBroker(store=store)
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    other = subprocess.Popen(
        [PYTHON, str(script), where], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert other.stdin is not None and other.stdout is not None
    try:

        def ask() -> list[str]:
            other.stdin.write("call\n")  # type: ignore[union-attr]
            other.stdin.flush()  # type: ignore[union-attr]
            return other.stdout.readline().split()  # type: ignore[union-attr]

        assert other.stdout.readline().strip() == "ready"
        assert ask()[0] == "needs_approval"
        [waiting] = broker.pending()
        grant = broker.remember(waiting, approver=RITA, remember=Remember(HOUR))
        assert wait_until(lambda: ask() == ["ok", grant.grant_id], timeout=30)
        broker.revoke(grant.grant_id, approver=RITA)
        assert ask()[0] == "needs_approval"  # the very next call: no waiting for a notice
    finally:
        other.stdin.close()
        other.wait(30)
        if close is not None:
            close()
