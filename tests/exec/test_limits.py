"""Limits: output bounding, rlimits in the child, the pids cgroup, kill reasons."""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from tests.exec.support import needs_process_cap

from toolcards.tools.exec import limits as limits_mod
from toolcards.tools.exec.cgroups import PidsGroup
from toolcards.tools.exec.limits import BoundedOutput, ExecLimits, LimitUnavailable, rlimit_plan
from toolcards.tools.exec.runner import Launch, run


def test_short_output_is_kept_whole() -> None:
    out = BoundedOutput(100)
    out.feed(b"hello ")
    out.feed(b"world")
    assert (out.text(), out.total, out.dropped) == ("hello world", 11, 0)


def test_long_output_keeps_head_and_tail_with_marker() -> None:
    out = BoundedOutput(20)
    for i in range(1000):
        out.feed(f"{i:04d}".encode())
    text = out.text()
    assert text.startswith("0000000100\n")
    assert text.endswith("\n9709980999")
    assert f"[... {4000 - 20} bytes omitted ...]" in text
    assert out.total == 4000


def test_invalid_utf8_is_replaced_not_raised() -> None:
    out = BoundedOutput(100)
    out.feed(b"ok \xff\xfe end")
    assert out.text() == "ok \ufffd\ufffd end"


def test_split_multibyte_characters_do_not_crash() -> None:
    out = BoundedOutput(10)
    out.feed("é".encode() * 100)
    assert "omitted" in out.text()


@pytest.mark.parametrize(
    "bad",
    [
        {"cpu_seconds": 0},
        {"memory_bytes": 10},
        {"max_processes": 1},
        {"open_files": 3},
        {"open_files": None},
        {"output_bytes": 1},
        {"cpu_seconds": "lots"},
        {"unknown": 1},
    ],
)
def test_limits_reject_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ExecLimits.model_validate(bad)


def _run_local(argv: list[str], limits: ExecLimits, tmp_path: Path, timeout_s: float = 60):
    launch = Launch(argv=argv, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path))
    return run(
        launch,
        display_argv=argv,
        backend="local",
        timeout_s=timeout_s,
        limits=limits,
        process_cap="none",
    )


READ_LIMITS = [
    sys.executable,
    "-c",
    "import sys; sys.stdout.write(open('/proc/self/limits').read())",
]
"""Reads its limits once started (local mode sets them right after the start, from outside)."""


def test_rlimits_are_applied_in_the_child(tmp_path: Path) -> None:
    limits = ExecLimits(cpu_seconds=7, memory_bytes=300 << 20, file_size_bytes=12345)
    result = _run_local(READ_LIMITS, limits, tmp_path)
    rows = {line[:26].strip(): line[26:].split() for line in result.stdout.splitlines()[1:]}
    assert rows["Max cpu time"][:2] == ["7", "8"]
    assert rows["Max address space"][0] == str(300 << 20)
    assert rows["Max file size"][0] == "12345"
    assert rows["Max open files"][:2] == ["64", "64"]
    assert rows["Max msgqueue size"][:2] == ["0", "0"]  # none charged to the host user


def test_open_files_never_exceed_the_hosts_hard_limit() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    plan = rlimit_plan(ExecLimits(open_files=1 << 30, max_processes=None))
    assert (resource.RLIMIT_NOFILE, hard, hard) in plan


def test_limits_whose_epoll_watches_could_pass_a_quarter_of_the_hosts_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: epoll watches are counted per host user, the sandbox's uid is the host user's,
    and 30 processes of 1,024 descriptors (the old default), each adding all its pipes to all
    its epoll instances, held the 5,491,645 of a 24 GiB host: the host's own epoll_ctl and
    asyncio.run failed with ENOSPC. max_processes x (open_files/2)^2 must stay within a
    quarter of the host's budget (read from a file standing in for the sysctl)."""
    budget = tmp_path / "max_user_watches"
    monkeypatch.setattr(limits_mod, "MAX_USER_WATCHES", budget, raising=False)
    budget.write_text("5491645\n")
    with pytest.raises(LimitUnavailable, match="33,554,432 epoll watches"):
        ExecLimits(max_processes=128, open_files=1024)
    ExecLimits(open_files=1024, max_processes=None)  # no process cap: nothing to bound it by
    budget.write_text(str(4 * 128 * 32**2))  # the defaults' worst case, exactly a quarter
    assert ExecLimits().open_files == 64
    budget.write_text(str(4 * 128 * 32**2 - 1))
    with pytest.raises(LimitUnavailable, match="lower open_files or max_processes"):
        ExecLimits()
    budget.unlink()  # no such sysctl (not Linux): nothing to check against
    ExecLimits(open_files=1 << 20)


def test_memory_exhaustion_is_reported(tmp_path: Path) -> None:
    code = "bytearray(1 << 31)"
    result = _run_local([sys.executable, "-c", code], ExecLimits(memory_bytes=256 << 20), tmp_path)
    assert result.killed == "memory"
    assert "killed: memory" in result.render()


def test_file_size_limit_is_reported(tmp_path: Path) -> None:
    code = "open('big', 'wb').write(b'x' * 100000)"
    result = _run_local([sys.executable, "-c", code], ExecLimits(file_size_bytes=1000), tmp_path)
    assert result.killed == "file_size"
    assert (tmp_path / "big").stat().st_size <= 1000


def test_cpu_limit_kills_a_spinning_process(tmp_path: Path) -> None:
    result = _run_local(
        [sys.executable, "-c", "while True: pass"],
        ExecLimits(cpu_seconds=1),
        tmp_path,
        timeout_s=30,
    )
    assert result.killed == "cpu"


def test_exit_code_and_streams_are_reported(tmp_path: Path) -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    result = _run_local([sys.executable, "-c", code], ExecLimits(), tmp_path)
    assert (result.exit_code, result.stdout, result.stderr, result.killed) == (
        3,
        "out\n",
        "err\n",
        None,
    )


@needs_process_cap
def test_pids_group_caps_and_cleans_up() -> None:
    group = PidsGroup.create(8)
    if group is None:
        pytest.skip("no writable pids cgroup (the rlimit path is used instead)")
    try:
        assert (group.path / "pids.max").read_text().strip() == "8"
    finally:
        group.close()
    assert not group.path.exists()


def test_missing_program_is_reported_not_raised(tmp_path: Path) -> None:
    result = _run_local(["no-such-program-xyz"], ExecLimits(), tmp_path)
    assert result.exit_code == 127
    assert "no-such-program-xyz: cannot run" in result.stderr


def test_user_task_count_sees_this_process() -> None:
    from toolcards.tools.exec.cgroups import user_task_count

    assert user_task_count() >= 1
    assert user_task_count(uid=2**31 - 7) == 0


def test_nproc_rlimit_is_applied_with_offset(tmp_path: Path) -> None:
    launch = Launch(argv=READ_LIMITS, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path))
    limits = ExecLimits(max_processes=40)
    result = run(
        launch,
        display_argv=launch.argv,
        backend="local",
        timeout_s=10,
        limits=limits,
        process_cap="rlimit",
        nproc_offset=5,
    )
    row = next(line for line in result.stdout.splitlines() if line.startswith("Max processes"))
    assert row.split()[2:4] == ["45", "45"]


def test_limits_bind_before_the_command_runs_its_first_instruction(tmp_path: Path) -> None:
    # the shell's ulimit is its first action: it reads the limit before anything set from
    # outside after the start could bind (the launch is held until its limits are set)
    limits = ExecLimits(memory_bytes=256 << 20)
    seen = {_run_local(["/bin/sh", "-c", "ulimit -v"], limits, tmp_path).stdout for _ in range(30)}
    assert seen == {f"{256 << 10}\n"}


def test_a_held_launch_keeps_the_environment_as_given(tmp_path: Path) -> None:
    given = {"PATH": "/usr/bin:/bin", "MARK": "a b"}
    for env in (given, {**given, "PWD": "/not/here"}):
        launch = Launch(argv=["env"], env=env, cwd=str(tmp_path))
        result = run(launch, display_argv=["env"], backend="local", timeout_s=60,
                     limits=ExecLimits(), process_cap="none")  # fmt: skip
        assert dict(line.split("=", 1) for line in result.stdout.splitlines()) == env


def test_a_program_that_is_not_executable_is_reported_not_raised(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    result = _run_local(["./script.sh"], ExecLimits(), tmp_path)
    assert result.exit_code == 127 and "./script.sh: cannot run" in result.stderr
    script.chmod(0o755)
    assert _run_local(["./script.sh"], ExecLimits(), tmp_path).stdout == "ran\n"
