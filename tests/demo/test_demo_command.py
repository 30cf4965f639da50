"""`python -m toolcards.demo` as a newcomer runs it: one line for every problem they can fix,
no banner, the workspace files listed, and next steps that work as printed (its ``main`` in
process; on a terminal and under a read-only mount, the real command)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cli import InProcessCli
from support.launch import PYTHON
from support.newcomer import held_store, on_a_terminal
from toolcards.demo.__main__ import main
from toolcards.demo.state import STORE, mark_complete

NO_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TOOLCARDS_WORKSPACES_ROOT")


def demo_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NO_KEYS}
    env.update(COLUMNS="120", PYTHONPATH=os.pathsep.join(sys.path), **extra)
    return env


def demo(cwd: Path, *args: str, wrap: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(wrap or []), PYTHON, "-m", "toolcards.demo", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=demo_env(),
    )


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


class Demo:
    """``python -m toolcards.demo ARGS`` run by its ``main`` in this process, in ``cwd``,
    without the providers' keys, on a terminal 120 columns wide (as :func:`demo` runs it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.monkeypatch = monkeypatch
        self.capsys = capsys

    def __call__(self, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        self.capsys.readouterr()
        with self.monkeypatch.context() as patch:
            for name in NO_KEYS:
                patch.delenv(name, raising=False)
            for name, value in {"COLUMNS": "120", **env}.items():
                patch.setenv(name, value)
            patch.chdir(cwd)
            code = main(list(args))
        said = self.capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, said.out, said.err)


@pytest.fixture
def demo_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Demo:
    return Demo(monkeypatch, capsys)


def test_a_real_model_without_its_key_is_one_line_and_creates_nothing(
    tmp_path: Path, demo_here: Demo
) -> None:
    line = one_line(demo_here(tmp_path, "--model", "openai:gpt-4o"), 2)
    assert "OPENAI_API_KEY" in line and "leave out --model" in line
    assert not (tmp_path / ".toolcards-demo").exists()


def test_a_missing_provider_package_names_the_extra(
    tmp_path: Path, demo_here: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("openai", "pydantic_ai.models.openai"):  # as if openai were not installed
        monkeypatch.setitem(sys.modules, name, None)
    done = demo_here(tmp_path, "--model", "openai:gpt-4o", OPENAI_API_KEY="sk-not-used")
    line = one_line(done, 2)
    assert "pip install 'toolcards[openai]'" in line


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["a-file", "/proc/self/demo-state", "/sys/demo-state"])
def test_an_unusable_state_location_is_one_line(
    tmp_path: Path, where: str, demo_here: Demo
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    line = one_line(demo_here(tmp_path, "--state", where), 1)
    assert where.split("/")[-1] in line and "--state" in line


@pytest.mark.timeout(120)
@pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bwrap for a read-only mount")
def test_a_read_only_state_directory_is_one_line(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    wrap = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(frozen), str(frozen)]
    line = one_line(demo(tmp_path, "--state", str(frozen), wrap=wrap), 1)
    assert str(frozen) in line and "not writable" in line


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Path]:
    """A state directory whose store another process holds open."""
    state = tmp_path / "state"
    state.mkdir()
    with held_store(state / "team.db", "release-team"):
        yield state


@pytest.mark.timeout(120)
def test_a_store_locked_by_another_process_is_one_line(
    tmp_path: Path, held: Path, demo_here: Demo
) -> None:
    line = one_line(demo_here(tmp_path, "--state", str(held)), 1)
    assert "in use by another process" in line and str(held) in line
    assert (held / "team.db").exists()  # nothing of the other process was touched
    line = one_line(demo_here(tmp_path, "--state", str(held), "--fresh"), 1)
    assert "in use by another process" in line


@pytest.mark.timeout(300)
def test_first_output_on_a_terminal_is_the_job_not_a_banner(tmp_path: Path) -> None:
    env = {k: v for k, v in demo_env().items() if k not in ("PYTEST_VERSION", "CI")}
    text = on_a_terminal([PYTHON, "-m", "toolcards.demo"], tmp_path, env, columns=120)
    assert text.lstrip().lstrip("─ ").startswith("toolcards main job"), text[:400]
    assert "pydantic-ai v" not in text and "PYDANTIC_AI_NO_BANNER" not in text


@pytest.mark.timeout(300)
def test_default_state_lists_the_workspace_files_and_next_steps_work(
    tmp_path: Path, demo_here: Demo, toolcards_cli: InProcessCli
) -> None:
    done = demo_here(tmp_path)
    assert done.returncode == 0, done.stderr
    files = done.stdout.split("Workspace files", 1)[1].split("Audit trail", 1)[0]
    assert "notes/RELEASE.md" in files and "release/NOTES.md" in files
    assert "(none)" not in files
    steps = done.stdout.split("Next steps", 1)[1]
    for text in ("--fresh", "make run", ".toolcards-demo/", "serve --config", "dashboard --store"):
        assert text in steps, steps
    serve = next(line.strip() for line in steps.splitlines() if " serve --config " in line)
    env_part, _, command = serve.partition(" ")
    root = env_part.removeprefix("TOOLCARDS_WORKSPACES_ROOT=")
    config = command.split("--config ", 1)[1]

    # The served config is the job's team: the notes the engineer wrote, the plan the lead made.
    def call(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"TOOLCARDS_WORKSPACES_ROOT": root, "OPENAI_API_KEY": None}
        return toolcards_cli("call", *args, "--config", config, cwd=tmp_path, env=env)

    notes = call("workspace_read", "path=notes/RELEASE.md")
    assert notes.returncode == 0, notes.stderr
    assert "Release notes (Final)" in notes.stdout
    plan = call("search_planning")
    assert plan.returncode == 0, plan.stderr
    assert "Draft the release notes" in plan.stdout
    again = demo_here(tmp_path)
    assert again.returncode == 0 and "resumed from the SQLite store" in again.stdout


@pytest.mark.parametrize(
    ("first_run_done", "said"),
    [
        (True, "interrupted; run it again to resume (or --fresh to start over)"),
        (False, "interrupted before the team was set up; run it again to start over"),
    ],
)
def test_ctrl_c_is_one_line_saying_what_running_it_again_does(
    tmp_path: Path,
    demo_here: Demo,
    monkeypatch: pytest.MonkeyPatch,
    first_run_done: bool,
    said: str,
) -> None:
    """(before: a KeyboardInterrupt traceback)"""
    import toolcards.demo.__main__ as entry

    def interrupted(state: Path, model: str | None = None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(entry, "run_job", interrupted)
    state = tmp_path / ".toolcards-demo"
    if first_run_done:  # what a finished first run leaves: its store and its marker
        state.mkdir()
        (state / STORE).touch()
        mark_complete(state)
    try:
        done = demo_here(tmp_path)
    except KeyboardInterrupt:  # as a failure of this test, not the end of the session
        pytest.fail("Ctrl-C went through main() as a traceback")
    assert one_line(done, 130) == said
