"""Identity: frozen, hashable, anonymous."""

from __future__ import annotations

import dataclasses

import pytest

from toolcards.governance import Identity


def test_identity_is_frozen_and_hashable() -> None:
    alice = Identity("alice", roles=["b", "a"], attrs={"team": "x"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        alice.id = "mallory"  # type: ignore[misc]
    assert {alice: 1}[Identity("alice", roles=("a", "b"), attrs={"team": "x"})] == 1
    assert alice.roles == frozenset({"a", "b"})


def test_attrs_are_a_read_only_copy() -> None:
    attrs = {"team": "x"}
    alice = Identity("alice", attrs=attrs)
    attrs["team"] = "y"
    assert alice.attrs["team"] == "x"
    with pytest.raises(TypeError):
        alice.attrs["team"] = "z"  # type: ignore[index]


def test_attrs_take_part_in_equality() -> None:
    assert Identity("a", attrs={"t": 1}) != Identity("a", attrs={"t": 2})


def test_anonymous_identity() -> None:
    anon = Identity.anonymous()
    assert anon.is_anonymous and anon.type == "anonymous" and not anon.roles


def test_empty_id_is_rejected() -> None:
    with pytest.raises(ValueError):
        Identity("")


def test_single_role_string_is_one_role() -> None:
    assert Identity("a", roles="admin").roles == frozenset({"admin"})
