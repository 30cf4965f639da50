from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from runtime.conftest import TeamMaker
from toolcards.runtime import (
    DeferredConfig,
    DeferredResultActor,
    DeferredWorker,
    fetch_deferred,
    poll_deferred,
)


class Gate:
    """Shared by a test and its workers: counts productions, holds them until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self.timeouts: list[float] = []
        self.lock = threading.Lock()


class UpperWorker(DeferredWorker[str, str]):
    gate: ClassVar[Gate] = Gate()

    def produce(self, payload: Any, timeout: float) -> str:
        gate = self.gate
        with gate.lock:
            gate.calls += 1
            gate.timeouts.append(timeout)
        if not gate.release.wait(timeout):
            raise TimeoutError("client timed out")
        if payload == "bad":
            raise ConnectionError("upstream refused")
        return str(payload).upper()


class UpperCache(DeferredResultActor[str, str]):
    worker = UpperWorker
    now: ClassVar[float] = 1000.0

    def clock(self) -> float:
        return UpperCache.now


@pytest.fixture
def gate() -> Iterator[Gate]:
    UpperWorker.gate = Gate()
    UpperCache.now = 1000.0
    yield UpperWorker.gate
    UpperWorker.gate.release.set()


def test_three_callers_of_one_key_share_one_worker(gate: Gate, make_local_team: TeamMaker) -> None:
    with make_local_team("defer-dedupe") as team:
        cache = team.tool_actor("#Upper", UpperCache, DeferredConfig(worker_timeout=5))
        results: list[Any] = []
        started = threading.Barrier(4)

        def caller() -> None:
            started.wait()
            results.append(fetch_deferred(cache, "k", "hello", attempts=1000, delay=0.02))

        threads = [threading.Thread(target=caller) for _ in range(3)]
        for t in threads:
            t.start()
        started.wait()
        while cache.ask(UpperCache.status, "k") != "pending":
            pass
        for _ in range(3):
            cache.ask(UpperCache.request, "k", "hello")
        gate.release.set()
        for t in threads:
            t.join()
        assert results == ["HELLO", "HELLO", "HELLO"]
        assert gate.calls == 1
        assert cache.ask(UpperCache.stats)["spawned"] == 1


def test_worker_timeout_is_handed_to_the_client(gate: Gate, make_local_team: TeamMaker) -> None:
    gate.release.set()
    with make_local_team("defer-timeout") as team:
        cache = team.tool_actor("#Upper", UpperCache, DeferredConfig(worker_timeout=3.5))
        assert fetch_deferred(cache, "k", "x", attempts=1000, delay=0.02) == "X"
        assert gate.timeouts == [3.5]


def test_failures_are_cached_until_their_ttl_passes(gate: Gate, make_local_team: TeamMaker) -> None:
    gate.release.set()
    with make_local_team("defer-negative") as team:
        config = DeferredConfig(negative_ttl=30)
        cache = team.tool_actor("#Upper", UpperCache, config)
        assert fetch_deferred(cache, "k", "bad", attempts=1000, delay=0.02, default="-") == "-"
        assert cache.ask(UpperCache.status, "k") == "failed"
        assert "upstream refused" in cache.ask(UpperCache.error, "k")
        assert cache.ask(UpperCache.request, "k", "bad") == "failed"
        assert fetch_deferred(cache, "k", "bad", attempts=3, delay=0.01, default="-") == "-"
        assert gate.calls == 1
        UpperCache.now += 31
        assert cache.ask(UpperCache.request, "k", "good") == "pending"
        assert (
            poll_deferred(lambda: cache.ask(UpperCache.poll, "k"), attempts=1000, delay=0.02)
            == "GOOD"
        )
        assert gate.calls == 2


def test_cache_is_capped_least_recently_used_first(gate: Gate, make_local_team: TeamMaker) -> None:
    gate.release.set()
    with make_local_team("defer-lru") as team:
        cache = team.tool_actor("#Upper", UpperCache, DeferredConfig(max_entries=2))
        for key in ("a", "b"):
            assert fetch_deferred(cache, key, key, attempts=1000, delay=0.02) == key.upper()
        assert cache.ask(UpperCache.get, "a") == "A"  # a is now the most recent
        assert fetch_deferred(cache, "c", "c", attempts=1000, delay=0.02) == "C"
        assert cache.ask(UpperCache.get, "b") is None
        assert cache.ask(UpperCache.get, "a") == "A"
        assert cache.ask(UpperCache.stats)["values"] == 2


def test_workers_are_short_lived_defer_actors(gate: Gate, make_local_team: TeamMaker) -> None:
    with make_local_team("defer-names") as team:
        cache = team.tool_actor("#Upper", UpperCache)
        cache.ask(UpperCache.request, "k", "v")
        workers = [n for n in team.actor_names() if n.startswith("#defer-")]
        assert len(workers) == 1
        gate.release.set()
        assert (
            poll_deferred(lambda: cache.ask(UpperCache.get, "k"), attempts=1000, delay=0.02) == "V"
        )
        assert poll_deferred(
            lambda: None if team.actor(workers[0]) else "gone", attempts=1000, delay=0.02
        )


def test_poll_deferred_returns_the_degraded_answer_when_the_budget_runs_out() -> None:
    calls = []

    def fetch() -> str | None:
        calls.append(1)
        return None

    assert poll_deferred(fetch, attempts=3, delay=0, default="degraded") == "degraded"
    assert len(calls) == 3


def test_poll_deferred_treats_a_timed_out_fetch_as_not_ready() -> None:
    answers: list[Any] = [TimeoutError("slow"), None, "ok"]

    def fetch() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert poll_deferred(fetch, attempts=5, delay=0) == "ok"


class PlainWorker(DeferredWorker[str, str]):
    def produce(self, payload: Any, timeout: float) -> str:
        return f"{str(payload).upper()} from {os.getpid()}"


class PlainCache(DeferredResultActor[str, str]):
    worker = PlainWorker


def test_a_deferred_result_is_produced_off_the_cache_on_every_backend(
    make_team: TeamMaker,
) -> None:
    with make_team("defer-any") as team:
        cache = team.tool_actor("#Plain", PlainCache, DeferredConfig(worker_timeout=10))
        value = fetch_deferred(cache, "k", "hello", attempts=500, delay=0.05, timeout=10)
        assert isinstance(value, str) and value.startswith("HELLO from ")
        where = int(value.rsplit(" ", 1)[1])
        assert (where != os.getpid()) == make_team.distributed  # on Ray: in the cache's worker
        assert cache.ask(PlainCache.stats)["spawned"] == 1
