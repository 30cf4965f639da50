"""The bounded YAML loader of user files: aliases that expand past the cap, aliases to
themselves and deep nesting are one-line errors naming the source and line; ordinary anchors
load as PyYAML loads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcards.core.yaml_safe import MAX_DEPTH, MAX_EXPANDED, YamlError, check_loaded, load_yaml
from toolcards.surfaces.config import ConfigError, load_config


def laughs(levels: int) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{n}: &l{n} [" + ",".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_anchors_and_merge_keys_load_like_pyyaml() -> None:
    text = "base: &b {a: 1, b: [x, y]}\nuse: *b\nmerged: {<<: *b, c: 2}\n"
    data = load_yaml(text, "t.yaml")
    assert data["use"] == {"a": 1, "b": ["x", "y"]}
    assert data["merged"] == {"a": 1, "b": ["x", "y"], "c": 2}


def test_aliases_expanding_past_the_cap_are_refused_at_their_line() -> None:
    with pytest.raises(YamlError, match=r"^t\.yaml: line 7: .*aliases \(\*name\)"):
        load_yaml(laughs(9), "t.yaml")


def test_an_alias_to_its_own_collection_is_refused() -> None:
    with pytest.raises(YamlError, match=r"^t\.yaml: line 1: alias \*a refers to itself$"):
        load_yaml("a: &a [1, *a]\n", "t.yaml")


def test_nesting_past_the_depth_cap_is_one_line_not_a_recursion_error() -> None:
    text = "[" * (5 * MAX_DEPTH) + "]" * (5 * MAX_DEPTH)
    with pytest.raises(YamlError, match=rf"^t\.yaml: line 1: .*deeper than {MAX_DEPTH}"):
        load_yaml(text, "t.yaml")


def test_syntax_errors_are_one_line_naming_the_line() -> None:
    with pytest.raises(YamlError) as caught:
        load_yaml("a: 1\nb: [unclosed\n", "t.yaml")
    assert str(caught.value).startswith("t.yaml: line 3: ")
    assert "\n" not in str(caught.value)


def test_alias_bomb_config_file_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "toolcards.yaml"
    path.write_text(laughs(9) + "policy: policy.yaml\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"toolcards\.yaml: not valid YAML: line 7: .*aliases"):
        load_config(path)


def test_loaded_data_is_held_to_the_same_bound_counting_each_shared_value_every_time() -> None:
    third = ["x" * ((MAX_EXPANDED - 1) // 3 - 2)]  # a node, a scalar node and its characters
    check_loaded([third, third, third], "spec")  # holds 1.3 million characters, stands for 4
    with pytest.raises(YamlError, match=r"^spec: expands to more than 4,000,000 characters"):
        check_loaded([third, third, third, None], "spec")  # one node more


def test_loaded_data_that_contains_itself_or_nests_too_deep_is_refused() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    with pytest.raises(YamlError, match=r"^spec: refers to itself through an alias$"):
        check_loaded({"a": loop}, "spec")
    deep: list[object] = []
    for _ in range(5 * MAX_DEPTH):
        deep = [deep]
    with pytest.raises(YamlError, match=rf"^spec: collections nest deeper than {MAX_DEPTH}"):
        check_loaded(deep, "spec")
