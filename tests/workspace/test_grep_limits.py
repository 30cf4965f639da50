"""workspace_grep: a catastrophic pattern costs its time limit by the clock, also on a shared
core, and never stalls the process; the walk stops at the same deadline and after a bounded
number of entries;
the whole-file fast path of the Python engine finds exactly the lines a line-by-line search
finds; a hit holds the part of its line that is shown, never the whole line."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace import globs
from toolcards.tools.workspace import grep as grep_module
from toolcards.tools.workspace.card import GrepParam, WorkspaceTool

from .conftest import grep_tool, tools_of

CATASTROPHIC = "(a|aa)+$"
"""Exponential backtracking on ``a`` * N + ``b`` for ``re`` and ``regex`` alike."""

HEARTBEAT = r"""
import json, os, sys, threading, time
from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import GrepParam, WorkspaceTool

os.environ["TOOLCARDS_WORKSPACES_ROOT"] = sys.argv[1]
# half a core: this process and a busy one of its own share one CPU (regex's own timeout
# counts CPU time, which then comes at half the clock's pace)
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
parent = os.getpid()
busy = os.fork()
if busy == 0:
    while os.getppid() == parent:  # ends with this process, however that ends
        pass
    os._exit(0)
card = WorkspaceTool(workspace_grep=GrepParam(engine="python", timeout_s=1.5))
grep = {fn.__name__: fn for fn in card.get_tools()}["workspace_grep"]
ticks, stop = [time.monotonic()], threading.Event()

def beat():
    while not stop.is_set():
        time.sleep(0.02)
        ticks.append(time.monotonic())

thread = threading.Thread(target=beat, daemon=True)
thread.start()
time.sleep(0.1)
start, cpu = time.monotonic(), time.process_time()
try:
    grep(sys.argv[2])
    error = ""
except RetriableError as exc:
    error = str(exc)
elapsed, cpu = time.monotonic() - start, time.process_time() - cpu
os.kill(busy, 9)
os.waitpid(busy, 0)
stop.set()
thread.join()
during = [b - a for a, b in zip(ticks, ticks[1:]) if b >= start]
print(json.dumps({"elapsed": elapsed, "cpu": cpu, "ticks": len(during), "error": error}))
"""


@pytest.mark.timeout(70)
def test_catastrophic_pattern_times_out_while_other_threads_keep_running(root: Path) -> None:
    """Bounded-time regression test: the child process is killed if the grep never ends."""
    ws = root / "default"
    ws.mkdir(parents=True)
    (ws / "input.txt").write_text("a" * 64 + "b\n")
    child = subprocess.run(
        [sys.executable, "-c", HEARTBEAT, str(root), CATASTROPHIC],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout)
    assert "timed out" in result["error"]
    # the limit (1.5 s) by the clock: the match ended having had half a core or less (a limit
    # on CPU time would have let it spend 1.5 s of CPU, twice the clock's time on half a core;
    # other load on the machine only lowers the share it gets)
    assert result["cpu"] < 1.35, result
    # the other thread kept running during the match (it ticks every 20 ms while the
    # interpreter lock is free; a match holding the lock would leave it at one tick or none)
    assert result["ticks"] >= 10, result


def test_timeout_is_a_retryable_error_naming_the_limit(ws: Path) -> None:
    (ws / "input.txt").write_text("a" * 64 + "b\n")
    card = WorkspaceTool(workspace_grep=GrepParam(engine="python", timeout_s=0.3))
    with pytest.raises(RetriableError, match=r"timed out after 0\.3 s"):
        tools_of(card)["workspace_grep"](CATASTROPHIC)


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_a_walk_matching_no_include_stops_at_the_deadline(
    ws: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """Attack: an ``include`` matching nothing walked every file below the start whatever
    ``timeout_s`` said (300,000 files, a 0.1 s limit: about 1 s, ripgrep's feed too)."""
    (ws / "many").mkdir()
    for i in range(200):
        (ws / "many" / f"f{i:03d}.txt").write_text("needle\n")
    tested: list[str] = []
    matches = globs.glob_matches

    def spy(pattern: str, rel: str) -> bool:
        tested.append(rel)
        return matches(pattern, rel)

    monkeypatch.setattr(grep_module, "glob_matches", spy)
    if engine == "rg" and grep_module.find_rg() is None:
        pytest.skip("ripgrep (rg) is not installed")
    limit = GrepParam(engine=engine, timeout_s=1e-6)  # type: ignore[arg-type]
    grep = tools_of(WorkspaceTool(workspace_grep=limit))["workspace_grep"]
    with pytest.raises(RetriableError, match="timed out after"):
        grep("needle", "", "*.nomatch")
    assert len(tested) < 200


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_a_walk_past_its_entry_budget_is_cut_and_says_so(
    ws: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """Attack: grep walked every entry below its start (no entry bound, as glob has)."""
    monkeypatch.setattr(grep_module, "MAX_GREP_ENTRIES", 50)
    (ws / "many").mkdir()
    for i in range(120):
        (ws / "many" / f"f{i:03d}.txt").write_text("needle\n")
    lines = grep_tool(engine)("needle").splitlines()
    assert lines[-1] == "[narrowed: visited 50 entries, narrow the path or include]"
    hits = lines[:-1]  # the root's one entry, then 49 of the directory's files, in path order
    assert len(hits) == 49 and hits == sorted(hits)
    assert all(hit.startswith("many/f") and hit.endswith(".txt:1:needle") for hit in hits)


FILES = {
    "a.py": b"import os\nimport sys\n\ndef main():\n    return os.getcwd()\nfoo bar\nfoobaz\n"
    b"a\nb\nimport re  \n",
    "win.txt": b"first line\r\nend here\r\nlast\r\n",
}


def line_by_line(pattern: str) -> list[str]:
    """The oracle: every line of every file searched on its own."""
    import regex

    compiled = regex.compile(pattern)
    out: list[str] = []
    for name, data in sorted(FILES.items()):
        for number, line in enumerate(data.decode().split("\n")[:-1], 1):
            line = line.rstrip("\r")
            if compiled.search(line):
                out.append(f"{name}:{number}:{line}")
    return out or ["No matches found."]


@pytest.mark.parametrize(
    "pattern",
    [r"\Aimport", "^import", "foo(?!bar)", "foo(?! )", r"a\sb", r"a\s*$", r"re\s*\Z", "here$",
     r"(?<!\w)main", "x*", r"[^z]*+s", r"(?>\w+)\s", "^$"],
)  # fmt: skip
def test_whole_file_and_line_by_line_searches_agree(ws: Path, pattern: str) -> None:
    for name, data in FILES.items():
        (ws / name).write_bytes(data)
    grep = tools_of(WorkspaceTool(workspace_grep=GrepParam(engine="python")))["workspace_grep"]
    assert grep(pattern).splitlines() == line_by_line(pattern)


@pytest.mark.parametrize("cap", [1, 2, 200])
def test_files_matched_again_on_the_slow_path_give_the_same_lines(
    ws: Path, monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    """Every file takes the path of a file whose matching outran the caller's slice (matched
    again on a thread of its own): the same lines, and the same cap on them, as the fast path."""
    for name, data in FILES.items():
        (ws / name).write_bytes(data)
    card = WorkspaceTool(workspace_grep=GrepParam(engine="python", max_matches=cap))
    grep = tools_of(card)["workspace_grep"]
    fast = grep("i")
    monkeypatch.setattr(grep_module, "_SLICE", 0.0)
    assert grep("i") == fast
    assert len(fast.splitlines()) >= min(cap, 3)


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_hits_keep_only_the_shown_part_of_a_long_line(
    ws: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """Memory is hits x shown characters, not hits x line length (lines of up to the file cap):
    a hit keeps one character more than is shown, enough to mark the line as cut. The line is
    of 4-byte characters, so ripgrep's preview (in bytes) must still hold them all."""
    (ws / "a.min.js").write_text("needle" + "\U0001f642" * 200_000 + "\n")
    (ws / "b.txt").write_text("a needle\n")
    kept: list[grep_module.GrepHit] = []
    render = grep_module.render

    def spy(hits: list[grep_module.GrepHit], *args: Any) -> str:
        kept.extend(hits)
        return render(hits, *args)

    monkeypatch.setattr(grep_module, "render", spy)
    out = grep_tool(engine)("needle")
    assert [len(hit.text) for hit in kept] == [grep_module.MAX_LINE_CHARS + 1, len("a needle")]
    assert out.splitlines() == [
        "a.min.js:1:needle" + "\U0001f642" * 294 + " [...]",
        "b.txt:1:a needle",
    ]


@pytest.mark.parametrize("slice_s", [grep_module._SLICE, 0.0], ids=["caller", "slow-path"])
def test_a_matching_file_is_searched_without_splitting_it_into_lines(
    ws: Path, monkeypatch: pytest.MonkeyPatch, slice_s: float
) -> None:
    """Attack: the Python engine split a matching file into one string per line (a 19 MiB file
    of short lines: 1 GiB; ``engine="auto"`` sends it a look-behind ripgrep refuses), on the
    caller's thread and on the slow path, which a file whose matching outran its slice takes."""
    data = b"ab\n" * 200_000
    (ws / "many.txt").write_bytes(data)
    monkeypatch.setattr(grep_module, "_SLICE", slice_s)
    grep = grep_tool("python")
    grep("zz", "many.txt")  # imports and compiles outside the count
    tracemalloc.start()
    try:
        out = grep("zz|ab$", "many.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.splitlines()[:2] == ["many.txt:1:ab", "many.txt:2:ab"]
    assert out.splitlines()[-1].startswith("[... more than 200 matches")
    assert peak < 3 * len(data)  # the bytes read and their text; before: 22 and 41 times
