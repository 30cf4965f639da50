"""The suite's fork server (:mod:`support.zygote`) forks a process only where the fork is the
process the test asked for; which toolcards a child imports is one of those conditions."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import toolcards
from support.zygote import Request, _differs, own_context

SRC = Path(toolcards.__file__).resolve().parents[1]


def _python(tmp_path: Path, *path: Path) -> Request:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    return Request("python", sys.executable, ["-c", "pass"], str(tmp_path), env, [], [],
                   own_context())  # fmt: skip


def _another_toolcards(folder: Path) -> Path:
    (folder / "toolcards").mkdir(parents=True)
    (folder / "toolcards" / "__init__.py").write_text("")
    return folder


def _why(request: Request) -> str | None:
    server_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return _differs(request, own_context(), server_env)


def test_this_checkouts_source_on_the_path_is_the_toolcards_already_imported(
    tmp_path: Path,
) -> None:
    assert _why(_python(tmp_path, SRC)) is None
    link = tmp_path / "src-link"
    link.symlink_to(SRC, target_is_directory=True)
    assert _why(_python(tmp_path, link)) is None


@pytest.mark.parametrize("first", ["other", "this"])
def test_the_first_toolcards_on_the_path_decides(tmp_path: Path, first: str) -> None:
    other = _another_toolcards(tmp_path / "clone" / "src")
    path = (other, SRC) if first == "other" else (SRC, other)
    expected = "a toolcards of its own" if first == "other" else None
    assert _why(_python(tmp_path, *path)) == expected


def test_a_toolcards_in_the_working_directory_of_a_c_program_is_its_own(tmp_path: Path) -> None:
    _another_toolcards(tmp_path)
    assert _why(_python(tmp_path, SRC)) == "a toolcards of its own"
