"""Exec backends registered by name: by a host program, or by an installed distribution."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import ValidationError
from tests.exec.support import RUNNABLE, tools_of

from toolcards.tools.exec.backends import (
    ENTRY_POINT_GROUP,
    LocalBackend,
    SandboxSpec,
    known_modes,
    register_backend,
    unregister_backend,
)
from toolcards.tools.exec.backends.base import DEFAULT_PATH
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.launch import Launch


class TaggingBackend(LocalBackend):
    """Runs commands on the host through ``env``, adding a variable that proves the route."""

    name: ClassVar[str] = "tagging"

    def launch(self, argv: Sequence[str], spec: SandboxSpec) -> Launch:
        env = {**spec.env, "PATH": DEFAULT_PATH}
        return Launch(argv=["env", "RAN_THROUGH=tagging", *argv], env=env, cwd=str(spec.workspace))


@pytest.fixture
def tagging() -> Iterator[str]:
    register_backend("tagging", TaggingBackend)
    yield "tagging"
    unregister_backend("tagging")


def test_registered_backend_runs_commands(tagging: str) -> None:
    out = tools_of(ExecTool(mode=tagging, limits=RUNNABLE, allowed_commands=["env"]))[
        "exec_command"
    ]("env")
    assert "RAN_THROUGH=tagging" in out and "exit_code: 0" in out


def test_registered_name_round_trips_through_json(tagging: str) -> None:
    card = ExecTool(mode=tagging)
    assert ExecTool.model_validate_json(card.model_dump_json()).mode == tagging
    assert tagging in known_modes()


def test_unknown_mode_is_refused_listing_known_backends() -> None:
    with pytest.raises(ValidationError) as info:
        ExecTool(mode="e2b")
    message = str(info.value)
    assert "unknown exec mode 'e2b'" in message
    for name in ("auto", "bwrap", "docker", "local", "seatbelt"):
        assert name in message


def test_a_dotted_path_in_card_data_is_never_imported(tmp_path: Path) -> None:
    (tmp_path / "canary_exec_mod.py").write_text("import sys\nsys.canary_imported = True\n")
    sys.path.insert(0, str(tmp_path))
    try:
        for mode in ("canary_exec_mod:Backend", "canary_exec_mod.Backend", "canary_exec_mod"):
            with pytest.raises(ValidationError, match="unknown exec mode"):
                ExecTool.model_validate({"mode": mode})
    finally:
        sys.path.remove(str(tmp_path))
    assert "canary_exec_mod" not in sys.modules
    assert not hasattr(sys, "canary_imported")


def test_taken_names_need_replace(tagging: str) -> None:
    class Other(TaggingBackend):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_backend(tagging, Other)
    register_backend(tagging, Other, replace=True)


@pytest.mark.parametrize("bad", ["auto", "", "has space", "-x", "a/b"])
def test_bad_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a valid exec backend name"):
        register_backend(bad, TaggingBackend)


def test_only_backend_classes_register() -> None:
    with pytest.raises(TypeError, match="Backend subclass"):
        register_backend("notabackend", object)  # type: ignore[arg-type]


def _distribution(root: Path, name: str, module: str, target: str) -> None:
    """A minimal installed distribution: a module and a dist-info with an entry point."""
    (root / f"{module}.py").write_text(
        textwrap.dedent(
            f"""
            from tests.exec.test_registry import TaggingBackend

            class {target}(TaggingBackend):
                name = "{name}"
            """
        )
    )
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {module}:{target}\n")


def test_entry_point_backend_is_found_by_name(tmp_path: Path) -> None:
    _distribution(tmp_path, "fromplugin", "toolcards_test_exec_plugin", "PluginBackend")
    sys.path.insert(0, str(tmp_path))
    try:
        assert "fromplugin" in known_modes()
        out = tools_of(ExecTool(mode="fromplugin", limits=RUNNABLE, allowed_commands=["env"]))[
            "exec_command"
        ]("env")
    finally:
        sys.path.remove(str(tmp_path))
        unregister_backend("fromplugin")
        sys.modules.pop("toolcards_test_exec_plugin", None)
    assert "RAN_THROUGH=tagging" in out


def test_entry_point_that_is_not_a_backend_is_refused(tmp_path: Path) -> None:
    (tmp_path / "toolcards_test_bad_plugin.py").write_text("NotABackend = 42\n")
    info = tmp_path / "toolcards_test_bad_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nbadplugin = toolcards_test_bad_plugin:NotABackend\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ValidationError, match="is not a Backend"):
            ExecTool(mode="badplugin")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("toolcards_test_bad_plugin", None)
