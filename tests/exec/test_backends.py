"""Backends as units: bwrap argv, seatbelt profile, and the fail-closed choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcards.tools.exec import backends
from toolcards.tools.exec.backends import (
    BackendUnavailable,
    BwrapBackend,
    LocalBackend,
    SandboxSpec,
    SeatbeltBackend,
    select_backend,
)
from toolcards.tools.exec.backends.seatbelt import profile
from toolcards.tools.exec.limits import ExecLimits


def _spec(tmp_path: Path, network: bool = False) -> SandboxSpec:
    return SandboxSpec(workspace=tmp_path, env={"LANG": "C"}, network=network, limits=ExecLimits())


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_bwrap_isolates_namespaces(tmp_path: Path) -> None:
    argv = BwrapBackend().argv(["true"], _spec(tmp_path))
    for flag in ("--unshare-all", "--die-with-parent"):
        assert flag in argv
    assert "--share-net" not in argv
    assert argv[argv.index("--cap-drop") : argv.index("--cap-drop") + 2] == ["--cap-drop", "ALL"]


def test_bwrap_shares_network_only_when_enabled(tmp_path: Path) -> None:
    argv = BwrapBackend().argv(["true"], _spec(tmp_path, network=True))
    assert argv.index("--share-net") > argv.index("--unshare-all")


def test_bwrap_binds_workspace_rw_and_chdirs(tmp_path: Path) -> None:
    argv = BwrapBackend().argv(["true"], _spec(tmp_path))
    assert (str(tmp_path), "/workspace") in _pairs(argv, "--bind")
    assert argv[argv.index("--chdir") + 1] == "/workspace"
    assert "/tmp" in [argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"]


def test_bwrap_system_view_is_read_only_and_minimal(tmp_path: Path) -> None:
    argv = BwrapBackend().argv(["true"], _spec(tmp_path))
    rw_targets = [dst for _, dst in _pairs(argv, "--bind")]
    assert rw_targets == ["/workspace"]
    ro_sources = [src for src, _ in _pairs(argv, "--ro-bind")]
    assert "/usr" in ro_sources or "/usr" in argv
    for forbidden in ("/etc/shadow", "/root", "/home", "/etc", "/", "/etc/ssl", "/etc/pki"):
        assert forbidden not in ro_sources
    assert "/etc/resolv.conf" not in ro_sources


def test_bwrap_command_follows_double_dash(tmp_path: Path) -> None:
    argv = BwrapBackend().argv(["--bind", "/", "/x"], _spec(tmp_path))
    end = argv.index("--")
    assert argv[end + 1 :] == ["--bind", "/", "/x"]
    assert ("/", "/x") not in _pairs(argv[:end], "--bind")


def test_bwrap_launch_sets_home_and_keeps_only_given_env(tmp_path: Path) -> None:
    launch = BwrapBackend().launch(["true"], _spec(tmp_path))
    assert launch.env["HOME"] == "/workspace"
    assert set(launch.env) == {"LANG", "HOME", "TMPDIR", "PWD", "PATH"}


def test_seatbelt_profile_denies_by_default_without_network() -> None:
    text = profile(network=False)
    assert text.startswith("(version 1)\n(deny default)")
    assert "network" not in text
    assert '(subpath (param "WORKSPACE"))' in text
    assert "/Users" not in text


def test_seatbelt_profile_allows_network_when_enabled() -> None:
    assert "(allow network*)" in profile(network=True)


def test_seatbelt_argv_passes_paths_as_parameters(tmp_path: Path) -> None:
    weird = tmp_path / 'ws") (allow default'
    spec = SandboxSpec(workspace=weird, env={}, network=False, limits=ExecLimits())
    argv = SeatbeltBackend().argv(["ls", "-la"], spec, "/tmp/t")
    assert argv[1:3] == ["-p", profile(network=False)]
    assert "(allow default" not in argv[2]
    assert argv[argv.index("-D") + 1] == f"WORKSPACE={weird}"
    assert argv[-2:] == ["ls", "-la"]


def test_seatbelt_unavailable_off_macos() -> None:
    reason = SeatbeltBackend.unavailable_reason()
    assert reason is None or "macOS" in reason or "PATH" in reason


def test_auto_fails_closed_when_nothing_isolates(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (backends.BwrapBackend, backends.DockerBackend, backends.SeatbeltBackend):
        monkeypatch.setattr(cls, "unavailable_reason", classmethod(lambda c: "missing"))
    with pytest.raises(BackendUnavailable, match="never falls back") as info:
        select_backend("auto")
    assert "mode='local'" in str(info.value)


def test_auto_never_picks_local(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "local" not in backends.auto_order("linux")
    assert "local" not in backends.auto_order("darwin")
    assert backends.auto_order("darwin")[0] == "seatbelt"
    assert backends.auto_order("linux")[0] == "bwrap"


def test_explicit_unavailable_mode_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends.BwrapBackend, "unavailable_reason", classmethod(lambda c: "gone"))
    with pytest.raises(BackendUnavailable, match="'bwrap' is unavailable: gone"):
        select_backend("bwrap")


def test_unknown_mode_raises() -> None:
    with pytest.raises(BackendUnavailable, match="unknown exec mode"):
        select_backend("chroot")  # type: ignore[arg-type]


def test_local_only_when_explicit_and_says_unconfined() -> None:
    chosen = select_backend("local")
    assert isinstance(chosen, LocalBackend)
    assert not chosen.isolating
    assert "UNCONFINED" in chosen.describe(network=False)


def test_bwrap_etc_view_comes_back_after_tmp_cleaning(tmp_path: Path) -> None:
    import shutil

    from toolcards.tools.exec.backends import etc_view

    first = etc_view.etc_view(network=False)
    shutil.rmtree(first)
    etc_view._VIEWS[False].checked = 0.0  # skip the recheck interval
    argv = BwrapBackend().argv(["true"], _spec(tmp_path))
    staged = next(src for src, dst in _pairs(argv, "--ro-bind") if dst == "/etc")
    assert (Path(staged) / "passwd").read_text().startswith("root:x:0:0:sandbox:/workspace:")


def test_bwrap_etc_view_holds_only_listed_files() -> None:
    from toolcards.tools.exec.backends.etc_view import etc_view

    staged = etc_view(network=False)
    names = {p.name for p in staged.iterdir()}
    assert {"passwd", "group", "ld.so.cache"} <= names
    assert not names & {"shadow", "gshadow", "sudoers", "ssh", "resolv.conf"}
    assert not (staged / "ssl" / "private").exists()
    assert "resolv.conf" in {p.name for p in etc_view(network=True).iterdir()}
