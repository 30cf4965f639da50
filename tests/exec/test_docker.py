"""The docker backend against a fake ``docker`` client that records its argv."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError
from tests.exec.support import sync

from toolcards.core.registry import load_card
from toolcards.core.trust import HostTrust
from toolcards.tools.exec.backends import DockerBackend
from toolcards.tools.exec.backends import docker as docker_mod
from toolcards.tools.exec.backends.docker import DEFAULT_IMAGE
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.limits import ExecLimits

FAKE = """#!/usr/bin/env python3
import json, os, sys, time
log = os.environ.get("FAKE_DOCKER_LOG") or {log!r}
with open(log, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "secret": os.environ.get("SECRET_TOKEN")}}) + "\\n")
if sys.argv[1:2] == ["info"]:
    print("27.0.0")
elif sys.argv[1:2] == ["run"] and "hog" in sys.argv:
    sys.exit(137)
elif sys.argv[1:2] == ["run"] and "sleep" in sys.argv:
    time.sleep(30)
elif sys.argv[1:2] == ["run"]:
    print("ran in container")
"""


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "docker.log"
    script = bindir / "docker"
    script.write_text(FAKE.format(log=str(log)))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    docker_mod._probe.cache_clear()
    yield log
    docker_mod._probe.cache_clear()


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _run_args(log: Path) -> list[str]:
    runs = [c["argv"] for c in _calls(log) if c["argv"][:1] == ["run"]]
    assert len(runs) == 1
    return list(runs[0])  # type: ignore[arg-type]


def test_daemon_probe_uses_docker_info(fake_docker: Path) -> None:
    assert DockerBackend.unavailable_reason() is None
    assert _calls(fake_docker)[0]["argv"][:1] == ["info"]


def test_run_argv_is_locked_down(fake_docker: Path) -> None:
    limits = ExecLimits(memory_bytes=512 << 20, max_processes=64, cpus=1.5)
    tool = ExecTool(mode="docker", limits=limits, docker_image="img:1")
    exec_command = sync(tool.get_tools()[0])
    assert "ran in container" in exec_command("python3 -V")
    argv = _run_args(fake_docker)
    joined = " ".join(argv)
    for expected in (
        "--rm",
        "--network none",
        f"--memory {512 << 20}",
        "--cpus 1.5",
        "--pids-limit 64",
        "--ulimit nofile=64:64",
        "--ulimit msgqueue=0:0",
        "--read-only",
        f"--user {docker_mod.default_user()}",
        "--cap-drop ALL",
        "--workdir /workspace",
        "--security-opt no-new-privileges",
    ):
        assert expected in joined
    assert "--tmpfs" in argv and argv[argv.index("--tmpfs") + 1].startswith("/tmp:")
    mount = argv[argv.index("--mount") + 1]
    assert mount == f"type=bind,source={tool.workspace()},target=/workspace"
    assert argv[-3:] == ["img:1", "python3", "-V"]


def test_network_enabled_uses_bridge(fake_docker: Path) -> None:
    sync(ExecTool(mode="docker", network=True).get_tools()[0])("ls")
    argv = _run_args(fake_docker)
    assert argv[argv.index("--network") + 1] == "bridge"


def test_env_values_never_reach_the_command_line(
    fake_docker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "tok-123")
    monkeypatch.setenv("LANG", "C.UTF-8")
    sync(ExecTool(mode="docker").get_tools()[0])("ls")
    argv = _run_args(fake_docker)
    assert "tok-123" not in " ".join(argv)
    assert "SECRET_TOKEN" not in argv
    assert "LANG" in argv
    run_call = next(c for c in _calls(fake_docker) if c["argv"][:1] == ["run"])
    assert run_call["secret"] is None


def test_option_injection_lands_after_the_image(fake_docker: Path) -> None:
    sync(ExecTool(mode="docker", docker_image="img").get_tools()[0])("ls --privileged -v /:/host")
    argv = _run_args(fake_docker)
    image_at = argv.index("img")
    assert "--privileged" not in argv[:image_at]
    assert argv[image_at + 1 :] == ["ls", "--privileged", "-v", "/:/host"]


@pytest.mark.parametrize(
    "image", ["--volume=/:/host", "--network=host", "-v", "--privileged", "img --rm", ""]
)
def test_an_image_that_is_no_image_reference_is_refused(image: str) -> None:
    """``docker run`` reads a value in the image's place that starts with '-' as its own option
    (the last ``--network`` wins over the backend's ``--network none``): refused on the card
    (a spec or a card file, before any command) and on the backend."""
    with pytest.raises(ValueError, match="must be an image reference"):
        load_card({"type": "ExecTool", "mode": "docker", "docker_image": image})
    with pytest.raises(ValueError, match="must be an image reference"):
        DockerBackend(image=image)


@pytest.mark.parametrize(
    "image", ["alpine", "python:3.12-slim", "ghcr.io/org/img:1.2", "img@sha256:" + "a" * 64]
)
def test_image_references_are_taken(image: str) -> None:
    assert DockerBackend(image=image).image == image


@pytest.mark.parametrize(
    "image", ["10.0.0.5:5000/evil:latest", "127.0.0.1:5000/x", "corp.example/private/app:prod"]
)
def test_a_card_from_data_runs_only_an_image_the_host_granted(
    fake_docker: Path, image: str
) -> None:
    """The daemon pulls the image from the registry it names (with the host's registry logins)
    and runs it on the workspace: from data, refused before any docker call unless granted."""
    data = {"type": "ExecTool", "mode": "docker", "docker_image": image}
    with pytest.raises(ValidationError, match=r"ExecTool\.docker_image .*HostTrust\(execution="):
        load_card(data)
    assert not fake_docker.exists()
    sync(load_card(data, trust=HostTrust(execution=[image])).get_tools()[0])("ls")
    assert _run_args(fake_docker)[-2:] == [image, "ls"]


@pytest.mark.parametrize("image", [{}, {"docker_image": DEFAULT_IMAGE}], ids=["unset", "named"])
def test_a_card_from_data_runs_the_default_image_without_a_grant(
    fake_docker: Path, image: dict[str, str]
) -> None:
    sync(load_card({"type": "ExecTool", "mode": "docker", **image}).get_tools()[0])("ls")
    assert _run_args(fake_docker)[-2:] == [DEFAULT_IMAGE, "ls"]


def test_timeout_kills_the_container(fake_docker: Path) -> None:
    out = sync(ExecTool(mode="docker", timeout_s=1, allowed_commands=["sleep"]).get_tools()[0])(
        "sleep 100"
    )
    assert "killed: timeout" in out
    name = _run_args(fake_docker)[_run_args(fake_docker).index("--name") + 1]
    assert ["kill", name] in [c["argv"] for c in _calls(fake_docker)]


def test_root_user_is_refused() -> None:
    with pytest.raises(ValueError, match="never runs commands as root"):
        DockerBackend(user="0:0")


def test_no_daemon_means_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    docker_mod._probe.cache_clear()
    try:
        assert "not installed" in (DockerBackend.unavailable_reason() or "")
    finally:
        docker_mod._probe.cache_clear()


def test_default_user_is_never_root() -> None:
    user = docker_mod.default_user()
    assert user.split(":")[0] != "0"
    assert user == ("65534:65534" if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}")


def test_container_oom_kill_is_reported_as_memory(fake_docker: Path) -> None:
    out = sync(ExecTool(mode="docker").get_tools()[0])("python3 hog")
    assert "exit_code: 137" in out and "killed: memory" in out
