"""The command line loads what a command needs: ``toolcards list`` and a governed ``toolcards
call`` of a planning tool (real processes on a copy of examples/team) never import
pydantic-ai, which alone costs the CLI about a second per command; a call forwarded to a
running ``toolcards serve`` loads neither typer, pydantic, rich, YAML, the runtime nor a card.

What a fresh process imports is the subject, so every command is a real process; the tests
that ask about one command line share its one run (:func:`listed`, :func:`called`), and the
forwarded commands share one server (:func:`served`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cli import EXAMPLE_STATE
from support.launch import REAL_TOOLCARDS
from support.scripted import wait_until
from surfaces.surface_support import SURFACE_ENV, HttpServer
from toolcards.surfaces.cli.control import find_server

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "team"


def _copy(folder: Path) -> Path:
    copy = folder / "team"
    shutil.copytree(EXAMPLE, copy, ignore=EXAMPLE_STATE)
    return copy / "toolcards.yaml"


@pytest.fixture
def team(tmp_path: Path) -> Path:
    return _copy(tmp_path)


def imported(config: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The finished command and the modules it imported (``python -X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(REAL_TOOLCARDS), *args, "-c", str(config)],
        env=SURFACE_ENV,
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return done, modules


Run = tuple[subprocess.CompletedProcess[str], set[str]]
CREATE = json.dumps({"create": [{"description": "Stay fast"}]})


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``toolcards list`` on a copy of the team, and what it imported."""
    return imported(_copy(tmp_path_factory.mktemp("listed")), "list")


@pytest.fixture(scope="module")
def called(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``toolcards call update_planning --args CREATE`` on a copy of the team (its first
    task), and what it imported."""
    team = _copy(tmp_path_factory.mktemp("called"))
    return imported(team, "call", "update_planning", "--args", CREATE)


def _pydantic_ai(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m == "pydantic_ai" or m.startswith("pydantic_ai."))


def test_list_does_not_import_pydantic_ai(listed: Run) -> None:
    done, modules = listed
    assert done.returncode == 0, done.stderr[-2000:]
    assert "update_planning" in done.stdout
    assert _pydantic_ai(modules) == []


def test_a_planning_call_does_not_import_pydantic_ai(called: Run) -> None:
    done, modules = called
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "created ids: [1]"
    assert _pydantic_ai(modules) == []


def test_a_planning_call_with_key_value_pairs_does_not_import_pydantic_ai(team: Path) -> None:
    # the pairs are typed by the tool's argument types: a JSON array for create, an integer
    # for get_planning_task's id (given as text, it would fail validation)
    create = "create=" + json.dumps([{"description": "Typed pairs"}])
    done, modules = imported(team, "call", "update_planning", create)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "created ids: [1]"
    assert _pydantic_ai(modules) == []
    done, modules = imported(team, "call", "get_planning_task", "id=1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Typed pairs" in done.stdout
    assert _pydantic_ai(modules) == []


def test_invalid_arguments_of_a_planning_call_do_not_import_pydantic_ai(team: Path) -> None:
    bad = json.dumps({"create": [{"title": "no description"}]})
    done, modules = imported(team, "call", "update_planning", "--args", bad)
    assert done.returncode == 4
    assert "invalid arguments for update_planning: create.0.description" in done.stderr
    assert _pydantic_ai(modules) == []


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the team's config with a real ``toolcards serve`` on it (the CLI forwards
    to it; of the commands forwarded, only the call of update_planning creates a task)."""
    team = _copy(tmp_path_factory.mktemp("served"))
    server = HttpServer(team)
    try:
        assert wait_until(lambda: find_server(team) is not None, timeout=60)
        yield team
    finally:
        server.stop()


_FORWARDING_NEEDS_NONE = {"typer", "pydantic", "pydantic_core", "rich", "yaml"}


def test_a_forwarded_call_loads_neither_typer_pydantic_rich_nor_yaml(served: Path) -> None:
    create = json.dumps({"create": [{"description": "Forwarded"}]})
    done, modules = imported(served, "call", "update_planning", "--args", create)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "created ids: [1]"
    assert {m.partition(".")[0] for m in modules} & _FORWARDING_NEEDS_NONE == set()


def test_a_forwarded_list_loads_neither_typer_pydantic_rich_nor_yaml(served: Path) -> None:
    done, modules = imported(served, "list")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "update_planning\t" in done.stdout
    assert {m.partition(".")[0] for m in modules} & _FORWARDING_NEEDS_NONE == set()


def test_a_forwarded_command_loads_no_card_nor_the_runtime(served: Path) -> None:
    done, modules = imported(served, "call", "search_planning", "--args", "{}")
    assert done.returncode == 0, done.stderr[-2000:]
    ours = {m for m in modules if m.startswith("toolcards.")}
    heavy = {m for m in ours if m.split(".")[1] in {"tools", "runtime", "governance", "stores"}}
    assert heavy == set()
    assert "toolcards.surfaces.config" not in ours


_MEMBERS_AND_DEFERRED = {
    "toolcards.runtime.deferred",
    "toolcards.runtime.member_actor",
    "toolcards.runtime.profiles",
}


def test_list_loads_neither_deferred_results_nor_agent_members(listed: Run) -> None:
    done, modules = listed
    assert done.returncode == 0, done.stderr[-2000:]
    assert modules & _MEMBERS_AND_DEFERRED == set()


def test_a_planning_call_loads_neither_deferred_results_nor_agent_members(called: Run) -> None:
    done, modules = called
    assert done.returncode == 0, done.stderr[-2000:]
    assert modules & _MEMBERS_AND_DEFERRED == set()


def test_list_and_a_call_without_a_telemetry_provider_do_not_import_opentelemetry(
    listed: Run, called: Run
) -> None:
    for command, (done, modules) in {"list": listed, "call": called}.items():
        assert done.returncode == 0, done.stderr[-2000:]
        assert {m for m in modules if m.partition(".")[0] == "opentelemetry"} == set(), command


def _pydantic_imports_asyncio() -> bool:
    """Whether importing pydantic alone imports asyncio (pydantic 2.12.0's core does, through
    typing_extensions' ``deprecated``): then no command that validates with pydantic avoids it."""
    probe = "import sys, pydantic; print('asyncio' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() == "True"


def test_list_does_not_import_asyncio(listed: Run) -> None:
    if _pydantic_imports_asyncio():
        pytest.skip("this pydantic imports asyncio itself")
    done, modules = listed
    assert done.returncode == 0, done.stderr[-2000:]
    assert "asyncio" not in modules


_SERVER_PACKAGES = {"uvicorn", "starlette", "httpx", "mcp", "pydantic_ai"}
_NOT_ON_THE_PATH = {
    # the workspace tools' file operations: imported when a workspace tool runs
    "toolcards.tools.workspace.ops",
    "toolcards.tools.workspace.grep",
    "toolcards.tools.workspace.patch",
    "toolcards.tools.workspace.edits",
}


@pytest.mark.parametrize("command", ["list", "call"])
def test_list_and_a_planning_call_load_no_server_package_nor_file_operations(
    listed: Run, called: Run, command: str
) -> None:
    done, modules = listed if command == "list" else called
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("update_planning\t" if command == "list" else "created ids: [1]") in done.stdout
    assert {m.partition(".")[0] for m in modules} & _SERVER_PACKAGES == set()
    assert modules & _NOT_ON_THE_PATH == set()
