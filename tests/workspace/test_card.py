"""The card: tool set, read-only mode, resources, annotations, commands, and the read tools."""

from __future__ import annotations

import io
import os
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolcards.core import ToolFactory
from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import ReadParam, WorkspaceParam, WorkspaceTool
from toolcards.tools.workspace.paths import CACHE_DIR_NAME

from .conftest import Member, Tools, tools_of

ALL = {
    "workspace_read", "workspace_list", "workspace_glob", "workspace_grep", "workspace_view",
    "workspace_write", "workspace_edit", "workspace_multi_edit", "workspace_patch",
    "workspace_delete", "workspace_mkdir",
}  # fmt: skip
READS = {"workspace_read", "workspace_list", "workspace_glob", "workspace_grep", "workspace_view"}


def test_offers_the_eleven_tools(ws: Path) -> None:
    assert set(tools_of(WorkspaceTool())) == ALL


def test_read_only_offers_read_tools_only(ws: Path) -> None:
    card = WorkspaceTool(read_only=True)
    assert set(tools_of(card)) == READS
    assert set(ToolFactory([card]).get_commands().names()) == READS


def test_single_tool_can_be_switched_off(ws: Path) -> None:
    assert "workspace_glob" not in tools_of(WorkspaceTool(workspace_glob=False))


def test_every_tool_is_also_a_command(ws: Path) -> None:
    assert set(ToolFactory([WorkspaceTool()]).get_commands().names()) == ALL


def test_command_only_exposure(ws: Path) -> None:
    card = WorkspaceTool(workspace_delete=WorkspaceParam(expose={"command"}))  # type: ignore[arg-type]
    assert "workspace_delete" not in tools_of(card)
    assert "workspace_delete" in ToolFactory([card]).get_commands()


def test_write_command_takes_the_rest_of_the_line(ws: Path) -> None:
    commands = ToolFactory([WorkspaceTool()]).get_commands()
    commands.dispatch("/workspace_write notes.txt two  spaced words")
    assert (ws / "notes.txt").read_text() == "two  spaced words"


def test_multi_edit_command_takes_json(ws: Path) -> None:
    (ws / "a.txt").write_text("x\n")
    commands = ToolFactory([WorkspaceTool()]).get_commands()
    commands.dispatch(
        '/workspace_multi_edit [{"path": "a.txt", "old_string": "x", "new_string": "y"}]'
    )
    assert (ws / "a.txt").read_text() == "y\n"


def test_command_failure_is_reported_not_raised(ws: Path) -> None:
    commands = ToolFactory([WorkspaceTool()]).get_commands()
    assert "failed" in commands.dispatch("/workspace_read ../x")


def test_annotations(ws: Path) -> None:
    notes = ToolFactory([WorkspaceTool()]).tool_annotations()
    assert notes["workspace_read"]["readonly"] and notes["workspace_read"]["idempotent"]
    assert notes["workspace_delete"]["destructive"]
    assert notes["workspace_patch"]["destructive"] and not notes["workspace_patch"]["idempotent"]
    assert not notes["workspace_mkdir"]["destructive"]


def test_instructions_reach_the_description(ws: Path) -> None:
    card = WorkspaceTool(workspace_read=ReadParam(instructions="Prefer small ranges."))
    assert "Prefer small ranges." in ToolFactory([card]).tool_descriptions()["workspace_read"]


def test_card_round_trips_through_json(ws: Path) -> None:
    card = WorkspaceTool(workspace_id="shared", read_only=True, resources={"a.md": "hi"})
    assert WorkspaceTool.model_validate_json(card.model_dump_json()) == card


def test_workspace_id_chooses_the_directory(root: Path) -> None:
    tools_of(WorkspaceTool(workspace_id="shared"))["workspace_write"]("f.txt", "x")
    assert (root / "shared" / "f.txt").read_text() == "x"


def test_team_id_is_the_default_directory(root: Path) -> None:
    member = Member("@a", team_id="team7")
    tools_of(WorkspaceTool().observer(member))["workspace_write"]("f.txt", "x")
    assert (root / "team7" / "f.txt").exists()


def test_a_team_id_that_names_no_directory_fails_when_the_tools_are_made(root: Path) -> None:
    member = Member("@a", team_id="my team")  # held: the card holds its observer weakly
    card = WorkspaceTool().observer(member)
    with pytest.raises(ValueError, match=r"workspace id 'my team' \(the team id"):
        tools_of(card)
    assert not root.exists()


def test_resources_are_seeded_once_without_overwriting(root: Path) -> None:
    card = WorkspaceTool(workspace_id="seeded", resources={"docs/brief.md": "# Brief\n"})
    tools = tools_of(card)
    assert tools["workspace_read"]("docs/brief.md") == "     1\t# Brief"
    tools["workspace_write"]("docs/brief.md", "# Changed\n")
    tools_of(card)["workspace_list"]()
    assert (root / "seeded" / "docs" / "brief.md").read_text() == "# Changed\n"


def test_resources_with_escaping_paths_are_rejected() -> None:
    with pytest.raises(ValueError, match="resource"):
        WorkspaceTool(resources={"../x.md": "x"})


# ---- read / list / glob -------------------------------------------------------------------


def test_read_numbers_lines_and_pages(tools: Tools, ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = tools["workspace_read"]("f.txt", 3, 2)
    assert out.splitlines() == ["     3\tline 3", "     4\tline 4",
                                "[... 6 more lines of 10; continue with offset=5]"]  # fmt: skip


def test_read_cuts_long_lines(ws: Path) -> None:
    (ws / "f.txt").write_text("x" * 500 + "\n")
    out = tools_of(WorkspaceTool(workspace_read=ReadParam(max_line_chars=100)))["workspace_read"](
        "f.txt"
    )
    assert out.endswith("[... 400 more chars]")


def test_read_offset_past_end_is_retriable(tools: Tools, ws: Path) -> None:
    (ws / "f.txt").write_text("a\n")
    with pytest.raises(RetriableError, match="past the end"):
        tools["workspace_read"]("f.txt", 5)


def test_read_binary_is_retriable(tools: Tools, ws: Path) -> None:
    (ws / "b.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(RetriableError, match="binary"):
        tools["workspace_read"]("b.bin")


def test_read_missing_and_directory_are_retriable(tools: Tools, ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(RetriableError, match="not found"):
        tools["workspace_read"]("nope.txt")
    with pytest.raises(RetriableError, match="directory"):
        tools["workspace_read"]("d")


def test_list_flat_and_tree(tools: Tools, ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "m.py").write_text("x")
    (ws / "top.txt").write_text("abc")
    assert tools["workspace_list"]().splitlines() == ["./", "  src/", "  top.txt (3 bytes)"]
    tree = tools["workspace_list"]("", 3)
    assert "│   └── pkg/" in tree or "    └── pkg/" in tree
    assert "m.py (1 bytes)" in tree


def test_list_is_capped(ws: Path) -> None:
    from toolcards.tools.workspace.card import ListParam

    for i in range(30):
        (ws / f"f{i:02d}").write_text("")
    out = tools_of(WorkspaceTool(workspace_list=ListParam(max_entries=10)))["workspace_list"]()
    assert "listing stopped after 10 entries" in out


def test_list_reads_a_long_directory_only_as_far_as_it_shows(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a listing read and sorted the whole directory before cutting to max_entries
    (500,000 entries to show 500: 0.8 to 3 s and about 140 MiB a call)."""
    from toolcards.tools.workspace import listing, paths
    from toolcards.tools.workspace.card import ListParam

    read: list[int] = []
    real = paths.iter_dir

    def counted(fd: int, limit: int | None = None) -> Iterator[os.DirEntry[str]]:
        entries = list(real(fd, limit))
        read.append(len(entries))
        return iter(entries)

    monkeypatch.setattr(listing, "iter_dir", counted)
    for i in range(30):
        (ws / f"f{i:02d}").write_text("")
    (ws / "sub").mkdir()
    out = tools_of(WorkspaceTool(workspace_list=ListParam(max_entries=10)))["workspace_list"]()
    assert read == [11]  # the ten shown and one more, to know there are more
    lines = out.splitlines()
    assert lines[-1] == (
        "[... listing stopped after 10 entries (the first read, sorted: not the first by name); "
        "list a subdirectory]"
    )
    shown = [line.strip() for line in lines[1:-1]]
    assert len(shown) == 10
    assert shown == sorted(shown, key=lambda line: (not line.endswith("/"), line))


def test_list_of_a_directory_that_fits_is_whole_directories_first(ws: Path) -> None:
    from toolcards.tools.workspace.card import ListParam

    for name in ["b", "a"]:
        (ws / name).mkdir()
    for i in reversed(range(8)):
        (ws / f"f{i}").write_text("")
    out = tools_of(WorkspaceTool(workspace_list=ListParam(max_entries=10)))["workspace_list"]()
    assert out.splitlines() == ["./", "  a/", "  b/"] + [f"  f{i} (0 bytes)" for i in range(8)]


def test_a_tree_cut_where_every_directory_fit_claims_no_other_order(ws: Path) -> None:
    """Each directory was read whole (the budget ran out between them): the order is by name."""
    from toolcards.tools.workspace.card import ListParam

    for name, files in [("a", 8), ("b", 5)]:
        (ws / name).mkdir()
        for i in range(files):
            (ws / name / f"f{i}").write_text("")
    (ws / "z.txt").write_text("")
    out = tools_of(WorkspaceTool(workspace_list=ListParam(max_entries=10)))["workspace_list"]
    lines = out("", 2).splitlines()
    assert lines[1:3] == ["├── a/", "│   ├── f0 (0 bytes)"]
    assert lines[-2:] == ["├── b/", "[... listing stopped after 10 entries; list a subdirectory]"]


def test_glob_braces_and_newest_first(tools: Tools, ws: Path) -> None:
    (ws / "src").mkdir()
    for k, name in enumerate(["old.py", "mid.md", "new.py", "skip.txt"]):
        (ws / "src" / name).write_text("x")
        os.utime(ws / "src" / name, (1_000_000 + k, 1_000_000 + k))
    assert tools["workspace_glob"]("**/*.{py,md}").splitlines() == [
        "src/new.py", "src/mid.md", "src/old.py",
    ]  # fmt: skip


def test_glob_relative_to_path(tools: Tools, ws: Path) -> None:
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "c.txt").write_text("x")
    (ws / "c.txt").write_text("x")
    assert tools["workspace_glob"]("b/*.txt", "a") == "a/b/c.txt"


def test_glob_is_capped(ws: Path) -> None:
    from toolcards.tools.workspace.card import GlobParam

    for i in range(12):
        (ws / f"f{i}.txt").write_text("")
    out = tools_of(WorkspaceTool(workspace_glob=GlobParam(max_results=5)))["workspace_glob"](
        "*.txt"
    )
    assert out.splitlines()[-1] == "[... 7 more files; use a narrower pattern]"


def test_glob_keeps_the_newest_of_many_matches(ws: Path) -> None:
    from toolcards.tools.workspace.card import GlobParam

    for k, name in enumerate(["a", "e", "b", "d", "c"]):
        (ws / f"{name}.txt").write_text("")
        os.utime(ws / f"{name}.txt", (1_000_000 + k, 1_000_000 + k))
    glob = tools_of(WorkspaceTool(workspace_glob=GlobParam(max_results=2)))["workspace_glob"]
    assert glob("*.txt").splitlines() == [
        "c.txt", "d.txt", "[... 3 more files; use a narrower pattern]",
    ]  # fmt: skip


def test_glob_stops_after_its_entry_budget_and_says_so(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a glob walked every file below its start (500,000 files: 5 to 12 s a call) and
    kept every match before cutting to max_results."""
    from toolcards.tools.workspace import listing

    monkeypatch.setattr(listing, "MAX_GLOB_ENTRIES", 50)
    (ws / "many").mkdir()
    for i in range(120):
        (ws / "many" / f"f{i:03d}.txt").write_text("")
    lines = tools["workspace_glob"]("**/*.txt").splitlines()
    assert lines[-1] == "[narrowed: visited 50 entries, narrow the path or pattern]"
    assert len(lines) == 50  # the root's one entry, then 49 of the directory's files


def test_glob_stops_at_its_deadline_and_says_so(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolcards.tools.workspace import listing

    monkeypatch.setattr(listing, "GLOB_TIMEOUT_S", 0.0)
    (ws / "a.txt").write_text("")
    lines = tools["workspace_glob"]("*.txt").splitlines()
    assert lines[0] == "No files found."
    assert lines[-1].startswith("[narrowed: visited ")


def test_mkdir_is_idempotent_and_delete_removes(tools: Tools, ws: Path) -> None:
    tools["workspace_mkdir"]("a/b")
    tools["workspace_mkdir"]("a/b")
    assert (ws / "a" / "b").is_dir()
    tools["workspace_delete"]("a/b")
    assert not (ws / "a" / "b").exists()


def test_delete_non_empty_directory_is_refused(tools: Tools, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f").write_text("x")
    with pytest.raises(RetriableError, match="not empty"):
        tools["workspace_delete"]("d")


# ---- view and documents ---------------------------------------------------------------------


def _png(path: Path, size: tuple[int, int]) -> None:
    from PIL import Image

    Image.new("RGB", size, (200, 10, 10)).save(path, format="PNG")


def test_view_returns_binary_content(tools: Tools, ws: Path) -> None:
    pytest.importorskip("PIL")
    from pydantic_ai.messages import BinaryContent

    _png(ws / "a.png", (20, 10))
    content = tools["workspace_view"]("a.png")
    assert isinstance(content, BinaryContent)
    assert content.media_type == "image/png"
    assert content.data == (ws / "a.png").read_bytes()


def test_view_resizes_large_images_into_the_outside_cache(
    tools: Tools, ws: Path, root: Path
) -> None:
    pytest.importorskip("PIL")
    import io

    from PIL import Image

    _png(ws / "big.png", (3000, 1000))
    content = tools["workspace_view"]("big.png")
    with Image.open(io.BytesIO(content.data)) as image:
        assert image.size == (1568, 523)
    assert sorted(p.name for p in ws.iterdir()) == ["big.png"]
    assert list((root / CACHE_DIR_NAME / "images" / "default").iterdir())


def test_view_scales_a_phone_photo(tools: Tools, ws: Path) -> None:
    pytest.importorskip("PIL")
    import io

    from PIL import Image

    Image.new("RGB", (4000, 3000), (10, 120, 200)).save(ws / "photo.jpg", format="JPEG")
    content = tools["workspace_view"]("photo.jpg")
    assert content.media_type == "image/jpeg"
    with Image.open(io.BytesIO(content.data)) as image:
        assert (image.format, image.size) == ("JPEG", (1568, 1176))


def test_view_of_non_image_is_retriable(tools: Tools, ws: Path) -> None:
    (ws / "a.txt").write_text("x")
    with pytest.raises(RetriableError, match="not an image"):
        tools["workspace_view"]("a.txt")


def test_view_without_pillow_returns_small_images_unresized(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    monkeypatch.setitem(sys.modules, "PIL", None)
    assert tools["workspace_view"]("a.png").data == (ws / "a.png").read_bytes()


def test_xlsx_is_read_as_markdown_with_cache_outside(tools: Tools, ws: Path, root: Path) -> None:
    pytest.importorskip("markitdown")
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    book.active.append(["name", "qty"])
    book.active.append(["apples", 3])
    book.save(ws / "stock.xlsx")
    out = tools["workspace_read"]("stock.xlsx")
    assert "apples" in out and "| name" in out
    cache = root / CACHE_DIR_NAME / "docs" / "default"
    assert len(list(cache.glob("*.md"))) == 1
    assert sorted(p.name for p in ws.iterdir()) == ["stock.xlsx"]
    assert tools["workspace_read"]("stock.xlsx") == out


def test_missing_docs_extra_names_it(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "r.pdf").write_bytes(b"%PDF-1.4 fake")
    monkeypatch.setitem(sys.modules, "markitdown", None)
    with pytest.raises(RetriableError, match=r"toolcards\[docs\]"):
        tools["workspace_read"]("r.pdf")


def test_document_is_converted_only_as_the_kind_its_suffix_names(
    tools: Tools, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 'report.pdf' that was a WAV went, by MarkItDown's guess from its content, to the audio
    converter, which sends it to Google's speech API when speech_recognition is installed."""
    pytest.importorskip("markitdown")
    uploads = tmp_path / "uploads.log"
    fakes = tmp_path / "fakes"  # stand-ins for markitdown[all]'s speech packages
    (fakes / "pydub").mkdir(parents=True)
    (fakes / "pydub" / "__init__.py").write_text("class AudioSegment: pass\n")
    (fakes / "speech_recognition").mkdir()
    (fakes / "speech_recognition" / "__init__.py").write_text(
        "class AudioFile:\n"
        "    def __init__(self, src): self.src = src\n"
        "    def __enter__(self): return self\n"
        "    def __exit__(self, *args): pass\n"
        "class Recognizer:\n"
        "    def record(self, source): return source.src.read()\n"
        "    def recognize_google(self, audio, language=None):\n"
        f"        open({str(uploads)!r}, 'a').write(f'{{len(audio)}} bytes uploaded')\n"
        "        return 'transcript'\n"
    )
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(fakes), os.environ.get("PYTHONPATH", "")])
    )
    sound = io.BytesIO()
    with wave.open(sound, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(16000))
    (ws / "report.pdf").write_bytes(sound.getvalue())
    with pytest.raises(RetriableError, match=r"^could not convert report\.pdf to text: \w+$"):
        tools["workspace_read"]("report.pdf")
    assert not uploads.exists()


def _long_file(ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"{'y' * 90} {i}\n" for i in range(100)))


def test_read_returns_at_most_max_lines(ws: Path) -> None:
    _long_file(ws)
    card = WorkspaceTool(workspace_read=ReadParam(max_lines=10))
    lines = tools_of(card)["workspace_read"]("big.txt", 1, 10_000).splitlines()
    assert len(lines) == 11
    assert lines[-1] == "[... 90 more lines of 100; continue with offset=11]"


def test_read_returns_at_most_max_chars(ws: Path) -> None:
    _long_file(ws)
    card = WorkspaceTool(workspace_read=ReadParam(max_chars=1000))
    out = tools_of(card)["workspace_read"]("big.txt")
    body, marker = out.rsplit("\n", 1)
    assert len(body) <= 1000
    assert marker.startswith("[... ") and "continue with offset=" in marker


def test_os_errors_do_not_reveal_host_paths(tools: Tools, ws: Path) -> None:
    (ws / "file.txt").write_text("x")
    with pytest.raises(RetriableError) as info:
        tools["workspace_write"]("file.txt/inner.txt", "y")
    assert str(ws) not in str(info.value)


@pytest.mark.parametrize("bad", ["..", "../x", "a/b", ".hidden", "x\x00"])
def test_unsafe_workspace_id_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="workspace id"):
        WorkspaceTool(workspace_id=bad)
