"""workspace_edit / workspace_multi_edit / workspace_write: the matching cascade and safety."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolcards.core import ToolFactory
from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import WorkspaceTool
from toolcards.tools.workspace.models import MAX_EDITS, EditItem
from toolcards.tools.workspace.patch import MAX_FILES

from .conftest import Member, Tools, tools_of

PY = "def f(x):\n    if x:\n        return 1\n    return 0\n"


@pytest.fixture
def py(ws: Path) -> Path:
    (ws / "m.py").write_text(PY)
    return ws / "m.py"


def test_exact_edit_applies_and_returns_a_diff(tools: Tools, py: Path) -> None:
    out = tools["workspace_edit"]("m.py", "return 1", "return 2")
    assert py.read_text() == PY.replace("return 1", "return 2")
    assert "-        return 1" in out and "+        return 2" in out


def test_trailing_whitespace_drift_matches_line_trimmed(tools: Tools, py: Path) -> None:
    tools["workspace_edit"](
        "m.py", "    if x:   \n        return 1  ", "    if x:\n        return 9"
    )
    assert py.read_text() == "def f(x):\n    if x:\n        return 9\n    return 0\n"


def test_inner_whitespace_drift_matches_collapsed(tools: Tools, ws: Path) -> None:
    (ws / "c.py").write_text("x = compute(a,  b)\ny = 2\n")
    tools["workspace_edit"]("c.py", "x = compute(a, b)", "x = compute(a, c)")
    assert (ws / "c.py").read_text() == "x = compute(a, c)\ny = 2\n"


def test_indentation_drift_reindents_new_text(tools: Tools, py: Path) -> None:
    tools["workspace_edit"]("m.py", "if x:\n    return 1", "if x:\n    log(x)\n    return 1")
    assert py.read_text() == (
        "def f(x):\n    if x:\n        log(x)\n        return 1\n    return 0\n"
    )


def test_tab_indented_file_keeps_tabs(tools: Tools, ws: Path) -> None:
    (ws / "g.go").write_text("func f() {\n\tif ok {\n\t\treturn\n\t}\n}\n")
    tools["workspace_edit"](
        "g.go", "    if ok {\n        return\n    }", "    if ok {\n        done()\n    }"
    )
    assert (ws / "g.go").read_text() == "func f() {\n\tif ok {\n\t\tdone()\n\t}\n}\n"


def test_over_escaped_strings_are_normalised(tools: Tools, ws: Path) -> None:
    (ws / "s.py").write_text('msg = "a\\nb"\nprint(msg)\n')
    tools["workspace_edit"]("s.py", 'msg = \\"a\\\\nb\\"', 'msg = \\"c\\"')
    assert (ws / "s.py").read_text() == 'msg = "c"\nprint(msg)\n'


def test_typographic_quotes_match_ascii_quotes(tools: Tools, ws: Path) -> None:
    (ws / "q.py").write_text("say('hello')\n")
    tools["workspace_edit"]("q.py", "say(\u2018hello\u2019)", "say(\u2018bye\u2019)")
    assert (ws / "q.py").read_text() == "say('bye')\n"


def test_line_number_prefixes_from_read_are_ignored(tools: Tools, py: Path) -> None:
    tools["workspace_edit"]("m.py", "     3\t        return 1", "     3\t        return 5")
    assert "return 5" in py.read_text()


def test_ambiguous_match_is_refused_listing_lines(tools: Tools, ws: Path) -> None:
    (ws / "d.py").write_text("a = 1\nb = 2\na = 1\n")
    with pytest.raises(RetriableError, match=r"2 places .*lines 1, 3"):
        tools["workspace_edit"]("d.py", "a = 1", "a = 3")
    assert (ws / "d.py").read_text() == "a = 1\nb = 2\na = 1\n"


def test_ambiguity_at_a_fuzzy_level_is_refused(tools: Tools, ws: Path) -> None:
    (ws / "d.py").write_text("x = 1  \ny = 2\nx = 1\t\ny = 2\n")
    with pytest.raises(RetriableError, match=r"line-trimmed match, lines 1, 3"):
        tools["workspace_edit"]("d.py", "x = 1 \ny = 2", "x = 5\ny = 2")


def test_no_match_quotes_the_closest_region(tools: Tools, py: Path) -> None:
    with pytest.raises(RetriableError, match=r"Closest region \(line 2\)") as info:
        tools["workspace_edit"]("m.py", "if y:\n    return 1", "nope")
    assert "if x:" in str(info.value)
    assert py.read_text() == PY


def test_replace_all_terminates_when_new_contains_old(tools: Tools, ws: Path) -> None:
    (ws / "r.txt").write_text("a a a\n")
    tools["workspace_edit"]("r.txt", "a", "aa", True)
    assert (ws / "r.txt").read_text() == "aa aa aa\n"


def test_replace_all_is_non_overlapping_left_to_right(tools: Tools, ws: Path) -> None:
    (ws / "r.txt").write_text("aaaa\n")
    tools["workspace_edit"]("r.txt", "aa", "b", True)
    assert (ws / "r.txt").read_text() == "bb\n"


def test_crlf_file_keeps_crlf_after_edit(tools: Tools, ws: Path) -> None:
    (ws / "w.ini").write_bytes(b"[a]\r\nkey=1\r\nother=2\r\n")
    tools["workspace_edit"]("w.ini", "key=1\nother=2", "key=5\nother=2\nnew=3")
    assert (ws / "w.ini").read_bytes() == b"[a]\r\nkey=5\r\nother=2\r\nnew=3\r\n"


def test_missing_final_newline_is_preserved_by_fuzzy_edit(tools: Tools, ws: Path) -> None:
    (ws / "n.txt").write_text("one\n  two")
    tools["workspace_edit"]("n.txt", "two  \n", "three\n")
    assert (ws / "n.txt").read_text() == "one\n  three"


def test_fuzzy_edit_keeps_the_newline_after_the_block(tools: Tools, ws: Path) -> None:
    (ws / "k.txt").write_text("a  \nb\nc\n")
    tools["workspace_edit"]("k.txt", "a\nb\n", "x\ny\n")
    assert (ws / "k.txt").read_text() == "x\ny\nc\n"


def test_identical_strings_are_refused(tools: Tools, py: Path) -> None:
    with pytest.raises(RetriableError, match="identical"):
        tools["workspace_edit"]("m.py", "return 1", "return 1")


def test_empty_old_string_creates_a_new_file(tools: Tools, ws: Path) -> None:
    tools["workspace_edit"]("new/file.txt", "", "hello\n")
    assert (ws / "new" / "file.txt").read_text() == "hello\n"


def test_empty_old_string_on_existing_file_is_refused(tools: Tools, py: Path) -> None:
    with pytest.raises(RetriableError, match="empty"):
        tools["workspace_edit"]("m.py", "", "x")


def test_edit_of_missing_file_is_retriable(tools: Tools, ws: Path) -> None:
    with pytest.raises(RetriableError, match="not found"):
        tools["workspace_edit"]("none.py", "a", "b")


def test_stale_file_is_refused_with_reread_first(tools: Tools, py: Path) -> None:
    tools["workspace_read"]("m.py")
    py.write_text(PY.replace("return 0", "return -1"))
    with pytest.raises(RetriableError, match="re-read first"):
        tools["workspace_edit"]("m.py", "return 1", "return 2")
    tools["workspace_read"]("m.py")
    tools["workspace_edit"]("m.py", "return 1", "return 2")
    assert "return 2" in py.read_text()


def test_own_edits_keep_the_ledger_fresh(tools: Tools, py: Path) -> None:
    tools["workspace_read"]("m.py")
    tools["workspace_edit"]("m.py", "return 1", "return 2")
    tools["workspace_edit"]("m.py", "return 2", "return 3")
    assert "return 3" in py.read_text()


def test_ledger_is_per_agent(ws: Path, py: Path) -> None:
    alice, bob = Member("@alice"), Member("@bob")
    a = tools_of(WorkspaceTool(workspace_id="default").observer(alice))
    b = tools_of(WorkspaceTool(workspace_id="default").observer(bob))
    a["workspace_read"]("m.py")
    b["workspace_read"]("m.py")
    b["workspace_edit"]("m.py", "return 1", "return 2")
    with pytest.raises(RetriableError, match="re-read first"):
        a["workspace_edit"]("m.py", "return 0", "return 7")
    b["workspace_edit"]("m.py", "return 0", "return 7")


def test_multi_edit_applies_in_order_across_files(tools: Tools, ws: Path) -> None:
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    tools["workspace_multi_edit"](
        [
            EditItem(path="a.txt", old_string="one", new_string="uno"),
            EditItem(path="a.txt", old_string="uno", new_string="eins"),
            EditItem(path="b.txt", old_string="two", new_string="dos"),
        ]
    )
    assert (ws / "a.txt").read_text() == "eins\n"
    assert (ws / "b.txt").read_text() == "dos\n"


def test_a_multi_edit_of_more_files_than_one_call_may_change_is_refused_before_any_is_opened(
    tools: Tools, ws: Path
) -> None:
    """Attack: like a patch, every file of a multi-edit held its directory's descriptor until
    all were written (EMFILE for the whole process)."""
    for i in range(MAX_FILES + 1):
        (ws / f"f{i}.txt").write_text("x\n")
    edits = [
        EditItem(path=f"f{i}.txt", old_string="x", new_string="y") for i in range(MAX_FILES + 1)
    ]
    with pytest.raises(RetriableError, match=f"multi-edit changes {MAX_FILES + 1} files"):
        tools["workspace_multi_edit"](edits)
    assert {p.read_text() for p in ws.iterdir()} == {"x\n"}
    tools["workspace_multi_edit"](edits[:MAX_FILES])
    assert (ws / f"f{MAX_FILES - 1}.txt").read_text() == "y\n"


def test_a_multi_edit_of_more_edits_than_one_call_may_make_is_refused_before_any_is_opened(
    ws: Path,
) -> None:
    """Attack: 5,000 one-word edits of one file merged every place changed so far at each edit,
    58 s holding the workspace lock (an unrelated write waited as long). The cap is in the
    schema the model sees, and checked for the command and any caller the schema never saw."""
    card = WorkspaceTool()
    edits = [EditItem(path="missing.txt", old_string="x", new_string="y")] * (MAX_EDITS + 1)
    refusal = f"{MAX_EDITS + 1} edits in one call, over the cap of {MAX_EDITS}; send them in"
    with pytest.raises(RetriableError, match=f"^{refusal}"):
        tools_of(card)["workspace_multi_edit"](edits)
    factory = ToolFactory([card])
    as_json = json.dumps([item.model_dump() for item in edits])
    assert refusal in factory.get_commands().dispatch(f"/workspace_multi_edit {as_json}")
    toolset: Any = factory.function_toolset()
    schema = toolset.tools["workspace_multi_edit"].function_schema.json_schema
    assert schema["properties"]["edits"]["maxItems"] == MAX_EDITS
    with pytest.raises(RetriableError, match="file not found: missing.txt"):
        tools_of(card)["workspace_multi_edit"](edits[:MAX_EDITS])


def test_multi_edit_is_atomic_when_the_last_edit_fails(tools: Tools, ws: Path) -> None:
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    with pytest.raises(RetriableError, match=r"edit 3 of 3 \(b.txt\).*No file was changed"):
        tools["workspace_multi_edit"](
            [
                EditItem(path="a.txt", old_string="one", new_string="uno"),
                EditItem(path="b.txt", old_string="two", new_string="dos"),
                EditItem(path="b.txt", old_string="missing", new_string="x"),
            ]
        )
    assert (ws / "a.txt").read_text() == "one\n"
    assert (ws / "b.txt").read_text() == "two\n"


def test_multi_edit_rolls_back_when_a_write_fails(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    real_replace = os.replace
    calls = {"n": 0}

    def failing_replace(src: str, dst: str, **kwargs: int) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(RetriableError, match="No space"):
        tools["workspace_multi_edit"](
            [
                EditItem(path="a.txt", old_string="one", new_string="uno"),
                EditItem(path="b.txt", old_string="two", new_string="dos"),
            ]
        )
    monkeypatch.undo()
    assert (ws / "a.txt").read_text() == "one\n"
    assert (ws / "b.txt").read_text() == "two\n"
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt", "b.txt"]


def test_write_keeps_crlf_and_final_newline_of_existing_file(tools: Tools, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"a\r\nb\r\n")
    tools["workspace_write"]("w.txt", "x\ny")
    assert (ws / "w.txt").read_bytes() == b"x\r\ny\r\n"


def test_write_keeps_missing_final_newline(tools: Tools, ws: Path) -> None:
    (ws / "w.txt").write_text("a\nb")
    tools["workspace_write"]("w.txt", "x\ny\n")
    assert (ws / "w.txt").read_text() == "x\ny"


def test_write_creates_parents(tools: Tools, ws: Path) -> None:
    tools["workspace_write"]("deep/er/f.txt", "hi")
    assert (ws / "deep" / "er" / "f.txt").read_text() == "hi"


def test_byte_order_mark_is_preserved(tools: Tools, ws: Path) -> None:
    (ws / "b.txt").write_bytes(b"\xef\xbb\xbfkey=1\r\n")
    tools["workspace_edit"]("b.txt", "key=1", "key=2")
    assert (ws / "b.txt").read_bytes() == b"\xef\xbb\xbfkey=2\r\n"


def test_concurrent_edits_from_threads_are_not_lost(tools: Tools, ws: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    (ws / "c.txt").write_text("".join(f"slot{i}=0\n" for i in range(20)))

    def bump(i: int) -> str:
        return str(tools["workspace_edit"]("c.txt", f"slot{i}=0\n", f"slot{i}=1\n"))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(bump, range(20)))
    assert (ws / "c.txt").read_text() == "".join(f"slot{i}=1\n" for i in range(20))


def test_tab_on_a_blank_line_does_not_turn_space_indentation_into_tabs(
    tools: Tools, ws: Path
) -> None:
    (ws / "t.py").write_text("def f():\n    a = 1\n\t\n    b = 2\n    return a + b\n")
    tools["workspace_edit"]("t.py", "a = 1\n\nb = 2\nreturn a + b", "a = 1\n\nb = 3\nreturn a + b")
    assert (ws / "t.py").read_text() == ("def f():\n    a = 1\n\n    b = 3\n    return a + b\n")
