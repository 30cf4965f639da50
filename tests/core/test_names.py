"""One rule for provider-safe names and one for globs, used by every surface."""

from __future__ import annotations

import random
import re

from toolcards.core.names import (
    glob_matcher,
    is_provider_safe,
    provider_safe_name,
    provider_safe_names,
)
from toolcards.governance import provider_safe_name as governance_name
from toolcards.tools.mcp.names import sanitize_names

VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
NAMES = ["docs.search", "docs_search", "a" * 80, "a" * 81, "x y", "x/y", "ok", "ü", "", "..."]


def test_a_safe_name_is_kept_and_any_other_is_made_safe() -> None:
    assert provider_safe_name("crm_read") == "crm_read"
    for name in NAMES:
        assert VALID.fullmatch(provider_safe_name(name)), name
    assert is_provider_safe("a-b_c") and not is_provider_safe("a.b") and not is_provider_safe("")


def test_the_single_name_rule_does_not_depend_on_other_names() -> None:
    assert provider_safe_name("docs.search") == provider_safe_name("docs.search")
    assert provider_safe_name("docs.search") != provider_safe_name("docs/search")
    assert provider_safe_name("docs.search").startswith("docs_search_")


def test_a_set_of_names_is_unique_readable_and_order_independent() -> None:
    first = provider_safe_names(NAMES)
    shuffled = NAMES[:]
    random.Random(3).shuffle(shuffled)
    assert provider_safe_names(shuffled) == first
    assert len(set(first.values())) == len(NAMES)
    assert all(VALID.fullmatch(v) for v in first.values())
    assert first["docs_search"] == "docs_search" and first["docs.search"] != "docs_search"
    assert provider_safe_names(["executor.crm.read"]) == {"executor.crm.read": "executor_crm_read"}


def test_every_surface_names_tools_by_the_same_rule() -> None:
    from toolcards.bridges.apcore.naming import assign_names

    assert assign_names(NAMES) == provider_safe_names(NAMES)
    assert sanitize_names(NAMES) == provider_safe_names(NAMES)
    assert governance_name("a.b") == provider_safe_name("a.b")


def test_globs_match_case_sensitively_and_no_pattern_matches_nothing() -> None:
    matches = glob_matcher(["crm_*", "@lead-?"])
    assert matches("crm_read") and matches("@lead-1")
    assert not matches("CRM_read") and not matches("@lead-10")
    assert not glob_matcher([])("anything")
