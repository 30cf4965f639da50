"""AuditLog: one row per decision, redaction, queries, durability."""

from __future__ import annotations

import contextlib
import hashlib
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from toolcards.core.spec import annotate
from toolcards.governance import (
    AuditLog,
    AuditRecord,
    CapabilityRegistry,
    Executor,
    Identity,
    Policy,
)
from toolcards.governance.audit import log as audit_log

pytestmark = pytest.mark.anyio
ALICE = Identity("alice", roles=["admin", "ops"])


def login(user: str, password: str, note: str = "") -> str:
    """Log in."""
    return "ok"


def _executor(audit: AuditLog, policy: dict[str, Any] | None = None) -> Executor:
    registry = CapabilityRegistry.from_tools([login])
    return Executor(registry, Policy.from_dict(policy or {"default_effect": "allow"}), audit=audit)


async def test_one_row_per_call_with_principal_roles_surface_and_outcome(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = _executor(audit)
        await executor.call("login", {"user": "a", "password": "p"}, ALICE, surface="cli")
        rows = audit.query()
    assert len(rows) == 1
    row = rows[0]
    assert (row.principal, row.roles, row.surface, row.tool) == (
        "alice",
        ("admin", "ops"),
        "cli",
        "login",
    )
    assert (row.decision, row.outcome, row.error) == ("allow", "ok", None)
    assert len(row.args_digest) == 64 and row.duration_ms >= 0


async def test_secrets_are_redacted_by_name_and_by_look(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        args = {"user": "a", "password": "hunter2", "note": "key sk-abcdefghijklmnopqrstuvwx ok"}
        await _executor(audit).call("login", args, ALICE)
        row = audit.tail(1)[0]
        raw = (tmp_path / "audit.db").read_bytes() + (tmp_path / "audit.db-wal").read_bytes()
    assert row.args["password"] == "[REDACTED]"
    assert row.args["note"] == "key [REDACTED] ok"
    assert row.args["user"] == "a"
    assert b"hunter2" not in raw and b"sk-abcdefghij" not in raw


ONLY_ADMIN_LOGS_IN = {
    "default_effect": "deny",
    "rules": [
        {"targets": ["login"], "effect": "allow", "conditions": {"arguments": {"user": "admin"}}}
    ],
}


async def test_denied_calls_are_recorded_as_denied(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        await _executor(audit, ONLY_ADMIN_LOGS_IN).call(
            "login", {"user": "a", "password": "p"}, ALICE
        )
        rows = audit.query(decision="deny")
    assert [(r.tool, r.outcome) for r in rows] == [("login", "denied")]


async def test_calls_to_hidden_tools_are_recorded_as_unknown_with_the_policy_decision(
    tmp_path: Path,
) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        await _executor(audit, {"default_effect": "deny"}).call("login", {"user": "a"}, ALICE)
        await _executor(audit).call("logn", {"user": "a"}, ALICE)
        rows = audit.query()
    assert [(r.tool, r.decision, r.outcome) for r in rows] == [
        ("login", "deny", "unknown_tool"),
        ("logn", "deny", "unknown_tool"),
    ]
    assert rows[1].reason == "unknown tool"


async def test_a_long_made_up_tool_name_is_cut_in_its_row_and_not_remembered(
    tmp_path: Path,
) -> None:
    """The memo of shown names kept each name a caller made up whole (up to 4,096 of them, a
    request body each): megabyte names held gigabytes."""
    name = "x" * (1 << 20)
    with AuditLog(tmp_path / "audit.db") as audit:
        await _executor(audit).call(name, {}, ALICE)
        [row] = audit.query()
    assert row.outcome == "unknown_tool"
    assert row.tool.startswith("x" * 100) and row.tool.endswith("...[truncated]")
    assert len(row.tool) < 4096
    assert not any(tool == name for _, tool in audit_log._NAMES)


async def test_query_filters_by_principal_tool_and_time(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = _executor(audit)
        before = time.time() - 1
        await executor.call("login", {"user": "a", "password": "p"}, ALICE)
        await executor.call("login", {"user": "b", "password": "p"}, Identity("bob"))
        assert [r.principal for r in audit.query(principal="bob")] == ["bob"]
        assert len(audit.query(tool="login", since=before)) == 2
        assert audit.query(until=before) == []
        assert len(audit.query(limit=1)) == 1


async def test_sync_durability_commits_before_the_call_returns(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    audit = AuditLog(path, durability="sync")
    try:
        await _executor(audit).call("login", {"user": "a", "password": "p"}, ALICE)
        other = sqlite3.connect(path)
        count = other.execute("SELECT count(*) FROM audit").fetchone()[0]
        other.close()
    finally:
        audit.close()
    assert count == 1


async def test_batched_rows_survive_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    audit = AuditLog(path)
    executor = _executor(audit)
    for i in range(50):
        await executor.call("login", {"user": f"u{i}", "password": "p"}, ALICE)
    audit.close()
    audit.close()
    with AuditLog(path) as reopened:
        assert len(reopened.query(limit=1000)) == 50
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_tool_error_is_recorded_redacted(tmp_path: Path) -> None:
    def leak(token: str) -> str:
        """Fails."""
        raise ValueError("bad Bearer abcdefghijklmnopqrstuvwxyz")

    registry = CapabilityRegistry.from_tools([leak])
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = Executor(registry, Policy.allow_all(), audit=audit)
        await executor.call("leak", {"token": "t0ps3cret"}, ALICE)
        row = audit.tail(1)[0]
    assert row.outcome == "error"
    assert row.error is not None and "abcdefghijklmnop" not in row.error
    assert row.args == {"token": "[REDACTED]"}


async def test_an_error_repeating_a_secret_argument_is_stored_without_it(tmp_path: Path) -> None:
    """The arguments' column hides ``pin`` and a ``sensitive`` argument; the error an
    exception or a validation message makes of them hid neither (it was stored in clear)."""

    def unlock(user: str, pin: str, dsn: str) -> str:
        """Unlock."""
        raise PermissionError(f"refused {user} with {pin} on {dsn}")

    def take(options: dict[str, int]) -> str:
        """Take."""
        return "ok"

    registry = CapabilityRegistry.from_tools([annotate(unlock, sensitive=["dsn"]), take])
    key = "Zq8XvB3kLmN7pR2tW9yC4dF6gH1jK5sQ"
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = Executor(registry, Policy.allow_all(), audit=audit)
        args = {"user": "bob", "pin": "12a4-9981", "dsn": "host=db s3cr3t-Pa55"}
        await executor.call("unlock", args, ALICE)
        await executor.call("take", {"options": {key: "x"}}, ALICE)
        unlocked, took = audit.query()
    assert unlocked.args == {"user": "bob", "pin": "[REDACTED]", "dsn": "[REDACTED]"}
    assert unlocked.error == "PermissionError: refused bob with [REDACTED] on [REDACTED]"
    assert took.outcome == "invalid_args"
    assert took.error is not None and key not in took.error and "[REDACTED]" in took.error


async def test_an_error_repeating_a_secret_escaped_or_shortened_is_stored_without_it(
    tmp_path: Path,
) -> None:
    """``repr`` doubles a secret's backslashes; pydantic shows a long input by its head and
    tail: both went into the error column (48 of a password's 50 characters)."""

    def login(user: str, password: str) -> str:
        """Log in."""
        raise PermissionError(f"login refused for {password!r}")

    def connect(token: str) -> str:
        """Connect (the driver validates the token: pydantic shows it shortened)."""
        return str(TypeAdapter(int).validate_python(token))

    registry = CapabilityRegistry.from_tools([login, connect])
    long_secret = "Zq8vT1mWq3rK9pX2bN7cL4hJ5dF6gH1jK0sG5yE1uA8iO3wQ9eR2tY7u"
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = Executor(registry, Policy.allow_all(), audit=audit)
        await executor.call("login", {"user": "bob", "password": "C:\\svc\\Pa55\\w0rd"}, ALICE)
        await executor.call("connect", {"token": long_secret}, ALICE)
        errors = [row.error or "" for row in audit.query()]
    assert errors[0] == "PermissionError: login refused for '[REDACTED]'"
    assert "Pa55" not in errors[0]
    assert "input_value=[REDACTED]" in errors[1]
    assert all(long_secret[i : i + 8] not in errors[1] for i in range(len(long_secret) - 8))


@pytest.mark.parametrize(
    "shown",
    [
        lambda p: f"GET https://api.example/login?u=bob&p={urllib.parse.quote(p, safe='')} failed",
        lambda p: f"refused body p={urllib.parse.quote_plus(p)}",
        lambda p: f"refused {p!a}",
        lambda p: f"refused {p.encode()!r}",
    ],
    ids=["percent-encoded", "form-encoded", "ascii", "bytes-repr"],
)
async def test_an_error_repeating_a_secret_encoded_is_stored_without_it(
    tmp_path: Path, shown: Callable[[str], str]
) -> None:
    """An HTTP client's error repeats a URL or form body percent-encoded, ``%a`` and a bytes
    ``repr`` escape what is not ASCII: each kept the hidden password readable in the error
    column (``S3cr3t%2FP%C3%A4ssword%26x%3D1``)."""
    secret = "S3cr3t/Pässword&x=1 ok"

    def login(user: str, password: str) -> str:
        """Log in."""
        raise PermissionError(shown(password))

    registry = CapabilityRegistry.from_tools([login])
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = Executor(registry, Policy.allow_all(), audit=audit)
        await executor.call("login", {"user": "bob", "password": secret}, ALICE)
        [row] = audit.query()
    assert row.error is not None and "[REDACTED]" in row.error
    assert "S3cr3t" not in row.error and "ssword" not in row.error


def test_invalid_durability_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        AuditLog(tmp_path / "a.db", durability="sometimes")  # type: ignore[arg-type]


def test_record_takes_a_named_audit_record(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        audit.record(
            AuditRecord(
                ts=123.0,
                principal="svc",
                principal_type="service",
                roles=("b", "a"),
                surface="cli",
                tool="login",
                call_id="c9",
                args={"user": "u", "password": "p"},
                decision="allow",
                outcome="ok",
                reason="rule 3",
                duration=0.002,
            )
        )
        row = audit.tail(1)[0]
    assert (row.ts, row.principal, row.principal_type, row.roles) == (
        123.0,
        "svc",
        "service",
        ("a", "b"),
    )
    assert (row.call_id, row.decision, row.reason, row.outcome) == ("c9", "allow", "rule 3", "ok")
    assert row.args == {"user": "u", "password": "[REDACTED]"}
    assert row.duration_ms == pytest.approx(2.0)


def test_an_unserialisable_argument_keeps_the_row(tmp_path: Path) -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with AuditLog(tmp_path / "audit.db") as audit:
        audit.record(
            AuditRecord(
                ts=1.0,
                principal="p",
                principal_type="user",
                roles=(),
                surface="s",
                tool="t",
                call_id=None,
                args=loop,
                decision="allow",
                outcome="ok",
            )
        )
        rows = audit.tail(5)
    assert [r.args for r in rows] == [{"unserialisable": True}]


QUEUE_5000 = """
import os, sys, time
from toolcards.governance import AuditLog, AuditRecord
log = AuditLog(sys.argv[1])
for i in range(5000):
    log.record(AuditRecord(ts=time.time(), principal="p", principal_type="user", roles=(),
                           surface="s", tool="t", call_id=str(i), args={"i": i, "pad": "x" * 200},
                           decision="allow", outcome="ok"))
print("queued", flush=True)
if sys.argv[2] == "wait":
    for _ in range(600):  # short naps: a signal landing just before one is handled after it
        time.sleep(0.1)
"""


def _rows(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT count(DISTINCT call_id) FROM audit").fetchone()[0])
    finally:
        db.close()


@pytest.mark.timeout(60)
def test_queued_rows_survive_an_exit_without_close(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    done = subprocess.run(
        [sys.executable, "-c", QUEUE_5000, str(path), "exit"],
        capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _rows(path) == 5000


@pytest.mark.timeout(60)
def test_queued_rows_survive_sigterm_and_the_process_still_dies_by_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    assert _ended_by(signal.SIGTERM, QUEUE_5000, str(path), "wait") == -signal.SIGTERM
    assert _rows(path) == 5000


def _ended_by(signum: int, script: str, *args: str) -> int | None:
    """Run ``script``, send it ``signum`` once it printed "queued"; its return code."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "queued"
        proc.send_signal(signum)
        proc.wait(timeout=40)
    finally:
        proc.kill()
    return proc.returncode


CHAINED = """
import signal, sys, time
from toolcards.governance import AuditLog, AuditRecord
def own(signum, frame):
    print("own handler ran", flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, own)
log = AuditLog(sys.argv[1])
log.record(AuditRecord(ts=1.0, principal="p", principal_type="user", roles=(), surface="s",
                       tool="t", call_id="only", args={}, decision="allow", outcome="ok"))
print("queued", flush=True)
for _ in range(600):  # short naps: a signal landing just before one is handled after it
    time.sleep(0.1)
"""


@pytest.mark.timeout(60)
def test_a_programs_own_sigterm_handler_still_runs_after_the_flush(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHAINED, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "queued"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=40)
    finally:
        proc.kill()
    assert proc.returncode == 3 and "own handler ran" in out
    assert _rows(path) == 1


def test_query_pages_back_with_before(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        for i in range(7):
            audit.record(
                AuditRecord(
                    ts=float(i), principal="p", principal_type="user", roles=(), surface="s",
                    tool="t", call_id=str(i), args={}, decision="allow", outcome="ok",
                )
            )  # fmt: skip
        newest = audit.query(limit=3)
        older = audit.query(limit=3, before=newest[0].id)
    assert [e.call_id for e in newest] == ["4", "5", "6"]
    assert [e.call_id for e in older] == ["1", "2", "3"]


async def test_the_trail_of_a_distributed_team_is_one_postgresql_table(
    postgres_url: str, postgres_server: object
) -> None:
    first, second = (AuditLog(postgres_url, team_id="trail") for _ in range(2))  # two processes
    try:
        await _executor(first).call("login", {"user": "a", "password": "pw-1"}, ALICE)
        first.flush()  # each log commits in its own thread: a's row first, then b's
        await _executor(second).call("login", {"user": "b", "password": "pw-2"}, ALICE)
        second.flush()
        rows = first.query(limit=10)
        assert [r.args["user"] for r in rows] == ["a", "b"]
        assert all("pw-" not in str(r.args) for r in rows)  # redacted before it is stored
        assert "s3cret" not in str(first.path)  # the printable location hides the password
    finally:
        first.close()
        second.close()


def test_a_pickled_audit_log_writes_to_the_same_trail(tmp_path: Path) -> None:
    import pickle

    with AuditLog(tmp_path / "audit.db") as audit:
        copy = pickle.loads(pickle.dumps(audit))  # as sent to a worker process
        try:
            assert copy is not audit and copy.path == audit.path
            copy.record(
                AuditRecord(
                    ts=time.time(),
                    principal="alice",
                    principal_type="user",
                    roles=["ops"],
                    surface="cli",
                    tool="login",
                    call_id=None,
                    args={},
                    decision="allow",
                    outcome="ok",
                )
            )
            copy.flush()
            assert [e.tool for e in audit.tail()] == ["login"]
        finally:
            copy.close()


def _record(log: AuditLog, call_id: str) -> None:
    log.record(
        AuditRecord(
            ts=time.time(), principal="p", principal_type="user", roles=(), surface="s",
            tool="t", call_id=call_id, args={"n": call_id}, decision="allow", outcome="ok",
        )
    )  # fmt: skip


def _journals(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.journal"))


def test_a_committed_journal_file_is_cleared_and_written_again(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    log = AuditLog(tmp_path / "audit.db", spill_dir=spill)
    try:
        for n in range(5):
            _record(log, f"a{n}")
        assert log.flush()
        [first] = _journals(spill)  # its rows are committed: kept for later rows, cleared
        assert first.read_bytes().strip(b"\0") == b""
        for n in range(5):
            _record(log, f"b{n}")
        assert log.flush()
        assert _journals(spill) == [first]  # the same file took the next batch
        assert first.read_bytes().strip(b"\0") == b""
    finally:
        log.close()
    assert _journals(spill) == []
    with AuditLog(tmp_path / "audit.db", spill_dir=spill) as after:
        assert sorted(e.call_id or "" for e in after.query()) == [
            *(f"a{n}" for n in range(5)),
            *(f"b{n}" for n in range(5)),
        ]


KILLED_AFTER_A_BATCH = """
import sys, time
from toolcards.governance import AuditLog, AuditRecord
log = AuditLog(sys.argv[1], spill_dir=sys.argv[2], linger=60)
def rec(call_id):
    log.record(AuditRecord(ts=time.time(), principal="p", principal_type="user", roles=(),
                           surface="s", tool="t", call_id=call_id, args={"n": call_id},
                           decision="allow", outcome="ok"))
for n in range(3):
    rec(f"a{n}")
assert log.flush(30)
for n in range(3):
    rec(f"b{n}")
print("queued", flush=True)
time.sleep(60)
"""


@pytest.mark.timeout(60)
def test_rows_in_a_journal_file_written_again_outlive_sigkill_once(tmp_path: Path) -> None:
    path, spill = tmp_path / "audit.db", tmp_path / "spill"
    assert _ended_by(signal.SIGKILL, KILLED_AFTER_A_BATCH, str(path), str(spill)) == -signal.SIGKILL
    with AuditLog(path, spill_dir=spill) as after:  # the next process of the trail
        rows = after.query()
        assert after.verify().ok
    assert sorted(e.call_id or "" for e in rows) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert _journals(spill) == []


@pytest.mark.parametrize("count", [30, 70])
async def test_an_error_repeating_many_secret_arguments_keeps_none_of_them(
    tmp_path: Path, count: int
) -> None:
    """Each secret's spellings took a share of a bound on collected strings: past about
    21 secrets the rest were written in clear. Up to 64 values are left out one by one;
    past them the error's text is withheld whole."""

    def rotate(api_keys: list[str]) -> str:
        """Rotate keys."""
        raise ValueError("rejected: " + " ".join(api_keys))

    keys = [hashlib.sha256(str(i).encode()).hexdigest()[:20] for i in range(count)]
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = Executor(
            CapabilityRegistry.from_tools([rotate]), Policy.allow_all(), audit=audit
        )
        await executor.call("rotate", {"api_keys": keys}, ALICE)
        [row] = audit.query()
    assert row.error is not None and row.error.startswith("ValueError: ")
    assert not any(key in row.error for key in keys)


def _trail(path: Path, team_id: str = "stored") -> None:
    """A trail of one row, written (and closed) by its writer."""
    with AuditLog(path, durability="sync", team_id=team_id) as writer:
        _record(writer, "c1")


def test_a_read_only_trail_that_does_not_exist_is_refused_and_not_created(
    tmp_path: Path,
) -> None:
    """Before: the read-only view (`dashboard --store --audit`) created the file and claimed
    it for its team, so the trail's writer found it owned."""
    from toolcards.stores import StoreError

    with pytest.raises(StoreError, match="cannot read audit trail .*missing.db"):
        AuditLog(tmp_path / "missing.db", team_id="stored", read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_trail_of_an_older_layout_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    """A reader migrates nothing (before: it added the columns its writer, an older version,
    does not expect)."""
    from toolcards.stores import StoreError

    path = tmp_path / "audit.db"
    _trail(path)
    with contextlib.closing(sqlite3.connect(path)) as db:  # as the version before older_rows
        db.execute("ALTER TABLE audit_chain DROP COLUMN older_rows")
        db.execute("ALTER TABLE audit_chain DROP COLUMN older_id")
        db.commit()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="older layout .* open it once with a writer"):
        AuditLog(path, team_id="stored", read_only=True)
    assert path.read_bytes() == before
    with contextlib.closing(sqlite3.connect(path)) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(audit_chain)")]
    assert columns == ["team_id", "seq", "digest"]


@pytest.mark.timeout(60)
def test_a_read_only_trail_opens_and_reads_while_its_writer_holds_a_write_transaction(
    tmp_path: Path,
) -> None:
    """Before: opening took the file's write lock, so the view waited for the writer's
    transaction and failed with "database is locked"."""
    path = tmp_path / "audit.db"
    _trail(path)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE audit SET tool = 'uncommitted'")
        with AuditLog(path, team_id="stored", read_only=True) as view:
            assert [(e.call_id, e.tool) for e in view.query()] == [("c1", "t")]
            assert view.verify().ok
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_read_only_trail_reads_its_owners_rows_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _trail(path, team_id="owner")
    before = path.read_bytes()
    with AuditLog(path, read_only=True) as view:  # no team: the file's owner
        assert view.team_id == "owner"
        assert [e.call_id for e in view.tail(5)] == ["c1"]
        assert view.verify().ok
        _record(view, "c2")  # not written: the trail is its writer's
        assert [e.call_id for e in view.query()] == ["c1"]
    assert path.read_bytes() == before
