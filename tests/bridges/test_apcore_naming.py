from __future__ import annotations

import re

from toolcards.bridges.apcore import assign_names
from toolcards.bridges.apcore.naming import MAX_TOOL_NAME, is_safe_name

SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_dotted_ids_become_underscored() -> None:
    assert assign_names(["executor.crm.read"]) == {"executor.crm.read": "executor_crm_read"}


def test_already_safe_ids_keep_their_name() -> None:
    assert assign_names(["crm_read", "crm-write"]) == {
        "crm_read": "crm_read",
        "crm-write": "crm-write",
    }


def test_safe_id_wins_a_collision_and_the_other_gets_a_hash_suffix() -> None:
    names = assign_names(["crm.read", "crm_read"])
    assert names["crm_read"] == "crm_read"
    assert names["crm.read"].startswith("crm_read_")
    assert names["crm.read"] != "crm_read"


def test_collision_handling_does_not_depend_on_order() -> None:
    ids = ["a.b.c", "a_b.c", "a.b_c", "a_b_c"]
    assert assign_names(ids) == assign_names(list(reversed(ids)))
    assert len(set(assign_names(ids).values())) == len(ids)


def test_long_ids_are_cut_to_64_characters_and_stay_distinct() -> None:
    first = "pkg." + "x" * 80 + ".one"
    second = "pkg." + "x" * 80 + ".two"
    names = assign_names([first, second])
    assert all(len(name) <= MAX_TOOL_NAME and SAFE.match(name) for name in names.values())
    assert names[first] != names[second]


def test_every_translated_name_is_provider_safe() -> None:
    names = assign_names(["ünï.cödé", "a/b", "sp ace", "x" * 70])
    assert all(is_safe_name(name) for name in names.values())


def test_sanitize_off_offers_ids_verbatim() -> None:
    assert assign_names(["crm.read"], sanitize=False) == {"crm.read": "crm.read"}
