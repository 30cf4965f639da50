"""The allowlist names first programs only; the sandbox is the boundary (and says so)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.exec.support import RUNNABLE, needs_bwrap, tools_of

from toolcards.core.errors import RetriableError
from toolcards.tools.exec.card import ExecTool


def _exec(mode: str, allowed: list[str] | None) -> dict[str, object]:
    return tools_of(ExecTool(mode=mode, limits=RUNNABLE, allowed_commands=allowed))


def test_env_sh_is_refused_when_env_is_not_listed() -> None:
    with pytest.raises(RetriableError, match="'env' is not allowed"):
        _exec("local", ["cat", "ls"])["exec_command"]("env sh -c 'echo hi'")  # type: ignore[operator]


def test_env_sh_runs_a_shell_when_env_is_listed() -> None:
    """The allowlist does not follow what a started program starts in turn."""
    out = _exec("local", ["env"])["exec_command"]("env sh -c 'echo $((6*7))'")  # type: ignore[operator]
    assert "42" in str(out)


@needs_bwrap
@pytest.mark.parametrize(
    "command",
    [
        "env sh -c 'touch {outside}/escaped; cat /etc/shadow; echo shell-ran'",
        r"find . -maxdepth 0 -exec sh -c 'touch {outside}/escaped; echo shell-ran' ;",
    ],
)
def test_a_shell_reached_through_a_listed_program_stays_in_the_sandbox(
    command: str, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    run = _exec("bwrap", ["env", "find"])["exec_command"]
    out = str(run(command.format(outside=outside)))  # type: ignore[operator]
    assert "shell-ran" in out
    assert not (outside / "escaped").exists()
    assert "root:" not in out


def test_description_states_what_the_allowlist_means() -> None:
    doc = ExecTool(mode="local", limits=RUNNABLE, allowed_commands=["pytest"]).get_tools()[0]
    text = " ".join((doc.__doc__ or "").split())
    assert "Allowed: pytest (the program a command starts with;" in text
    assert "no shell" not in text.lower()


@needs_bwrap
def test_the_sandbox_init_shows_no_host_path(workspaces: Path) -> None:
    run = _exec("bwrap", ["cat"])["exec_command"]
    out = str(run("cat /proc/1/cmdline"))  # type: ignore[operator]
    assert "bwrap" in out  # the sandbox's first process is bwrap's init
    assert str(workspaces) not in out
    assert "toolcards-bwrap-etc" not in out and "--bind" not in out
