"""Redaction of secrets inside free text: a corpus of secret shapes (each must vanish), a few
look-alikes that must stay, and the configuration (extra patterns, disabled built-ins)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolcards.governance import (
    AuditLog,
    CapabilityRegistry,
    Executor,
    Identity,
    Policy,
    PolicyError,
    Redactor,
)
from toolcards.governance.redaction.redactor import (
    BUILTIN_NAMES,
    MAX_PATTERNS,
    REDACTED,
    redact,
    redact_text,
)

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----"
)
ALICE = Identity("alice")
# (text as a model or a tool might write it, the secret in it)
CORPUS: list[tuple[str, str]] = [
    ("password=hunter2", "hunter2"),
    ("db_password: s3cr3t!", "s3cr3t!"),
    ('settings {"api_key": "abc123def456"}', "abc123def456"),
    ("export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghij"),
    ("curl -H 'Authorization: Bearer abcdefghijklmnop.qrstuv'", "abcdefghijklmnop"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("key id AKIAIOSFODNN7EXAMPLE in us-east-1", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz01", "github_pat_11ABC"),
    ("oauth gho_16C7e42F292c6912E7710c838347Ae178B4a used", "gho_16C7e42F292c6912"),
    ("gitlab glpat-abcdefghij0123456789 here", "glpat-abcdefghij0123"),
    ("slack xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx", "xoxb-1234567890"),
    ("post to https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX", "T0000/B0000"),
    ("OPENAI key sk-proj-abcdefghijklmnopqrstuvwxyz012345", "sk-proj-abcdefgh"),
    ("anthropic sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "sk-ant-api03-abcd"),
    ("stripe sk_live_abcdefghijklmnop0123 charge", "sk_live_abcdefghij"),
    ("maps AIzaSyA1234567890abcdefghijklmnopqrstuv ok", "AIzaSyA1234567890"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789 publish", "npm_abcdefghijklmnop"),
    ("twine pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0NQ", "AgEIcHl"),
    ("hub hf_abcdefghijklmnopqrstuvwxyzABCDEF token", "hf_abcdefghijklmnop"),
    ("mail SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "SG.abcdefgh"),
    (f"key:\n{PEM}\nend", "MIIEowIBAAKCAQEA"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXkt",
    ),
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBGRmZW\n-----END PGP PRIVATE KEY BLOCK-----",
        "lQOYBGRmZW",
    ),
    ("psql postgres://admin:Pa55word@db.internal:5432/app", "Pa55word"),
    ("git clone https://user:tok3n-123@github.com/org/repo.git", "tok3n-123"),
    ("mysql --password s3cr3tpw --host db", "s3cr3tpw"),
    ("client_secret=abc.def-ghi&grant_type=x", "abc.def-ghi"),
    ("Cookie: session=0123456789abcdef", "0123456789abcdef"),
    ("X-Api-Key: 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=abc123+/def==;Suffix=x",
        "abc123+/def==",
    ),
    ("https://acct.blob.core.windows.net/c?sv=2020&sig=abcdef1234567890%3D", "abcdef1234567890"),
    ('passphrase: "correct horse battery staple"', "correct horse battery staple"),
    ("API-KEY=zzz999yyy", "zzz999yyy"),
    ("{'access_token': 'ya29.a0AfH6SMBx3'}", "ya29.a0AfH6SMBx3"),
    ("PRIVATE_KEY=abcdef0123", "abcdef0123"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "dozjgNry"),
    ("login with passwd=letmein please", "letmein"),
    ('{"password": ["hunter2", "s3cret-old"]}', "hunter2"),
    ('{"password": [\n  "old-one",\n  "hunter2"\n]}', "hunter2"),
    ('{"pin": 4321, "user": "ada"}', "4321"),
    ("card_pin=0000", "0000"),
]
NOT_SECRETS = [
    "max_tokens=100",
    "the password policy requires 12 characters",
    "task-abcdefghijklmnopqrstuv",
    "https://example.com/path?q=1&page=2",
    "token_count: 42",
    "Asia-Pacific region",
    "bearer bonds are a thing",
    "password_hint=the usual",
    "design=compact",
    "spinner=3 pinned=yes",
]


@pytest.mark.parametrize(("text", "secret"), CORPUS, ids=[t[:28] for t, _ in CORPUS])
def test_secret_shapes_in_free_text_are_redacted(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert REDACTED in out


def test_the_corpus_covers_thirty_shapes() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_look_alikes_are_not_redacted(text: str) -> None:
    assert redact_text(text) == text


def test_the_key_of_a_pair_stays_readable() -> None:
    assert redact_text("user=bob password=hunter2 mode=fast") == (
        "user=bob password=[REDACTED] mode=fast"
    )


@pytest.mark.parametrize(("text", "secret"), CORPUS[:12], ids=[t[:28] for t, _ in CORPUS[:12]])
def test_audit_rows_never_hold_a_secret_from_free_text(
    tmp_path: Path, text: str, secret: str
) -> None:
    def note(text: str) -> str:
        """Keep a note."""
        return "kept"

    registry = CapabilityRegistry.from_tools([note])
    with AuditLog(tmp_path / "audit.db") as audit:
        executor = Executor(registry, Policy.allow_all(), audit=audit)
        asyncio.run(executor.call("note", {"text": text}, Identity("alice")))
        row = audit.tail(1)[0]
        raw = (tmp_path / "audit.db").read_bytes() + (tmp_path / "audit.db-wal").read_bytes()
    assert secret not in row.args["text"]
    assert secret.encode() not in raw


def test_nested_values_are_redacted_by_name_and_by_look() -> None:
    value = {"items": [{"note": "token: abc123"}, {"password": "x"}], "n": 1}
    assert redact(value) == {
        "items": [{"note": f"token: {REDACTED}"}, {"password": REDACTED}],
        "n": 1,
    }


def test_audit_rows_never_hold_a_list_or_a_number_under_a_secret_name(tmp_path: Path) -> None:
    def enrol(user: str, password: list[str], pin: int) -> str:
        """Enrol a user."""
        return "enrolled"

    registry = CapabilityRegistry.from_tools([enrol])
    args = {"user": "ada", "password": ["hunter2", "s3cret-old"], "pin": 48213}
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        asyncio.run(Executor(registry, Policy.allow_all(), audit=audit).call("enrol", args, ALICE))
        row = audit.tail(1)[0]
        raw = (tmp_path / "audit.db").read_bytes() + (tmp_path / "audit.db-wal").read_bytes()
    assert row.args == {"user": "ada", "password": REDACTED, "pin": REDACTED}
    assert b"hunter2" not in raw and b"48213" not in raw


def _nested(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = {"inner": value}
    return value


@pytest.mark.parametrize("depth", [11, 12, 20])
def test_an_error_repeating_a_secret_nested_deep_is_stored_without_it(
    tmp_path: Path, depth: int
) -> None:
    """The walk that collects the values an error must not repeat stopped at the arguments'
    depth bound: past it (and for a secret's value at the bound) the arguments' column hid
    the password but the error column held it in clear."""
    secret = f"Tr0ub4dor-{depth}-horse"

    def connect(config: dict[str, Any]) -> str:
        """Connect with a nested configuration."""
        raise ValueError(f"authentication failed for {secret!r}")

    registry = CapabilityRegistry.from_tools([connect])
    config = _nested({"password": secret}, depth)
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        executor = Executor(registry, Policy.allow_all(), audit=audit)
        asyncio.run(executor.call("connect", {"config": config}, ALICE))
        [row] = audit.query()
    assert row.error is not None and row.error.startswith("ValueError: ")
    assert "Tr0ub4dor" not in row.error and "horse" not in row.error


def test_an_error_repeating_a_deep_value_under_a_secret_name_is_withheld() -> None:
    deep = _nested("Tr0ub4dor-horse", 14)
    error = Redactor().error("ValueError: bad Tr0ub4dor-horse", {"password": deep}, ())
    assert error == f"ValueError: {REDACTED} (the text may repeat a secret nested too deep)"


def _listed(depth: int) -> list[Any]:
    """``[[[...]]]`` ``depth`` levels deep, built without recursion."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _cut() -> list[Any]:
    """What is shown of a ``[[[...]]]`` deeper than the bound, under a top-level key."""
    cut: list[Any] = ["[...]"]
    for _ in range(11):
        cut = [cut]
    return cut


@pytest.mark.parametrize("depth", [300, 100_000])
def test_a_value_nested_past_the_serializer_depth_is_cut_not_raised(depth: int) -> None:
    """The whole value was made JSON before the walk that cuts it at its depth bound, and
    pydantic-core refuses more than ~255 levels: the redaction of an approval request, an
    audit row or a dashboard payload raised ``Maximum serialization depth exceeded``."""
    shown = Redactor().value({"password": "x", "data": _listed(depth)})
    assert shown == {"password": REDACTED, "data": _cut()}


def test_arguments_too_deep_to_encode_are_written_cut() -> None:
    text = Redactor().redacted_json({"data": _listed(100_000)})
    assert json.loads(text) == {"data": _cut()}


def test_an_error_repeating_a_secret_held_by_an_object_is_stored_without_it() -> None:
    # a Python caller may pass a dataclass or a model: its JSON form is what the column shows
    @dataclasses.dataclass
    class Login:
        user: str
        password: str

    args = {"login": Login("ann", "Tr0ub4dor-horse")}
    assert Redactor().value(args) == {"login": {"user": "ann", "password": REDACTED}}
    error = Redactor().error("ValueError: bad Tr0ub4dor-horse", args, ())
    assert error == f"ValueError: bad {REDACTED}"


def test_extra_patterns_are_redacted() -> None:
    redactor = Redactor({"employee_id": r"EMP-\d{6}"})
    assert redactor.text("ask EMP-123456 today") == f"ask {REDACTED} today"


BACKTRACKING_CALLS = r"""
import asyncio, json, sys
from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity, Policy

def note(text: str) -> str:
    "Keep a note."
    return "kept"

def check(text: str) -> str:
    "Check a ticket."
    raise ValueError(f"unknown ticket {text}")

policy = Policy.from_yaml(sys.argv[2])
with AuditLog(sys.argv[1], durability="sync") as audit:
    executor = Executor(CapabilityRegistry.from_tools([note, check]), policy, audit=audit)
    for tool in ("note", "check"):
        asyncio.run(executor.call(tool, {"text": sys.argv[3]}, Identity("bob", type="agent")))
    rows = [{"args": r.args, "error": r.error} for r in audit.query()]
print(json.dumps(rows))
"""


def _withheld_in_a_child(tmp_path: Path, policy: str, argument: str) -> None:
    """Both calls of :data:`BACKTRACKING_CALLS` under ``policy`` end within 30 s (the child is
    killed past them), their rows written with ``argument`` and the error withheld whole."""
    try:
        child = subprocess.run(
            [sys.executable, "-c", BACKTRACKING_CALLS, str(tmp_path / "a.db"), policy, argument],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the calls' redaction did not end within 30 s")
    assert child.returncode == 0, child.stderr
    rows = json.loads(child.stdout)
    assert [row["args"] for row in rows] == [{"text": REDACTED}] * 2
    assert rows[1]["error"] == REDACTED
    assert "aaaa" not in child.stdout


@pytest.mark.timeout(60)
def test_a_policy_pattern_that_backtracks_is_cut_off_and_the_text_withheld(
    tmp_path: Path,
) -> None:
    """A nested repeat in a policy's pattern backtracked exponentially on ``re``, holding the
    interpreter lock: a 31-character argument stalled the audit writer and every thread 6 s,
    twice as long per character more. The calls run in a child process, killed past 30 s."""
    policy = (
        "default_effect: allow\n"
        "redaction:\n"
        "  patterns: {ticket: 'TCK-(\\w+-?)+:', nested: 'TCK-(\\w|\\w\\w)+:'}\n"
    )
    argument = "TCK-" + "a" * 35 + "!"
    _withheld_in_a_child(tmp_path, policy, argument)


@pytest.mark.timeout(60)
def test_a_policys_patterns_share_one_deadline_a_text(tmp_path: Path) -> None:
    """Each of a policy's patterns had its own time bound: 1,000 copies of ``(a|aa)+$``, each
    finishing under it, held one call 14-28 s and wrote the argument down. All of them now
    share one deadline a text (a text they cannot finish on is withheld), and a policy holds
    at most 64. The calls run in a child process, killed past 30 s."""
    copies = "".join(f"    p{i}: '(a|aa)+$'\n" for i in range(MAX_PATTERNS))
    policy = f"default_effect: allow\nredaction:\n  patterns:\n{copies}"
    argument = "a" * 20 + "!"  # some ms a pattern: far under the bound, 64 of them past it
    _withheld_in_a_child(tmp_path, policy, argument)


def test_a_policy_holds_at_most_64_patterns() -> None:
    copies = "".join(f"    p{i}: 'TCK-[0-9]+'\n" for i in range(MAX_PATTERNS + 1))
    with pytest.raises(PolicyError, match="line 2: redaction.patterns holds more than 64"):
        Policy.from_yaml(f"default_effect: allow\nredaction:\n  patterns:\n{copies}")
    with pytest.raises(ValueError, match="more than 64"):
        Redactor(["TCK-[0-9]+"] * (MAX_PATTERNS + 1))
    assert len(Redactor(["TCK-[0-9]+"] * MAX_PATTERNS, disable=["all"]).patterns) == 64


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(?:a{10000}){1000}", "more than 10,000 items"),  # 10.9 s, 2.6 GB to compile
        ("((((a{100}){100}){100}){100})", "more than 10,000 items"),  # MemoryError past 5 GB
        ("[ab]{10000}" * 2, "more than 10,000 items"),
        ("(?:a{1000}){0,1000}", "more than 10,000 items"),
        ("(?x)(?:a{1000}){1 000}", "more than 10,000 items"),
        ("(?x)(?:a{1000}) {1000}", "more than 10,000 items"),
        ("(?:a{1000})(?#note){1000}", "more than 10,000 items"),
        ("(?:a{1000})(?i){1000}", "more than 10,000 items"),
        ("(?x)(?:a{1000})#(\n{1000}", "# comment in verbose mode"),
        ("(?:" * 60 + "a" + ")" * 60, "nests groups more than 50 deep"),
        ("a" * 1_001, "longer than 1,000 characters"),
    ],
    ids=[
        "nested",
        "deep",
        "sequence",
        "range",
        "verbose-count",
        "verbose-space",
        "comment",
        "flags",
        "verbose-comment",
        "nesting",
        "length",
    ],
)
def test_a_policy_pattern_regex_would_write_out_is_refused_before_compiling(
    pattern: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``regex`` writes counted repeats out when it compiles, outside any match timeout: an
    18-character pattern took 10.9 s and 2.6 GB to load (``re`` compiles it in 0.1 ms)."""
    import regex

    def compiled(*args: object, **kwargs: object) -> None:
        raise AssertionError("regex.compile was called")

    monkeypatch.setattr(regex, "compile", compiled)
    text = json.dumps(pattern)
    with pytest.raises(PolicyError, match=f"line 2: redaction pattern 'p' .*{why}"):
        Policy.from_yaml(f"default_effect: allow\nredaction:\n  patterns: {{p: {text}}}\n")
    with pytest.raises(ValueError, match=why):
        Redactor({"p": pattern})


@pytest.mark.parametrize(
    "pattern",
    [
        "(?:a{100}){100}",
        r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}",
        r"(?P<secret>[A-Za-z0-9]{40})",
        r"(?x) TCK - \d{4} \# [a-z]{2}",
        "[](?:a{1000}){1000}]",  # one class: the first ] is in it
    ],
)
def test_a_policy_pattern_of_bounded_size_loads(pattern: str) -> None:
    text = json.dumps(pattern)
    Policy.from_yaml(f"default_effect: allow\nredaction:\n  patterns: {{p: {text}}}\n")


def test_a_built_in_pattern_can_be_switched_off() -> None:
    redactor = Redactor(disable=["url_credentials"])
    assert redactor.text("postgres://u:pw@db/x") == "postgres://u:pw@db/x"
    assert redactor.text("password=x") == f"password={REDACTED}"


def test_all_value_patterns_can_be_switched_off_but_names_still_count() -> None:
    redactor = Redactor(disable=["all"])
    assert redactor.text("password=hunter2") == "password=hunter2"
    assert redactor.value({"password": "hunter2"}) == {"password": REDACTED}


def test_an_unknown_pattern_name_is_refused() -> None:
    with pytest.raises(ValueError, match="jwtt"):
        Redactor(disable=["jwtt"])
    assert "jwt" in BUILTIN_NAMES


def test_the_policy_redaction_section_configures_the_audit(tmp_path: Path) -> None:
    policy = Policy.from_yaml(
        "default_effect: allow\n"
        "redaction:\n"
        "  patterns: {ticket: 'TCK-[0-9]{4}'}\n"
        "  disable: [url_credentials]\n"
    )

    def note(text: str) -> str:
        """Keep a note."""
        return "kept"

    with AuditLog(tmp_path / "audit.db") as audit:
        executor = Executor(CapabilityRegistry.from_tools([note]), policy, audit=audit)
        asyncio.run(executor.call("note", {"text": "TCK-1234 at http://u:p@h"}, Identity("a")))
        row = audit.tail(1)[0]
    assert row.args["text"] == f"{REDACTED} at http://u:p@h"
    assert policy.redaction.span_arguments is False


def test_an_invalid_redaction_pattern_names_its_line() -> None:
    with pytest.raises(PolicyError, match="line 2.*invalid"):
        Policy.from_yaml("default_effect: allow\nredaction:\n  patterns: ['(unclosed']\n")


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "hostile",
    [
        "password" * 300,
        "password=" * 250,
        "a=" * 1200,
        "-----BEGIN PRIVATE KEY-----" + "A" * 5000,
        "://" + "a:" * 1500,
        "Bearer " * 400,
        "x" * 100_000,
    ],
    ids=["words", "pairs", "equals", "pem", "url", "bearer", "long"],
)
def test_hostile_text_is_redacted_in_bounded_time(hostile: str) -> None:
    for _ in range(20):
        out = redact_text(hostile)
    assert len(out) <= 2_100
