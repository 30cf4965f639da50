"""Reciprocal-rank fusion and the tolerant vector-store link."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from toolcards.runtime import HandleBase
from toolcards.tools._common.fusion import (
    KEYWORD_ONLY_NOTICE,
    REMOVE_BATCH,
    VectorLink,
    VectorSync,
    rrf_fuse,
    store_actor_name,
    text_hash,
)


def test_document_in_both_lists_beats_single_list_leaders() -> None:
    fused = rrf_fuse([[("a", 9.0), ("b", 5.0)], [("c", 0.9), ("b", 0.8)]])
    assert fused[0][0] == "b"


def test_weights_shift_the_ranking() -> None:
    fused = rrf_fuse([[("a", 1.0)], [("c", 1.0)]], weights=[1.0, 2.0])
    assert [doc for doc, _ in fused] == ["c", "a"]


def test_ties_keep_first_appearance_order() -> None:
    fused = rrf_fuse([[("x", 1.0)], [("y", 1.0)]])
    assert [doc for doc, _ in fused] == ["x", "y"]


def test_weight_count_must_match() -> None:
    with pytest.raises(ValueError):
        rrf_fuse([[("a", 1.0)]], weights=[1.0, 2.0])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "#VectorStore"),
        (False, None),
        ("Docs", "#Docs"),
        ("#Docs", "#Docs"),
        (" Docs ", "#Docs"),
    ],
)
def test_store_actor_name(value: bool | str, expected: str | None) -> None:
    assert store_actor_name(value) == expected


BAD_NAMES = ["", "#", "bad name!", "9lives", "a" * 65, "../etc"]


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_bad_store_name_gets_one_error_from_card_and_consumers(bad: str) -> None:
    from pydantic import ValidationError

    from toolcards.tools._common.fusion import BAD_STORE_NAME
    from toolcards.tools.vector_store.card import VectorStoreTool
    from toolcards.tools.vector_store.client import actor_name

    with pytest.raises(ValueError, match=re.escape(BAD_STORE_NAME)):
        store_actor_name(bad)
    with pytest.raises(ValueError, match=re.escape(BAD_STORE_NAME)):
        actor_name(bad)
    with pytest.raises(ValidationError, match=re.escape(BAD_STORE_NAME)):
        VectorStoreTool(provider="hash", name=bad)


@pytest.mark.parametrize("reserved", ["defer-docs", "#defer-TeamActivity-1", "Defer-x"])
def test_a_store_is_not_named_like_the_teams_short_lived_workers(reserved: str) -> None:
    # '#defer-...' actors skip the name lock, the config check and the roster: a store named
    # so collided with itself on its first bind (and with the summary cache's workers)
    from pydantic import ValidationError

    from toolcards.core.registry import load_cards
    from toolcards.tools.vector_store.card import VectorStoreTool

    with pytest.raises(ValueError, match="reserved"):
        store_actor_name(reserved)
    with pytest.raises(ValidationError, match="reserved"):
        VectorStoreTool(provider="hash", name=reserved)
    with pytest.raises(ValidationError, match="reserved"):
        load_cards([{"type": "VectorStoreTool", "name": reserved, "provider": "hash"}])


def test_card_and_consumer_name_the_same_actor() -> None:
    from toolcards.tools.vector_store.card import VectorStoreTool

    for name in ("Docs", "#Docs", "docs.v2-b_1"):
        assert VectorStoreTool(provider="hash", name=name).actor_name == store_actor_name(name)


def _resolved(hits: list[tuple[str, float]]) -> Future[list[tuple[str, float]]]:
    answer: Future[list[tuple[str, float]]] = Future()
    answer.set_result(hits)
    return answer


class FakeHandle(HandleBase[Any]):
    """A store handle answering typed asks in the caller's thread."""

    def __init__(self, available: bool = True, fail: bool = False) -> None:
        super().__init__("#Fake")
        self.available = available
        self.fail = fail
        self.told: list[tuple[Any, ...]] = []

    def _ask(self, method: str, args: tuple[Any, ...], kw: dict[str, Any], timeout: float) -> Any:
        if method == "available":
            return self.available
        if self.fail:
            raise RuntimeError("boom")
        return _resolved([("1", 0.9)])

    def _tell(self, method: str, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        self.told.append((method, *args))

    def is_alive(self) -> bool:
        return True


class FakeTeam:
    def __init__(self, handle: FakeHandle | None) -> None:
        self.handle = handle

    def actor(self, name: str) -> FakeHandle | None:
        return self.handle


def test_link_waits_for_a_pending_answer() -> None:
    class Pending(FakeHandle):
        def _ask(
            self, method: str, args: tuple[Any, ...], kw: dict[str, Any], timeout: float
        ) -> Any:
            if method == "available":
                return True
            answer: Future[list[tuple[str, float]]] = Future()
            threading.Timer(0.05, answer.set_result, ([("7", 0.5)],)).start()
            return answer

    assert VectorLink(FakeTeam(Pending()), "#V").query("c", "t", 3) == [("7", 0.5)]


def test_link_queries_an_available_store() -> None:
    link = VectorLink(FakeTeam(FakeHandle()), "#VectorStore")
    assert link.query("c", "text", 5) == [("1", 0.9)]
    assert link.notice() == ""


@pytest.mark.parametrize("handle", [None, FakeHandle(available=False), FakeHandle(fail=True)])
def test_link_degrades_and_says_so_once(handle: FakeHandle | None) -> None:
    link = VectorLink(FakeTeam(handle), "#VectorStore")
    assert link.query("c", "text", 5) is None
    assert link.notice() == KEYWORD_ONLY_NOTICE
    assert link.query("c", "text", 5) is None
    assert link.notice() == ""


class DictState:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.read = 0
        """Rows handed to readers."""

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)

    def items(self, prefix: str = "") -> list[tuple[str, Any]]:
        return list(self.iter_items(prefix))

    def iter_items(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        for key, value in sorted(self.data.items()):
            if key.startswith(prefix):
                self.read += 1
                yield key, value

    def count(self, prefix: str = "") -> int:
        return sum(key.startswith(prefix) for key in self.data)

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


def _sync(handle: FakeHandle, state: DictState) -> VectorSync:
    return VectorSync(VectorLink(FakeTeam(handle), "#V"), "kg", state, cap=100)


def test_sync_sends_every_document_at_start_then_only_changes() -> None:
    # a fingerprint said "sent", and the store kept what waited for its embedding in memory
    # only: what a stop cancelled (or an embedding failed on) was never sent again
    handle = FakeHandle()
    state = DictState()
    _sync(handle, state).load({"a": "alpha", "b": "beta"})
    again = _sync(handle, state)
    handle.told.clear()
    again.load({"a": "alpha", "b": "beta changed"})
    assert handle.told == [("upsert", "kg", [("a", "alpha"), ("b", "beta changed")])]
    assert state.data["vh:b"] == text_hash("beta changed")
    handle.told.clear()
    again.changed("a", "alpha")
    again.changed("b", "beta again")
    assert again.flush() == 1
    assert handle.told == [("upsert", "kg", [("b", "beta again")])]


def test_sync_keeps_queue_while_store_is_absent() -> None:
    team = FakeTeam(None)
    sync = VectorSync(VectorLink(team, "#V"), "kg", DictState(), cap=100)
    sync.changed("a", "alpha")
    assert sync.flush() == 0
    assert sync.pending == 1
    team.handle = FakeHandle()
    assert sync.flush() == 1


def test_sync_sends_removals_of_documents_gone_while_away() -> None:
    handle = FakeHandle()
    state = DictState()
    _sync(handle, state).load({"a": "x"})
    second = _sync(handle, state)
    handle.told.clear()
    second.load({})
    assert handle.told == [("remove", "kg", ["a"])]
    assert state.items("vh:") == []


def test_sync_skips_fingerprint_rows_that_are_no_fingerprint() -> None:
    # a planted deep or wrong-typed row stopped the actor at every start
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    state = DictState()
    state.put("vh:a", deep)
    state.put("vh:b", {"h": 1})
    state.put("vh:c", text_hash("gamma"))
    handle = FakeHandle()
    _sync(handle, state).load({"a": "alpha", "b": "beta"})
    assert handle.told == [
        ("remove", "kg", ["c"]),
        ("upsert", "kg", [("a", "alpha"), ("b", "beta")]),
    ]
    assert state.data["vh:a"] == text_hash("alpha")


def test_sync_starts_from_no_fingerprints_when_their_rows_do_not_decode() -> None:
    class Undecodable(DictState):
        def iter_items(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
            raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")

    handle = FakeHandle()
    _sync(handle, Undecodable()).load({"a": "alpha"})
    assert handle.told == [("upsert", "kg", [("a", "alpha")])]


def test_sync_reads_at_most_its_cap_of_fingerprint_rows_and_removes_them_in_chunks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a million rows planted under vh: were all read at every start of the graph (13-18 s,
    # +440 MiB) and the store was sent one removal naming all of them
    state = DictState()
    for i in range(5000):
        state.put(f"vh:planted{i:05d}", text_hash(str(i)))
    handle = FakeHandle()
    with caplog.at_level(logging.WARNING):
        sync = VectorSync(VectorLink(FakeTeam(handle), "#V"), "kg", state, cap=2500)
    assert state.read <= 2501
    assert "2500 vector fingerprint rows past the cap of 2500 were not read" in caplog.text
    sync.load({"a": "alpha"})
    removals = [told[2] for told in handle.told if told[0] == "remove"]
    assert max(len(ids) for ids in removals) <= REMOVE_BATCH
    assert [i for ids in removals for i in ids] == [f"planted{i:05d}" for i in range(2500)]
    assert state.count("vh:planted") == 2500  # the next start reads and removes the rest
