"""Secret shapes a secret scanner catches must never reach the audit file: each is sent as the
argument of a real governed call and looked for in the bytes of the real SQLite audit file.
Ordinary text next to them stays readable, and the patterns stay linear in their input."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity, Policy
from toolcards.governance.redaction.redactor import BUILTIN_PATTERNS, REDACTED, redact, redact_text

# (arguments of one call, the secret in them): every secret starts with "Hx7" so that a part
# of it left behind is found too
SHAPES: list[tuple[dict[str, Any], str]] = [
    ({"text": '{"password": "Hx7jsonpw"}'}, "Hx7jsonpw"),
    ({"text": 'body={\\"password\\": \\"Hx7escaped pw\\"}'}, "Hx7escaped"),
    ({"text": "login?user=bob&password%3DHx7percent"}, "Hx7percent"),
    ({"text": "q=%7B%22api_key%22%3A%22Hx7pctjson%22%7D"}, "Hx7pctjson"),
    ({"text": "password%253DHx7twice"}, "Hx7twice"),
    ({"text": "ｐａｓｓｗｏｒｄ＝Hx7fullwidth"}, "Hx7fullwidth"),
    ({"text": "pass\u200bword=Hx7zerowidth"}, "Hx7zerowidth"),
    ({"text": "export DB_PASS=Hx7exported"}, "Hx7exported"),
    ({"text": "export STRIPE_KEY=Hx7envkey"}, "Hx7envkey"),
    ({"text": "pwd=Hx7pwd"}, "Hx7pwd"),
    ({"text": "Server=db;Uid=app;Pwd=Hx7odbc;"}, "Hx7odbc"),
    ({"text": "db:\n  password:\n    Hx7yamlnext\n  host: x"}, "Hx7yamlnext"),
    ({"text": "password: |\n  Hx7yamlblock\n"}, "Hx7yamlblock"),
    ({"text": "mysql -u root -pHx7mysql -h db app"}, "Hx7mysql"),
    ({"text": "curl -u admin:Hx7curl https://api.example.com"}, "Hx7curl"),
    ({"text": "sshpass -p Hx7sshpass ssh deploy@host"}, "Hx7sshpass"),
    ({"text": "docker login -u bob -p Hx7docker registry.example.com"}, "Hx7docker"),
    ({"text": "redis://:Hx7redispw@cache:6379/0"}, "Hx7redispw"),
    ({"text": "https://bob:Hx7url@db.example.com/x"}, "Hx7url"),
    ({"text": "the password is Hx7phrase, keep it"}, "Hx7phrase"),
    ({"text": "my passphrase is 'Hx7 horse battery'"}, "Hx7 horse"),
    ({"text": "use bearer Hx7bearertokenvalue"}, "Hx7bearertokenvalue"),
    ({"text": "auth=Hx7auth"}, "Hx7auth"),
    ({"text": 'api_key := "Hx7gostyle"'}, "Hx7gostyle"),
    ({"text": '"access_token" :\n   "Hx7pretty"'}, "Hx7pretty"),
    ({"text": "<password>Hx7xml</password>"}, "Hx7xml"),
    ({"text": "machine api.example.com login bob password Hx7netrc"}, "Hx7netrc"),
    ({"text": "run --client-secret Hx7flag now"}, "Hx7flag"),
    ({"text": 'password="Hx7unclosed'}, "Hx7unclosed"),
    ({"headers": {"ghp_Hx7abcdefghijklmnopqrstuvwxyz0123": "x"}}, "Hx7abcdefghij"),
    ({"seen": {"sk-Hx7abcdefghijklmnopqrstuv": True}}, "Hx7abcdefghijk"),
    ({"keys": {"AKIAHX7IOSFODNN7EXAM": 1}}, "HX7IOSFODNN7"),
    ({"hooks": {"xoxb-1234567890-Hx7abcdefghijklmn": "on"}}, "Hx7abcdefghijklmn"),
    ({"by_jwt": {"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJIeDcifQ.Hx7signaturepart": 1}}, "Hx7signature"),
    ({"m": {"wJalrXUtnHx7EMI/K7MDENG/bPxRfiCYzq9": 1}}, "wJalrXUtnHx7"),
    ({"m": {"password=Hx7inkey": 1}}, "Hx7inkey"),
    ({"ｐａｓｓｗｏｒｄ": "Hx7widename"}, "Hx7widename"),
    ({"db_pass": "Hx7byname"}, "Hx7byname"),
    ({"X-Auth": "Hx7authname"}, "Hx7authname"),
]
# texts that hold no secret and come back unchanged
ORDINARY = [
    "passport number requested at the desk",
    "the password policy requires 12 characters",
    "See the password policy docs: docs/security.md",
    "compass=north bypass: true",
    "author: Jane Doe",
    "max_tokens=100 token_count: 42",
    "sort_key=name primary_key: id",
    "def check(password: str) -> bool:\n    return len(password) > 12\n",
    "git log -p --stat",
    "mysql -u root -p app",
    "https://example.com/a?b=c&d=e%20f",
    "user@example.com wrote ssh://git@github.com/org/repo.git",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "your password is required",
]


def _audited(tmp_path: Path, args: dict[str, Any], tool: str = "note") -> bytes:
    """The bytes of a real audit file after one governed call with ``args``."""

    def note(text: str = "") -> str:
        """Keep a note."""
        return "kept"

    db = tmp_path / "audit.db"
    with AuditLog(db) as audit:
        executor = Executor(CapabilityRegistry.from_tools([note]), Policy.allow_all(), audit=audit)
        asyncio.run(executor.call(tool, args, Identity("alice")))
        audit.flush()
        files = [db, *db.parent.glob("audit.db-*")]
        return b"".join(p.read_bytes() for p in files if p.exists())


@pytest.mark.parametrize(("args", "secret"), SHAPES, ids=[s for _, s in SHAPES])
def test_no_secret_shape_reaches_the_audit_file(
    tmp_path: Path, args: dict[str, Any], secret: str
) -> None:
    raw = _audited(tmp_path, args)
    assert secret.encode() not in raw
    assert secret.encode("utf-16-le") not in raw


def test_the_corpus_holds_at_least_twenty_four_shapes() -> None:
    assert len(SHAPES) >= 24


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_not_redacted(text: str) -> None:
    assert redact_text(text) == text


def test_a_redacted_key_keeps_the_value_and_the_other_keys() -> None:
    out = redact({"ghp_abcdefghijklmnopqrstuvwxyz0123": 1, "sk-abcdefghijklmnopqrstu": 2, "n": 3})
    assert sorted(out.values()) == [1, 2, 3]
    assert out["n"] == 3 and all(k == "n" or k.startswith(REDACTED) for k in out)


def test_a_secret_shaped_unknown_tool_name_is_redacted_in_the_audit_row(tmp_path: Path) -> None:
    raw = _audited(tmp_path, {}, tool="ghp_Hx7abcdefghijklmnopqrstuvwxyz0123")
    assert b"Hx7abcdefghij" not in raw


@pytest.mark.timeout(30)
def test_a_one_mebibyte_argument_is_redacted_and_cut(tmp_path: Path) -> None:
    text = ("password=Hx7big " + "pass: " * 40 + "a" * 4000) * 40
    text = text + "x" * (1 << 20)
    raw = _audited(tmp_path, {"text": text})
    assert b"Hx7big" not in raw
    assert len(raw) < 1 << 20


def _unbounded_inside_repeat(parsed: Any, inside: bool) -> bool:
    """Whether a repeat with an unbounded maximum sits inside another repeat of more than one
    (the shape of catastrophic backtracking: ``(a+)+``)."""
    from re import _constants as c
    from re import _parser as p

    for op, av in parsed:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            _low, high, sub = av
            if inside and high == c.MAXREPEAT:
                return True
            if _unbounded_inside_repeat(sub, inside or high > 1):
                return True
        elif op is c.SUBPATTERN:
            if _unbounded_inside_repeat(av[-1], inside):
                return True
        elif op is c.BRANCH:
            if any(_unbounded_inside_repeat(b, inside) for b in av[1]):
                return True
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if _unbounded_inside_repeat(av[1], inside):
                return True
        elif isinstance(av, p.SubPattern) and _unbounded_inside_repeat(av, inside):
            return True
    return False


@pytest.mark.parametrize("pattern", BUILTIN_PATTERNS, ids=[p.name for p in BUILTIN_PATTERNS])
def test_no_built_in_pattern_nests_an_unbounded_repeat(pattern: Any) -> None:
    from re import _parser

    parsed = _parser.parse(pattern.regex.pattern)
    assert not _unbounded_inside_repeat(parsed, False)
