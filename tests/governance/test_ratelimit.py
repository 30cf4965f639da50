"""RateLimiter: token buckets with a fake clock."""

from __future__ import annotations

import pytest

from toolcards.governance import RateLimiter
from toolcards.governance.policy.parse import Limit, PolicyError, compile_globs, parse_rate
from toolcards.stores import memory as ratelimit_module


def _limit(count: int, period: float) -> tuple[Limit, ...]:
    every = compile_globs(("*",))
    return (Limit(0, every, every, count, period, f"{count}/{period}s"),)


def test_bucket_refills_over_time_and_reports_the_wait() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    limits = _limit(2, 60.0)
    assert limiter.acquire(limits, "a", "t") == 0.0
    assert limiter.acquire(limits, "a", "t") == 0.0
    assert limiter.acquire(limits, "a", "t") == pytest.approx(30.0)
    now[0] = 30.0
    assert limiter.acquire(limits, "a", "t") == 0.0


def test_a_refused_call_takes_no_token() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    limits = _limit(1, 10.0)
    limiter.acquire(limits, "a", "t")
    for _ in range(5):
        assert limiter.acquire(limits, "a", "t") > 0
    now[0] = 10.0
    assert limiter.acquire(limits, "a", "t") == 0.0


def test_full_buckets_are_forgotten_when_there_are_too_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ratelimit_module, "_MAX_BUCKETS", 10)
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    limits = _limit(5, 60.0)
    for i in range(10):
        limiter.acquire(limits, f"early{i}", "t")
    now[0] = 60.0
    limiter.acquire(limits, "late", "t")
    assert len(limiter._buckets) == 1
    for _ in range(4):
        assert limiter.acquire(limits, "late", "t") == 0.0
    assert limiter.acquire(limits, "late", "t") > 0


@pytest.mark.parametrize(
    ("text", "count", "period"),
    [("30/min", 30, 60.0), ("5/s", 5, 1.0), ("100/hour", 100, 3600.0), ("10/5min", 10, 300.0)],
)
def test_rate_text_is_parsed(text: str, count: int, period: float) -> None:
    assert parse_rate(text, "here") == (count, period)


@pytest.mark.parametrize("text", ["0/min", "ten/min", "5/fortnight", "5"])
def test_bad_rate_text_is_an_error(text: str) -> None:
    with pytest.raises(PolicyError):
        parse_rate(text, "here")
