"""The fire rules as pure functions (no team)."""

from __future__ import annotations

import pytest

from toolcards.core.errors import RetriableError
from toolcards.runtime.messaging import member_name
from toolcards.tools.team.guards import Outcome, fire_refusal, is_protected, report, role_name

ROSTER = {"@lead-1", "@worker-1", "@boss-1", "@alice"}


def check(name: object, caller: str = "@lead-1", protected: list[str] | None = None) -> object:
    return fire_refusal(name, caller, protected or [], ROSTER.__contains__)


def test_a_member_on_the_roster_may_be_fired() -> None:
    assert check("@worker-1") == ("@worker-1", None)


def test_a_bare_name_finds_the_member() -> None:
    assert check("alice") == ("@alice", None)


@pytest.mark.parametrize("name", ["@lead-1", "lead-1"])
def test_the_caller_cannot_fire_itself(name: str) -> None:
    assert check(name) == (None, "refused: you cannot fire yourself")


def test_a_tool_actor_is_never_a_member() -> None:
    member, reason = check("#NotificationTool")
    assert member is None and reason is not None and "tool actors" in reason


@pytest.mark.parametrize("glob", ["@boss-*", "boss-*", "*-1"])
def test_protected_globs_match_with_or_without_the_at(glob: str) -> None:
    member, reason = check("@boss-1", protected=[glob])
    assert member is None and reason == "refused: this member is protected"


def test_protection_holds_for_names_not_on_the_roster() -> None:
    assert is_protected("@boss-9", ["@boss-*"])


def test_an_unknown_name_is_reported_not_fired() -> None:
    member, reason = check("@ghost-1")
    assert member is None and reason is not None and reason.startswith("not fired")


@pytest.mark.parametrize("name", ["", "   ", None, 42, ["@worker-1"]])
def test_malformed_names_are_refused(name: object) -> None:
    member, reason = check(name)
    assert member is None and reason is not None and "is not a member name" in reason


@pytest.mark.parametrize("name", [" @boss-1\n", "boss-1\u3000", "@boss-1\u200b", " @lead-1 "])
def test_names_with_blank_or_hidden_characters_are_refused_not_cleaned(name: str) -> None:
    """A policy deny on ``@boss-1`` was passed by ``" @boss-1\\n"``, which the tool stripped."""
    member, reason = check(name)
    assert (
        member is None and reason == f"refused: {name!r} is not a member name such as @researcher-1"
    )


def test_a_bare_name_is_the_rosters_at_name_before_any_lookup() -> None:
    assert member_name("boss-1") == "@boss-1" and member_name("@boss-1") == "@boss-1"


@pytest.mark.parametrize("role", [" boss\u2003", "boss ", "bo\u200bss", "", 3])
def test_roles_are_taken_exactly_or_refused(role: object) -> None:
    with pytest.raises(RetriableError, match="is not a role name"):
        role_name(role)
    assert role_name("boss") == "boss"


def test_report_counts_successes_in_request_order() -> None:
    text = report(
        "fired", [Outcome("@a", True, "fired"), Outcome("@b", False, "refused: protected")]
    )
    assert text == "fired 1 of 2:\n- @a: fired\n- @b: refused: protected"
