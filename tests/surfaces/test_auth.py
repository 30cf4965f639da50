"""Bearer tokens: hashed storage, constant-time comparison, anonymous without a header."""

from __future__ import annotations

import hmac

import pytest

from toolcards.governance import Identity
from toolcards.surfaces.config import hash_token
from toolcards.surfaces.http import tokens
from toolcards.surfaces.http.tokens import InvalidToken, TokenTable

ALICE = Identity("alice", "user", ["admin"])
BOT = Identity("bot", "agent")
TABLE = TokenTable.from_digests([(hash_token("tok-a"), ALICE), (hash_token("tok-b"), BOT)])


def test_a_matching_token_resolves_to_its_identity() -> None:
    assert TABLE.from_header("Bearer tok-b") == BOT


def test_scheme_is_case_insensitive() -> None:
    assert TABLE.from_header("bearer tok-a") == ALICE


def test_no_header_is_anonymous() -> None:
    assert TABLE.from_header(None).is_anonymous


def test_a_wrong_token_is_refused() -> None:
    with pytest.raises(InvalidToken):
        TABLE.from_header("Bearer tok-c")


def test_a_token_prefix_is_refused() -> None:
    with pytest.raises(InvalidToken):
        TABLE.from_header("Bearer tok-")


def test_the_digest_itself_is_not_a_token() -> None:
    with pytest.raises(InvalidToken):
        TABLE.from_header(f"Bearer {hash_token('tok-a')}")


def test_every_entry_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(tokens.hmac, "compare_digest", counting)
    assert TABLE.resolve("tok-a") == ALICE  # the first entry matches; the second is compared too
    assert len(calls) == 2


def test_tokens_are_kept_only_as_digests() -> None:
    table = TokenTable.from_tokens([("plain-secret", ALICE)])
    assert all(b"plain-secret" not in digest for digest, _ in table.entries)
    assert table.resolve("plain-secret") == ALICE


def test_non_ascii_token_is_refused_not_crashing() -> None:
    with pytest.raises(InvalidToken):
        TABLE.from_header("Bearer t\udcff")
