"""The approval store contract, run against every implementation (a new back-end adds itself
to ``STORES`` and must pass unchanged)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from toolcards.governance import Identity
from toolcards.governance.approvals.broker import ApprovalRequest, ApprovalState
from toolcards.stores.base import ApprovalStore
from toolcards.stores.governance import PENDING_PER_PRINCIPAL, TooManyApprovals
from toolcards.stores.memory import MemoryApprovalStore
from toolcards.stores.open import open_approvals
from toolcards.stores.sqlite.approvals import SqliteApprovalStore

NOW = 1_000.0
CAROL = Identity("carol", roles=["finance"])


def request(
    call_id: str = "c1", digest: str = "d1", principal: str = "carol", **kw: Any
) -> ApprovalRequest:
    fields: dict[str, Any] = {
        "call_id": call_id,
        "tool_id": "wire",
        "args_digest": digest,
        "principal": principal,
        "args": {"amount": 5},
        "reason": "needs a human",
        "expires_at": NOW + 60,
        "surface": "python",
        "identity": Identity(principal, roles=["finance"]),
        "created_at": NOW,
        **kw,
    }
    return ApprovalRequest(**fields)


STORES: dict[str, Callable[[Path], ApprovalStore]] = {
    "memory": lambda _dir: MemoryApprovalStore(),
    "sqlite": lambda tmp: SqliteApprovalStore(tmp / "approvals.db"),
}


@pytest.fixture(params=[*sorted(STORES), "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ApprovalStore]:
    if request.param == "postgres":
        from toolcards.stores.postgres.governance import PostgresApprovalStore

        made: ApprovalStore = PostgresApprovalStore(request.getfixturevalue("postgres_url"), "t")
    else:
        made = STORES[request.param](tmp_path)
    yield made
    close = getattr(made, "close", None)
    if close is not None:
        close()


def test_every_store_follows_the_protocol(store: ApprovalStore) -> None:
    assert isinstance(store, ApprovalStore)


def test_added_request_reads_back_equal_and_pending(store: ApprovalStore) -> None:
    req = request()
    store.add(req, NOW)
    record = store.get(req.approval_id)
    assert record is not None
    assert record.request == req and record.state is ApprovalState.PENDING


def test_a_second_request_for_the_same_call_gets_the_first_one_back(store: ApprovalStore) -> None:
    first = store.add(request(), NOW).request
    again = store.add(request(), NOW + 1).request
    assert again == first and again.approval_id == first.approval_id


def test_a_request_under_a_taken_call_id_never_replaces_the_pending_one(
    store: ApprovalStore,
) -> None:
    mine = store.add(request(digest="small"), NOW).request
    theirs = store.add(request(digest="large", principal="mallory"), NOW).request
    assert theirs.approval_id != mine.approval_id
    kept = store.get(mine.approval_id)
    assert kept is not None and kept.request.args_digest == "small"


def test_decide_moves_pending_once(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    decided = store.decide(req.approval_id, ApprovalState.GRANTED, "rita", NOW + 1)
    assert decided is not None and decided.state is ApprovalState.GRANTED
    assert decided.approver == "rita"
    assert store.decide(req.approval_id, ApprovalState.DENIED, "rita", NOW + 2) is None


def test_decide_refuses_an_expired_request(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    assert store.decide(req.approval_id, ApprovalState.GRANTED, "rita", NOW + 61) is None


def test_take_spends_a_granted_request_exactly_once(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    store.decide(req.approval_id, ApprovalState.GRANTED, "rita", NOW)
    taken = store.take(req.binding, approved=False, now=NOW + 1)
    assert taken is not None and taken.state is ApprovalState.GRANTED
    assert store.take(req.binding, approved=False, now=NOW + 2) is None


def test_take_keeps_a_pending_request_unless_approved(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    waiting = store.take(req.binding, approved=False, now=NOW)
    assert waiting is not None and waiting.state is ApprovalState.PENDING
    approved = store.take(req.binding, approved=True, now=NOW)
    assert approved is not None and approved.state is ApprovalState.GRANTED
    assert store.get(req.approval_id) is None


def test_take_finds_only_the_exact_binding(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    store.decide(req.approval_id, ApprovalState.GRANTED, "rita", NOW)
    for other in (
        ("c1", "wire", "other-digest", "carol"),
        ("c1", "wire", "d1", "mallory"),
        ("c1", "other_tool", "d1", "carol"),
        ("c2", "wire", "d1", "carol"),
    ):
        assert store.take(other, approved=True, now=NOW) is None
    assert store.get(req.approval_id) is not None


def test_take_forgets_an_expired_request(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    store.decide(req.approval_id, ApprovalState.GRANTED, "rita", NOW)
    assert store.take(req.binding, approved=False, now=NOW + 61) is None
    assert store.get(req.approval_id) is None


def test_a_denied_request_is_spent_by_take(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    store.decide(req.approval_id, ApprovalState.DENIED, "rita", NOW)
    taken = store.take(req.binding, approved=True, now=NOW)
    assert taken is not None and taken.state is ApprovalState.DENIED
    assert store.get(req.approval_id) is None


def test_pending_lists_unexpired_undecided_requests_oldest_first(store: ApprovalStore) -> None:
    late = store.add(request("c2", created_at=NOW + 5), NOW).request
    early = store.add(request("c1"), NOW).request
    decided = store.add(request("c3"), NOW).request
    store.decide(decided.approval_id, ApprovalState.GRANTED, "rita", NOW)
    store.add(request("c4", expires_at=NOW + 1), NOW)
    listed = [r.request.approval_id for r in store.pending(NOW + 2)]
    assert listed == [early.approval_id, late.approval_id]


def test_pending_ids_list_the_pending_ones_and_remove_nothing(store: ApprovalStore) -> None:
    """What a dashboard's watcher polls several times a second: the ids alone, in
    :meth:`pending`'s order, read without a write (before: every pending request whole,
    arguments decoded, after a DELETE of the expired ones, four times a second)."""
    late = store.add(request("c2", created_at=NOW + 5), NOW).request
    early = store.add(request("c1"), NOW).request
    decided = store.add(request("c3"), NOW).request
    store.decide(decided.approval_id, ApprovalState.GRANTED, "rita", NOW)
    expired = store.add(request("c4", expires_at=NOW + 1), NOW).request
    assert store.pending_ids(NOW + 2) == [early.approval_id, late.approval_id]
    assert store.get(expired.approval_id) is not None  # pending(), reading the inbox, prunes
    assert [r.request.approval_id for r in store.pending(NOW + 2)] == store.pending_ids(NOW + 2)


def test_a_listing_reads_the_oldest_requests_no_further_than_it_shows(
    store: ApprovalStore,
) -> None:
    """What an inbox lists: the oldest requests, each read only when its arguments fit what
    it shows, and how many wait (before: every request read whole, a hundred of 4 MiB a
    caller, on every render). Exact arguments left unread match no digest: deny only."""
    from toolcards.governance import ApprovalBroker

    exact = ['{"s":"short"}', '{"s":"' + "x" * 200 + '"}', '{"s":"third"}']
    for n, text in enumerate(exact):
        digest = hashlib.sha256(text.encode()).hexdigest()
        store.add(request(f"c{n}", digest, args_json=text, created_at=NOW + n), NOW)
    store.add(request("gone", expires_at=NOW + 1), NOW)
    listed, waiting = ApprovalBroker(store=store, clock=lambda: NOW + 2).listing(2, 100)
    assert waiting == 3 and [i.request.call_id for i in listed] == ["c0", "c1"]
    whole, unread = listed
    assert whole.request.args_json == exact[0] and whole.request.exact_recorded
    assert (whole.exact_unread, whole.redacted_unread) == (0, 0)
    assert unread.request.args_json == "" and not unread.request.exact_recorded
    assert unread.exact_unread == len(exact[1]) and unread.request.args == {"amount": 5}


def test_remove_forgets_a_request(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    assert store.remove(req.approval_id) is True
    assert store.remove(req.approval_id) is False
    assert store.get(req.approval_id) is None


@pytest.mark.parametrize("state", [ApprovalState.GRANTED, ApprovalState.DENIED])
def test_removing_only_a_pending_request_keeps_a_decided_one(
    store: ApprovalStore, state: ApprovalState
) -> None:
    """A caller giving up withdraws its request only while nobody decided it: a decision that
    landed meanwhile stays, for the caller to honour."""
    decided = store.add(request("c1"), NOW).request
    store.decide(decided.approval_id, state, "rita", NOW)
    waiting = store.add(request("c2"), NOW).request
    assert store.remove(decided.approval_id, only_pending=True) is False
    assert store.remove(waiting.approval_id, only_pending=True) is True
    kept = store.get(decided.approval_id)
    assert kept is not None and kept.state is state and store.get(waiting.approval_id) is None


def test_concurrent_takes_spend_a_grant_once(store: ApprovalStore) -> None:
    req = store.add(request(), NOW).request
    store.decide(req.approval_id, ApprovalState.GRANTED, "rita", NOW)
    wins: list[object] = []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        if store.take(req.binding, approved=False, now=NOW) is not None:
            wins.append(True)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert wins == [True]


def test_sqlite_store_is_shared_between_connections(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    writer, reader = SqliteApprovalStore(path), SqliteApprovalStore(path)
    try:
        req = writer.add(request(), NOW).request
        reader.decide(req.approval_id, ApprovalState.GRANTED, "rita", NOW)
        taken = writer.take(req.binding, approved=False, now=NOW)
    finally:
        writer.close()
        reader.close()
    assert taken is not None and taken.state is ApprovalState.GRANTED


def test_a_grant_revoked_through_another_name_of_the_file_moves_every_stamp(
    tmp_path: Path,
) -> None:
    """The stamp file that tells other processes to read the grants again was named from the
    path as written: a revoke through a symlink to the file moved only its own, and a server
    that opened the real path kept admitting calls under the revoked grant."""
    from toolcards.core.grants import Grant

    real, link = tmp_path / "approvals.db", tmp_path / "inbox.db"
    server = SqliteApprovalStore(real, "t")
    link.symlink_to(real)
    revoker = SqliteApprovalStore(link, "t")
    try:
        grant = Grant("alice", "send_note", {"to": "any"}, NOW + 3600, "ann", NOW)
        assert server.grants.add(grant, limit=100)
        seen = server.grants.stamp()
        assert revoker.grants.revoke(grant.grant_id, "ann", NOW) is not None
        assert server.grants.stamp() != seen
    finally:
        server.close()
        revoker.close()


def test_an_edit_recorded_with_a_grant_is_taken_with_it(store: ApprovalStore) -> None:
    req = request()
    store.add(req, NOW)
    store.decide(req.approval_id, ApprovalState.GRANTED, "rita", NOW, edited='{"amount":1}')
    taken = store.take(req.binding, approved=False, now=NOW + 1)
    assert taken is not None and taken.state is ApprovalState.GRANTED
    assert taken.edited_args == {"amount": 1}


# -- the pending requests one principal holds are bounded (invariant 6) -----------------------


def fill(store: ApprovalStore, principal: str = "carol", **kw: Any) -> list[ApprovalRequest]:
    """As many pending requests of ``principal`` as the store keeps for one."""
    return [
        store.add(request(f"{principal}-{i}", principal=principal, **kw), NOW).request
        for i in range(PENDING_PER_PRINCIPAL)
    ]


def test_a_principal_holds_at_most_the_bound_of_pending_requests(store: ApprovalStore) -> None:
    held = fill(store)
    with pytest.raises(TooManyApprovals, match="carol already has 100 requests waiting"):
        store.add(request("one-more"), NOW)
    assert store.add(held[0], NOW).request == held[0]  # asked again: the request it has
    assert store.add(request("dave-1", principal="dave"), NOW).request.principal == "dave"
    waiting = [r.request.call_id for r in store.pending(NOW) if r.request.principal == "carol"]
    assert len(waiting) == PENDING_PER_PRINCIPAL and "one-more" not in waiting


def test_a_decided_withdrawn_or_expired_request_frees_its_place(store: ApprovalStore) -> None:
    held = fill(store, expires_at=NOW + 60)
    store.decide(held[0].approval_id, ApprovalState.DENIED, "rita", NOW)
    store.add(request("after-decided"), NOW)
    store.remove(held[1].approval_id)
    store.add(request("after-withdrawn"), NOW)
    with pytest.raises(TooManyApprovals):
        store.add(request("one-more"), NOW)
    later = store.add(request("after-expired", expires_at=NOW + 200), NOW + 60).request
    assert later.call_id == "after-expired"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where stores of several teams and connections meet."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return ":memory:" if request.param == "memory" else str(tmp_path / "shared.db")


@contextmanager
def opened(database: str, team: str) -> Iterator[ApprovalStore]:
    store, close = open_approvals(database, team)
    try:
        yield store
    finally:
        if close is not None:
            close()


def test_the_bound_is_per_team(database: str) -> None:
    with opened(database, "a") as a, opened(database, "b") as b:
        fill(a)
        with pytest.raises(TooManyApprovals):
            a.add(request("one-more"), NOW)
        assert b.add(request("one-more"), NOW).request.call_id == "one-more"


def test_requests_made_together_never_pass_the_bound_together(database: str) -> None:
    """Two connections to one database (two processes of a team; one store in memory) add
    requests of one principal at once: exactly as many as fit are kept."""
    refused: list[TooManyApprovals] = []
    barrier = threading.Barrier(16)
    with opened(database, "a") as a, opened(database, "a") as other:
        second = a if database == ":memory:" else other
        for i in range(PENDING_PER_PRINCIPAL - 4):
            a.add(request(f"early-{i}"), NOW)

        def race(i: int) -> None:
            barrier.wait()
            try:
                (a if i % 2 else second).add(request(f"late-{i}"), NOW)
            except TooManyApprovals as exc:
                refused.append(exc)

        with ThreadPoolExecutor(16) as pool:  # one thread each: they meet at the barrier
            list(pool.map(race, range(16)))
        assert len(refused) == 12
        assert len(a.pending(NOW)) == PENDING_PER_PRINCIPAL
