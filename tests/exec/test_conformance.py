"""The containment suite, run on every backend that works on this host.

Isolation items (filesystem, network, other processes) run on isolating backends only;
``local`` is unconfined by design and runs only the limit items (env scrubbing, process cap,
timeout with children, bounded output), clearly marked as such.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.exec.support import (
    BWRAP_REASON,
    PROCESS_CAP,
    assert_none_left,
    needs_process_cap,
    tools_of,
)

from toolcards.tools.exec.backends import DockerBackend
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.limits import ExecLimits

DOCKER_REASON = DockerBackend.unavailable_reason()
ISOLATING = [
    pytest.param(
        "docker",
        marks=pytest.mark.skipif(DOCKER_REASON is not None, reason=f"docker: {DOCKER_REASON}"),
    ),
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP_REASON is not None, reason=f"bwrap: {BWRAP_REASON}")
    ),
]
ALL = [*ISOLATING, pytest.param("local", id="local-limits-only")]
SHELL = ["sh", "python3", "cat", "ls", "touch", "env", "head", "sleep"]
LIMITS = ExecLimits(
    max_processes=48 if PROCESS_CAP != "none" else None, memory_bytes=512 << 20, output_bytes=4096
)

Exec = Callable[[str], str]


def _exec(mode: str, **kw: object) -> Exec:
    settings: dict[str, object] = {"timeout_s": 10, "allowed_commands": SHELL, "limits": LIMITS}
    settings.update(kw)
    tool = ExecTool(mode=mode, **settings)  # type: ignore[arg-type]
    return tools_of(tool)["exec_command"]


@pytest.mark.parametrize("mode", ISOLATING)
def test_cannot_write_outside_the_workspace(mode: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    out = _exec(mode)(f"sh -c 'touch {outside}/escaped; touch /usr/escaped; echo done'")
    assert "done" in out
    assert not (outside / "escaped").exists()
    assert not Path("/usr/escaped").exists()


@pytest.mark.parametrize("mode", ISOLATING)
def test_workspace_is_writable_and_shared_with_the_host(mode: str, workspaces: Path) -> None:
    if mode == "docker" and os.getuid() == 0:
        pytest.skip("docker runs as nobody when the host user is root: root's files stay read-only")
    out = _exec(mode, workspace_id="shared")("sh -c 'echo hi > note.txt && pwd'")
    assert "exit_code: 0" in out
    assert (workspaces / "shared" / "note.txt").read_text() == "hi\n"


@pytest.mark.parametrize("mode", ISOLATING)
def test_cannot_read_root_home_or_shadow(mode: str) -> None:
    run = _exec(mode)
    shadow = run("cat /etc/shadow")
    assert "exit_code: 0" not in shadow and "root:" not in shadow
    assert "exit_code: 0" not in run("ls /root")
    assert "exit_code: 0" not in run("ls /home")
    assert "exit_code: 0" not in run("ls /etc/ssl/private")


@pytest.mark.parametrize("mode", ISOLATING)
def test_cannot_see_host_processes(mode: str) -> None:
    out = _exec(mode)(f"cat /proc/{os.getpid()}/environ")
    assert "exit_code: 0" not in out


@pytest.mark.parametrize("mode", ISOLATING)
def test_cannot_connect_to_a_local_listener(mode: str) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.5)
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('IN')"
        out = _exec(mode)(f'python3 -c "{code}"')
        assert "IN" not in out.split("stderr")[0]
        with pytest.raises(TimeoutError):
            server.accept()


@pytest.mark.parametrize("mode", ISOLATING)
def test_network_flag_opens_the_network(mode: str) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('IN')"
        out = _exec(mode, network=True)(f'python3 -c "{code}"')
        assert "IN" in out


@pytest.mark.parametrize("mode", ALL)
def test_secret_env_var_is_not_visible(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLCARDS_SECRET_API_KEY", "sk-do-not-leak")
    out = _exec(mode)("env")
    assert "exit_code: 0" in out
    assert "sk-do-not-leak" not in out and "TOOLCARDS_SECRET_API_KEY" not in out


@pytest.mark.parametrize("mode", ALL)
def test_allowlisted_env_var_passes(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLCARDS_VISIBLE", "yes-visible")
    out = _exec(mode, env_allow=["TOOLCARDS_VISIBLE"])("env")
    assert "TOOLCARDS_VISIBLE=yes-visible" in out


@needs_process_cap
@pytest.mark.parametrize("mode", ALL)
def test_fork_bomb_is_contained(mode: str, marker: str) -> None:
    out = _exec(mode, timeout_s=3)(f"sh -c 'f(){{ f|f& }}; f; sleep {marker}' bomb")
    assert "exit_code" in out
    assert_none_left(marker)
    assert_none_left("f|f&")


@pytest.mark.parametrize("mode", ALL)
def test_timeout_kills_the_command_and_its_children(mode: str, marker: str) -> None:
    code = (
        "import os, subprocess, time; "
        f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True); "
        f"subprocess.Popen(['sleep', '{marker}']); time.sleep(60)"
    )
    out = _exec(mode, timeout_s=1.5)(f'python3 -c "{code}"')
    assert "killed: timeout" in out
    assert_none_left(marker)


@pytest.mark.parametrize("mode", ALL)
def test_background_children_do_not_outlive_a_finished_command(mode: str, marker: str) -> None:
    out = _exec(mode)(f"sh -c 'sleep {marker} & echo started'")
    assert "started" in out and "killed" not in out
    assert_none_left(marker)


@pytest.mark.parametrize("mode", ALL)
def test_huge_output_is_bounded(mode: str) -> None:
    out = _exec(mode)("head -c 100000000 /dev/zero")
    assert "stdout (100000000 bytes)" in out
    assert "bytes omitted" in out
    assert len(out) < 3 * LIMITS.output_bytes


@needs_process_cap
@pytest.mark.parametrize("mode", ALL)
def test_process_cap_bites(mode: str, marker: str) -> None:
    code = (
        "import subprocess\nstarted = 0\nfor _ in range(80):\n"
        f"    try: subprocess.Popen(['sleep', '{marker}']); started += 1\n"
        "    except OSError: pass\nprint('STARTED', started)"
    )
    out = _exec(mode, limits=ExecLimits(max_processes=24))(f'python3 -c "{code}"')
    started = int(out.split("STARTED ")[1].split()[0])
    assert 0 < started < 24
    assert_none_left(marker)


@pytest.mark.parametrize("mode", ALL)
def test_memory_hog_is_reported_as_killed_memory(mode: str) -> None:
    out = _exec(mode)('python3 -c "bytearray(1 << 31)"')
    assert "killed: memory" in out
