"""RateLimiter: token buckets with a fake clock."""

from __future__ import annotations

import pytest

from toolcards.governance import RateLimiter
from toolcards.governance.policy.parse import Limit, PolicyError, compile_globs, parse_rate


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


def test_full_buckets_are_forgotten_when_there_are_too_many() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0], max_buckets=10)
    limits = _limit(5, 60.0)
    for i in range(10):
        limiter.acquire(limits, f"early{i}", "t")
    now[0] = 60.0
    limiter.acquire(limits, "late", "t")
    assert len(limiter._buckets) == 1
    for _ in range(4):
        assert limiter.acquire(limits, "late", "t") == 0.0
    assert limiter.acquire(limits, "late", "t") > 0


class _Period(float):
    """A period that counts the arithmetic done with it: how many buckets a limiter reads."""

    used = 0

    def __rmul__(self, other: float) -> float:
        _Period.used += 1
        return float(other) * float(self)

    def __rtruediv__(self, other: float) -> float:
        _Period.used += 1
        return float(other) / float(self)


def test_a_full_limiter_makes_a_new_caller_wait_without_reading_every_bucket() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0], max_buckets=1000)
    every = compile_globs(("*",))
    limits = (Limit(0, every, every, 2, _Period(60.0), "2/60s"),)
    for i in range(1000):  # each bucket is full again at 30 s
        assert limiter.acquire(limits, f"p{i}", "t") == 0.0
    now[0] = 10.0
    _Period.used = 0
    for i in range(1000):
        assert limiter.acquire(limits, f"late{i}", "t") == pytest.approx(20.0)
    assert _Period.used < 3000  # each bucket read once more than it was used, then one a caller
    assert len(limiter._buckets) == 1000  # never past its cap
    now[0] = 30.0
    assert limiter.acquire(limits, "late0", "t") == 0.0
    assert limiter.acquire(limits, "p0", "t") == 0.0  # forgotten full: starts full again


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
