from __future__ import annotations

from toolcards.core import ContextState, ContextUpdater


def test_first_block_is_full_then_only_deltas_then_nothing() -> None:
    roster = {"a": "alice (planner)"}

    def provider() -> ContextState:
        return ContextState(
            key="team", title="Team", items=dict(roster), added_label="joined", removed_label="left"
        )

    updater = ContextUpdater([provider])
    first = updater.next_block()
    assert first is not None and first.startswith("Context update 1")
    assert "- alice (planner)" in first
    assert updater.next_block() is None
    roster["b"] = "bob (coder)"
    del roster["a"]
    second = updater.next_block()
    assert second is not None and second.startswith("Context update 2")
    assert "+ joined: bob (coder)" in second and "- left: alice (planner)" in second
    assert "Context update" not in (updater.next_block() or "")


def test_changed_item_is_reported_as_changed() -> None:
    old = ContextState(key="k", title="T", items={"1": "task 1: pending"})
    new = ContextState(key="k", title="T", items={"1": "task 1: done"})
    assert new.render_delta(old) == "## T\n~ changed: task 1: done"
    assert new.render_delta(new) is None


def test_state_that_disappears_is_reported_gone() -> None:
    states = [ContextState(key="k", title="Plan", items={})]
    updater = ContextUpdater([lambda: states[0]] if states else [])
    assert updater.next_block() is not None
    updater._providers = []
    block = updater.next_block()
    assert block is not None and "## Plan\n(gone)" in block
