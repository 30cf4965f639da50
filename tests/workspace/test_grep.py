"""workspace_grep: ripgrep used safely, and a pure-Python fallback with identical output."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import GrepParam, WorkspaceTool
from toolcards.tools.workspace.grep import find_rg, rg_argv

from .conftest import Tools, grep_tool, tools_of

needs_rg = pytest.mark.skipif(find_rg() is None, reason="ripgrep (rg) is not installed")


def grep_with(engine: str, max_matches: int = 200) -> Tools:
    return tools_of(WorkspaceTool(workspace_grep=GrepParam(engine=engine, max_matches=max_matches)))


@pytest.fixture
def tree(ws: Path) -> Path:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (ws / "src" / "pkg" / "b.py").write_text("def helper():\n    return 'main'\n")
    (ws / "src" / "pkg.txt").write_text("main text\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "readme.md").write_text("# main\r\nrun main()\r\n")
    (ws / "docs" / "notes.txt").write_text("nothing here\n")
    (ws / ".hidden").mkdir()
    (ws / ".hidden" / "x.py").write_text("main hidden\n")
    (ws / "blob.bin").write_bytes(b"\x00\x01main\x00")
    (ws / "unicode.txt").write_text("café main ünïcode\n", encoding="utf-8")
    return ws


@needs_rg
@pytest.mark.parametrize(
    ("pattern", "path", "include"),
    [
        ("main", "", ""),
        (r"def \w+\(", "", ""),
        ("main", "src", ""),
        ("main", "", "*.py"),
        ("main", "", "*.{md,txt}"),
        ("^run", "docs", ""),
        ("main", "src/a.py", ""),
        ("main", "src/a.py", "*.md"),
        ("main", ".hidden/x.py", ""),
        ("main", "blob.bin", ""),
        ("ünï", "", ""),
        ("absent-string", "", ""),
    ],
)
def test_fallback_output_is_identical_to_ripgrep(
    tree: Path, pattern: str, path: str, include: str
) -> None:
    with_rg = grep_with("rg")["workspace_grep"](pattern, path, include)
    with_python = grep_with("python")["workspace_grep"](pattern, path, include)
    assert with_rg == with_python


def test_output_lines_are_path_line_text(tree: Path) -> None:
    out = grep_with("python")["workspace_grep"]("def ", "src")
    assert out.splitlines() == ["src/a.py:3:def main():", "src/pkg/b.py:1:def helper():"]


def test_crlf_line_ends_are_not_in_output(tree: Path) -> None:
    out = grep_with("python")["workspace_grep"]("run", "docs")
    assert out == "docs/readme.md:2:run main()"


def test_hidden_and_binary_files_are_skipped(tree: Path) -> None:
    out = grep_with("python")["workspace_grep"]("main")
    assert ".hidden" not in out
    assert "blob.bin" not in out


def test_output_is_capped_with_marker(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 50)
    out = grep_with("python", max_matches=10)["workspace_grep"]("hit")
    lines = out.splitlines()
    assert len(lines) == 11
    assert lines[-1].startswith("[... more than 10 matches")


@needs_rg
def test_ripgrep_output_is_capped_with_marker(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 50)
    out = grep_with("rg", max_matches=10)["workspace_grep"]("hit")
    assert len(out.splitlines()) == 11


def test_invalid_regex_is_retriable(tree: Path) -> None:
    with pytest.raises(RetriableError, match="invalid regex"):
        grep_with("python")["workspace_grep"]("(unclosed")


def test_no_match_says_so(tree: Path) -> None:
    assert grep_with("python")["workspace_grep"]("zzz-none") == "No matches found."


def test_argv_passes_model_values_as_values() -> None:
    argv = rg_argv("rg", "--pre=sh", 10)
    assert "--no-config" in argv
    assert "--regexp=--pre=sh" in argv
    assert argv[-2:] == ["--", "-"]
    assert "--pre=sh" not in argv


# ---- option injection against the real ripgrep -------------------------------------------


@pytest.fixture
def trap(ws: Path) -> Path:
    """A file that, if ripgrep ran it through `--pre=sh`, would create PWNED."""
    (ws / "run.sh").write_text("touch PWNED\necho --pre=sh --files -e x\n")
    return ws


@needs_rg
@pytest.mark.parametrize("pattern", ["--pre=sh", "--pre", "-e", "--files", "-epwn", "--pre sh"])
def test_option_looking_pattern_is_searched_literally(trap: Path, pattern: str) -> None:
    out = grep_with("rg")["workspace_grep"](pattern)
    assert not (trap / "PWNED").exists()
    if pattern in ("--pre=sh", "--pre", "-e", "--files"):
        assert out.startswith("run.sh:2:")


@needs_rg
def test_pre_option_as_path_is_only_a_missing_path(trap: Path) -> None:
    with pytest.raises(RetriableError, match="not found"):
        grep_with("rg")["workspace_grep"]("x", "--pre=sh")
    assert not (trap / "PWNED").exists()


@needs_rg
def test_file_named_like_an_option_is_searched_as_a_file(trap: Path) -> None:
    (trap / "--files").write_text("needle\n")
    out = grep_with("rg")["workspace_grep"]("needle", "--files")
    assert out == "--files:1:needle"


@needs_rg
@pytest.mark.parametrize("include", ["--pre=sh", "-g", "--files"])
def test_option_looking_include_is_refused(trap: Path, include: str) -> None:
    with pytest.raises(RetriableError):
        grep_with("rg")["workspace_grep"]("x", "", include)
    assert not (trap / "PWNED").exists()


@needs_rg
def test_ripgrep_config_file_is_ignored(trap: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "rgrc"
    config.write_text("--pre=sh\n")
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    grep_with("rg")["workspace_grep"]("touch")
    assert not (trap / "PWNED").exists()


@needs_rg
def test_regex_ripgrep_rejects_is_retriable(trap: Path) -> None:
    with pytest.raises(RetriableError, match="search failed"):
        grep_with("rg")["workspace_grep"]("(?<=a)b")


def test_grep_reads_nothing_outside_with_default_engine(
    tools: Tools, ws: Path, outside: Path
) -> None:
    (ws / "a.txt").write_text("SECRET? no\n")
    assert "TOP SECRET" not in tools["workspace_grep"]("SECRET")


@needs_rg
@pytest.mark.parametrize("pattern", [r"def (?=main)", r"(ma)in.*\1", r"\"main\"|'main'"])
def test_auto_takes_python_patterns_that_ripgrep_refuses(tree: Path, pattern: str) -> None:
    """Look-around, back references and escapes such as ``\\"`` are Python regex syntax that
    ripgrep's dialect refuses: "auto" answers them as the Python engine does; "rg" says why."""
    expected = grep_with("python")["workspace_grep"](pattern)
    assert grep_with("auto")["workspace_grep"](pattern) == expected
    assert "No matches" not in expected or pattern.startswith("(ma)")
    with pytest.raises(RetriableError, match="regex parse error"):
        grep_with("rg")["workspace_grep"](pattern)


@pytest.mark.parametrize("engine", ["python", "rg"])
@pytest.mark.parametrize(
    ("pattern", "lines"),
    [("(?-m:^)b", [2, 4]), ("(?-m)^b", [2, 4]), ("(?s-m:^)b", [2, 4]), ("b(?-m:$)", [2, 3, 4])],
)
def test_a_pattern_clearing_multiline_in_a_group_finds_every_line_it_matches(
    ws: Path, engine: str, pattern: str, lines: list[int]
) -> None:
    """``(?-m:^)`` cleared the ``MULTILINE`` the Python engine's whole-file pass is compiled
    with: ``^`` anchored only at the file's start, and lines that match on their own were never
    looked at. Such a pattern is matched on each line, and gives ripgrep's lines."""
    (ws / "f.txt").write_text("a\nb\nxb\nb\n")
    text = ["a", "b", "xb", "b"]
    expected = [f"f.txt:{n}:{text[n - 1]}" for n in lines]
    assert grep_tool(engine)(pattern).splitlines() == expected
