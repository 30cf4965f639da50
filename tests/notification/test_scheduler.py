"""The heap timer and the delivery thread behind ``#NotificationTool``."""

from __future__ import annotations

import threading

from toolcards.tools.notification.scheduler import Courier, DueScheduler


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _never(ids: list[int]) -> None:
    raise AssertionError(f"unexpected wake for {ids}")


def test_pop_due_returns_only_due_keys_earliest_first() -> None:
    sched = DueScheduler(_never)
    sched.push(30.0, 3)
    sched.push(10.0, 1)
    sched.push(20.0, 2)
    assert sched.pop_due(25.0) == [1, 2]
    assert len(sched) == 1


def test_discarded_key_is_never_popped() -> None:
    sched = DueScheduler(_never)
    sched.push(10.0, 1)
    sched.push(11.0, 2)
    sched.discard(1)
    assert sched.pop_due(100.0) == [2]


def test_push_of_a_known_key_reschedules_it() -> None:
    sched = DueScheduler(_never)
    sched.push(10.0, 1)
    sched.push(50.0, 1)
    assert sched.pop_due(20.0) == []
    assert sched.next_due() == 50.0
    assert sched.pop_due(50.0) == [1]


def test_many_reschedules_keep_the_heap_bounded() -> None:
    sched = DueScheduler(_never)
    for i in range(1000):
        sched.push(float(i), 7)
    assert len(sched._heap) <= 2 * len(sched) + 65
    assert sched.pop_due(10_000.0) == [7]


def test_thread_wakes_for_an_entry_once_the_clock_passes_it() -> None:
    clock = FakeClock()
    fired: list[list[int]] = []
    done = threading.Event()

    def on_due(ids: list[int]) -> None:
        fired.append(ids)
        done.set()

    sched = DueScheduler(on_due, clock=clock)
    sched.push(clock.now + 3600, 5)
    sched.start()
    try:
        assert not done.wait(0.2)  # an hour away: the thread sleeps
        clock.now += 3600
        sched.kick()
        assert done.wait(5.0)
    finally:
        assert sched.stop(timeout=2.0)
    assert fired == [[5]]


def test_thread_fires_overdue_entries_right_after_start() -> None:
    clock = FakeClock()
    done = threading.Event()
    seen: list[int] = []

    def on_due(ids: list[int]) -> None:
        seen.extend(ids)
        done.set()

    sched = DueScheduler(on_due, clock=clock)
    sched.push(clock.now - 50, 1)  # became due while nothing was running
    sched.start()
    try:
        assert done.wait(5.0)
    finally:
        sched.stop()
    assert seen == [1]


def test_a_failing_callback_does_not_end_the_timer() -> None:
    clock = FakeClock()
    calls: list[list[int]] = []
    second = threading.Event()

    def on_due(ids: list[int]) -> None:
        calls.append(ids)
        if len(calls) == 1:
            raise RuntimeError("boom")
        second.set()

    sched = DueScheduler(on_due, clock=clock)
    sched.push(clock.now - 1, 1)
    sched.start()
    try:
        sched.push(clock.now - 1, 2)
        assert second.wait(5.0)
    finally:
        sched.stop()
    assert [k for ids in calls for k in ids] == [1, 2]


def test_courier_runs_calls_in_order_past_a_failure() -> None:
    courier = Courier()
    seen: list[int] = []
    courier.start()

    def boom() -> None:
        raise RuntimeError("recipient gone")

    courier.submit(lambda: seen.append(1))
    courier.submit(boom)
    courier.submit(lambda: seen.append(2))
    assert courier.stop(timeout=5.0)
    assert seen == [1, 2]


def test_courier_runs_on_its_own_thread() -> None:
    courier = Courier()
    threads: list[threading.Thread] = []
    courier.start()
    courier.submit(lambda: threads.append(threading.current_thread()))
    courier.stop(timeout=5.0)
    assert threads and threads[0] is not threading.current_thread()
