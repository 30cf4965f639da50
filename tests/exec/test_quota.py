"""Disk and RAM a command can fill: capped tmpfs mounts, a read-only root, the workspace cap."""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError
from tests.exec.support import PROCESS_CAP, needs_bwrap, tools_of

from toolcards.tools.exec import watch
from toolcards.tools.exec.backends import BwrapBackend, DockerBackend, SandboxSpec
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.limits import ExecLimits

MiB = 1 << 20
CAP = 48 if PROCESS_CAP != "none" else None
SMALL_TMP = ExecLimits(max_processes=CAP, memory_bytes=512 * MiB, tmp_bytes=8 * MiB)


def _run(mode: str, command: str, limits: ExecLimits = SMALL_TMP, **kw: object) -> str:
    card = ExecTool(mode=mode, limits=limits, allowed_commands=["sh", "df"], timeout_s=30, **kw)  # type: ignore[arg-type]
    return str(tools_of(card)["exec_command"](command))


@needs_bwrap
@pytest.mark.parametrize("where", ["/tmp", "/dev/shm"])
def test_bwrap_tmpfs_is_capped(where: str) -> None:
    """Attack: fill /tmp (a 12 GiB tmpfs before) with more than the memory limit."""
    out = _run("bwrap", f"sh -c 'head -c 100000000 /dev/zero > {where}/fill; wc -c < {where}/fill'")
    assert "No space left on device" in out
    written = int(out.split("stdout (")[1].split("\n")[1])
    assert written <= 8 * MiB


@needs_bwrap
def test_bwrap_tmpfs_sizes_add_up_to_the_budget() -> None:
    out = _run("bwrap", "df -B1 --output=size /tmp /dev/shm")
    sizes = [int(v) for v in out.split("stdout (")[1].split("stderr")[0].split() if v.isdigit()]
    assert sum(sizes[-2:]) <= 8 * MiB


@needs_bwrap
@pytest.mark.parametrize("target", ["/filler", "/etc/filler", "/dev/filler", "/usr/filler"])
def test_bwrap_root_dev_and_system_are_read_only(target: str) -> None:
    """Attack: write into the sandbox's root tmpfs (also unbounded before) instead of /tmp."""
    out = _run("bwrap", f"sh -c 'echo x > {target} && echo WROTE'")
    assert "WROTE" not in out.split("stderr")[0]
    assert "Read-only file system" in out


@needs_bwrap
def test_bwrap_workspace_and_tmp_stay_writable() -> None:
    out = _run("bwrap", "sh -c 'echo a > /tmp/a && echo b > /workspace/b && cat /tmp/a b'")
    assert "exit_code: 0" in out and "a\nb" in out


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "mode",
    [
        "local",
        pytest.param("bwrap", marks=needs_bwrap),
    ],
)
@pytest.mark.parametrize("backdated", [False, True], ids=["plain", "backdated"])
def test_writing_past_the_workspace_cap_is_killed(
    mode: str, backdated: bool, workspaces: Path
) -> None:
    """Attack: many files, each under the file size limit, to fill the host disk; also with
    each file's modification time set back to 1970 (``touch -d``), which hid them from the
    count (it went by modification time)."""
    limits = ExecLimits(max_processes=CAP, file_size_bytes=4 * MiB, workspace_write_bytes=16 * MiB)
    back = " touch -d @0 f$i;" if backdated else ""
    script = (
        f"i=0; while [ $i -lt 400 ]; do head -c 1048576 /dev/zero > f$i;{back} i=$((i+1)); done"
    )
    out = _run(mode, f"sh -c '{script}'", limits=limits, workspace_id="fill")
    assert "killed: disk" in out
    total = sum(p.stat().st_size for p in (workspaces / "fill").iterdir())
    assert 15 * MiB <= total < 300 * MiB  # up to the cap (the folder's blocks count too)


MAKERS = {
    "dirs": "for i in range(N): os.mkdir(f'd{i}')",
    "links": "t = 'x' * 4000\nfor i in range(N): os.symlink(t, f'l{i}')",
    "empty": "for i in range(N): os.close(os.open(f'e{i}', os.O_CREAT | os.O_WRONLY))",
}


def _make(mode: str, kind: str, n: int, workspaces: Path) -> tuple[str, int]:
    """Run a script making ``n`` entries of ``kind`` under a 16 MiB cap: its output, and how
    many entries it left in the workspace."""
    ws = workspaces / "fill"
    ws.mkdir()
    (ws / "make.py").write_text(f"import os\nN = {n}\n{MAKERS[kind]}\nprint('made')\n")
    limits = ExecLimits(max_processes=CAP, workspace_write_bytes=16 * MiB)
    out = _run(mode, "sh -c 'python3 make.py'", limits=limits, workspace_id="fill")
    return out, sum(1 for _ in ws.iterdir()) - 1


MODES = ["local", pytest.param("bwrap", marks=needs_bwrap)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["dirs", "links"])
def test_directories_and_links_past_the_workspace_cap_are_killed(
    mode: str, kind: str, workspaces: Path
) -> None:
    """Attack: directories, or symbolic links with a 4,000-byte target, each taking a 4 KiB
    block: only regular files counted, so 30,000 of them put 118 MiB past a 16 MiB cap."""
    out, left = _make(mode, kind, 100_000, workspaces)
    assert "killed: disk" in out and "made" not in out.split("stderr")[0]
    assert 16 * MiB // 4096 * 9 // 10 < left < 100_000  # the folder's own blocks count too


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
def test_entries_past_the_entry_cap_are_killed(
    mode: str, workspaces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: empty files take an inode and no block, so no byte cap sees them filling the
    file system's inode table."""
    monkeypatch.setattr(watch, "MAX_NEW_ENTRIES", 2000)
    out, left = _make(mode, "empty", 200_000, workspaces)
    assert "killed: disk" in out
    assert 2000 < left < 200_000


HOLD = """import os, time
fds = []
for i in range(40):  # under the sandbox's 64 open files: the kill, not EMFILE, ends it
    if TMPFILE:
        fd = os.open('.', os.O_RDWR | os.O_TMPFILE, 0o600)
    else:
        fd = os.open(f'h{i}', os.O_RDWR | os.O_CREAT, 0o600)
        os.unlink(f'h{i}')
    for _ in range(3):
        os.write(fd, b'x' * (1 << 20))
    fds.append(fd)
print('held', len(fds), flush=True)
while True:
    time.sleep(1)
"""
"""40 files of 3 MiB (7.5 times the cap) with no name, held open until the command is stopped."""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tmpfile", [False, True], ids=["unlinked", "tmpfile"])
def test_files_deleted_while_held_open_past_the_workspace_cap_are_killed(
    mode: str, tmpfile: bool, workspaces: Path
) -> None:
    """Attack: files deleted while held open (or made with O_TMPFILE) have no name the count
    can find, so the file system's growth was taken for another writer's and discounted: six
    of 100 MiB put 600 MiB past a 16 MiB cap, and the command ran to its end."""
    ws = workspaces / "hold"
    ws.mkdir()
    (ws / "hold.py").write_text(f"TMPFILE = {tmpfile}\n{HOLD}")
    limits = ExecLimits(max_processes=CAP, file_size_bytes=4 * MiB, workspace_write_bytes=16 * MiB)
    out = _run(mode, "sh -c 'python3 hold.py'", limits=limits, workspace_id="hold")
    assert "killed: disk" in out
    # no file the command wrote keeps a name; one it was killed between making and unlinking
    # (empty, under load) may stay
    left = [p for p in ws.iterdir() if p.name != "hold.py"]
    assert len(left) <= 1 and all(p.stat().st_size == 0 for p in left), left


URING = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
calls = ((425, 1, (ctypes.c_char * 120)()), (426, -1, 0, 0, 0, None, 0), (427, -1, 0, None, 0))
print('uring', *[libc.syscall(*c) < 0 and ctypes.get_errno() for c in calls])
"""
"""io_uring_setup, io_uring_enter and io_uring_register: the errno each fails with (False
where one succeeds)."""


KEYS = """import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
add_key, request_key, keyctl = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[
    platform.machine()]
calls = ((add_key, b"user", b"k", b"x", 1, -2), (request_key, b"user", b"k", None, 0),
         (keyctl, 0, -2, 0))
print('keys', *[libc.syscall(*c) < 0 and ctypes.get_errno() for c in calls])
"""
"""add_key (into the process keyring), request_key and keyctl (the process keyring's id):
the errno each fails with (False where one succeeds)."""


WATCHERS = """import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
inotify_init1, fanotify_init, mq_open = {"x86_64": (294, 300, 240), "aarch64": (26, 262, 180)}[
    platform.machine()]
calls = ((inotify_init1, 0), (fanotify_init, 0x200, 0), (mq_open, b"q", 0o102, 0o600, None))
print('quotas', *[libc.syscall(*c) < 0 and ctypes.get_errno() for c in calls])
"""
"""inotify_init1, fanotify_init (FAN_REPORT_FID, open to unprivileged users) and mq_open
(O_CREAT | O_RDWR): the errno each fails with (False where one succeeds)."""


@needs_bwrap
@pytest.mark.parametrize(
    ("script", "seen"),
    [
        pytest.param(URING, "uring 38 38 38", id="io_uring"),
        pytest.param(KEYS, "keys 38 38 38", id="keyring"),
        pytest.param(WATCHERS, "quotas 38 38 38", id="inotify-fanotify-mq"),
    ],
)
def test_calls_that_hold_what_no_cap_counts_are_answered_enosys(
    workspaces: Path, script: str, seen: str
) -> None:
    """Attacks: a file registered in an io_uring fixed-file table, its descriptor closed, is
    held by the ring alone, where the count of unnamed files does not look (100 files of 3 MiB
    put 300 MiB past a 16 MiB cap); keys, inotify instances, fanotify groups and message queue
    bytes are charged to the host user the sandbox's uid maps to: a command used them up and
    the host's own add_key, inotify_init1, fanotify_init and mq_open failed while it ran.
    Each call answers ENOSYS (38): nothing is held or charged."""
    ws = workspaces / "enosys"
    ws.mkdir()
    (ws / "probe.py").write_text(script)
    assert seen in _run("bwrap", "sh -c 'python3 probe.py'", workspace_id="enosys")


NAMESPACES = """import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
clone, setns = {"x86_64": (56, 308), "aarch64": (220, 268)}[platform.machine()]
def err(result):
    return result < 0 and ctypes.get_errno()
pid = libc.syscall(clone, 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
if pid == 0:
    os._exit(0)
if pid > 0:
    os.waitpid(pid, 0)
uts = os.open("/proc/self/ns/uts", os.O_RDONLY)
print('ns', err(pid), err(libc.syscall(435, 0, 0)), err(libc.setns(uts, 0)),
      err(libc.unshare(0x04000000)), err(libc.unshare(0x10000000)))
"""
"""clone with CLONE_NEWUSER, clone3, setns, unshare(CLONE_NEWUTS), unshare(CLONE_NEWUSER) (in
that order: once in a user namespace of its own, the rest would succeed): the errno each
fails with (False where one succeeds)."""

ORDINARY = """import multiprocessing, os, subprocess, threading
def main():
    threads = [threading.Thread(target=print, args=('thread',)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    print('fork', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    r, w = os.pipe()
    os.write(w, b'piped')
    print(os.read(r, 5).decode())
    print(subprocess.run(['sh', '-c', 'echo a | tr a b'], capture_output=True, text=True).stdout)
    with multiprocessing.get_context('spawn').Pool(2) as pool:
        print('pool', pool.map(abs, [-1, -2]))
if __name__ == '__main__':
    main()
"""
"""Threads (glibc tries clone3 first), fork, a pipe, a shell pipeline and a process pool."""


@needs_bwrap
def test_no_namespace_can_be_made_inside_the_sandbox(workspaces: Path) -> None:
    """Attack: inside bwrap a command entered a user namespace of its own and made 96,366 UTS
    namespaces there, all charged to the host user's /proc/sys/user/max_*_namespaces: the
    host's own unshare and every other bwrap command of that user failed with ENOSPC. bwrap
    runs with --disable-userns and the filter refuses unshare, setns and clone's CLONE_NEW*
    flags (EPERM, 1); clone3, whose flags it cannot read, answers ENOSYS (38)."""
    ws = workspaces / "ns"
    ws.mkdir()
    (ws / "ns.py").write_text(NAMESPACES)
    assert "ns 1 38 1 1 1" in _run("bwrap", "sh -c 'python3 ns.py'", workspace_id="ns")
    for command in ("unshare -U true", "unshare -U -u true", "unshare -u true"):
        out = _run("bwrap", f"sh -c '{command}; echo status $?'", workspace_id="ns")
        assert "status 1" in out, (command, out)


@needs_bwrap
def test_processes_threads_and_pipes_still_work_in_the_sandbox(workspaces: Path) -> None:
    ws = workspaces / "ordinary"
    ws.mkdir()
    (ws / "ordinary.py").write_text(ORDINARY)
    out = _run("bwrap", "sh -c 'python3 ordinary.py'", workspace_id="ordinary")
    assert out.count("thread") == 4, out
    for seen in ("fork 7", "piped", "\nb\n", "pool [1, 2]", "exit_code: 0"):
        assert seen in out, out


SOCKETPAIRS = """import resource, socket
print('nofile', *resource.getrlimit(resource.RLIMIT_NOFILE))
pairs = []
try:
    while len(pairs) < 1000:
        pairs.append(socket.socketpair())
except OSError as exc:
    print('stopped', exc.errno, len(pairs))
"""
"""Opens socket pairs until it is stopped (each can queue kernel memory outside RLIMIT_AS)."""


@needs_bwrap
def test_open_files_cap_descriptors_in_the_sandbox(workspaces: Path) -> None:
    """Attack: with the host's RLIMIT_NOFILE (20,000), one process under a 64 MiB address
    space held 9,211 socket pairs with 2 GiB queued in them: host RAM outside every limit."""
    ws = workspaces / "pairs"
    ws.mkdir()
    (ws / "pairs.py").write_text(SOCKETPAIRS)
    limits = SMALL_TMP.model_copy(update={"open_files": 64})
    out = _run("bwrap", "sh -c 'python3 pairs.py'", limits=limits, workspace_id="pairs")
    assert "nofile 64 64" in out
    stopped = out.split("stopped ")[1].split()
    assert stopped[0] == "24" and int(stopped[1]) < 32  # EMFILE at the cap


@contextlib.contextmanager
def _unnamed(ws: Path, size: int = 16 * MiB) -> Iterator[int]:
    """A file of ``size`` bytes in ``ws``, deleted while this process holds it open."""
    fd = os.open(ws / "gone", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.unlink(ws / "gone")
        os.write(fd, b"g" * size)
        os.fsync(fd)
        yield fd
    finally:
        os.close(fd)


def test_unnamed_files_the_command_holds_count_and_others_growth_does_not(tmp_path: Path) -> None:
    growth = _pinned(watch.WorkspaceGrowth(tmp_path, MiB), 16 * MiB)
    with _unnamed(tmp_path):
        assert not growth.exceeded()  # held by no process of the command: another writer's
    growth = _pinned(watch.WorkspaceGrowth(tmp_path, MiB), 16 * MiB)
    growth.members = lambda: [os.getpid()]
    with _unnamed(tmp_path):
        assert growth.exceeded()
        assert 16 * MiB <= growth.written < 20 * MiB
        assert f"wrote {growth.written} bytes" in growth.overrun()


def test_deleted_files_held_only_by_a_mapping_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file mapped, closed and deleted has no descriptor left, only the mapping; where its
    file cannot be looked at (no CAP_SYS_ADMIN), the mapping's length counts."""
    dev = tmp_path.stat().st_dev
    with _unnamed(tmp_path) as fd:
        mapped = mmap.mmap(fd, 16 * MiB)
    try:
        assert 16 * MiB <= (watch.held([os.getpid()], dev) or 0) < 20 * MiB
        real = os.stat

        def refused(path: object, **kw: object) -> os.stat_result:
            if "map_files" in str(path):
                raise PermissionError(path)
            return real(path, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "stat", refused)
        assert watch.held([os.getpid(), os.getpid()], dev) == 16 * MiB  # each range once
        assert watch.held([os.getpid()], dev + 1) == 0  # another file system's
    finally:
        mapped.close()


def test_too_many_descriptors_to_look_at_stop_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "MAX_HELD_LOOKS", 2)
    assert watch.held([os.getpid()], tmp_path.stat().st_dev) is None


def _bytes_read() -> int:
    """Bytes this process has read through read() calls, from any file."""
    return int(Path("/proc/self/io").read_text().split("rchar:")[1].split()[0])


def test_memory_maps_are_read_within_their_byte_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a job mapped one file with a 3,900-byte name 64,000 times in each of its
    processes (no two mappings merge): the host read each /proc/<pid>/maps whole, 130-250 MB,
    65 s past a 5 s timeout and with 540 MiB of its memory."""
    monkeypatch.setattr(watch, "MAX_MAPS_BYTES", MiB)
    deep = tmp_path
    while len(str(deep)) < 3800:
        deep /= "x" * 200
    deep.mkdir(parents=True)
    (deep / "m").write_bytes(bytes(mmap.PAGESIZE))
    with open(deep / "m", "rb") as f:  # 4,000 lines of 3.9 KB in this process's maps
        maps = [mmap.mmap(f.fileno(), mmap.PAGESIZE, prot=mmap.PROT_READ) for _ in range(4000)]
    try:
        before = _bytes_read()
        assert watch.held([os.getpid()], tmp_path.stat().st_dev) is None
        assert _bytes_read() - before < 2 * MiB
    finally:
        for mapped in maps:
            mapped.close()


def test_job_processes_are_the_tree_and_the_session_of_the_command() -> None:
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        found = watch.job_processes(proc.pid)
        while len(found) < 2 and proc.poll() is None:  # until sh has started sleep
            found = watch.job_processes(proc.pid)
        assert found[0] == proc.pid and len(found) == 2
        assert os.getpid() not in found
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_entries_are_counted_once_and_old_ones_not(tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.write_bytes(b"x" * 100_000)
    since = time.time() + 1
    while time.time() < since:  # inode change times are coarse: start after the old file's
        time.sleep(0.01)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "new").write_bytes(b"y" * 10_000)
    os.link(tmp_path / "d" / "new", tmp_path / "d" / "again")
    os.symlink("x" * 4000, tmp_path / "link")
    counted = watch.modified(tmp_path, since)
    assert counted is not None
    written, entries = counted
    assert entries == 4  # the root (changed by its new entries), d, new (once), link
    assert written >= 10_000 + 2 * 4096
    assert written < 100_000


def _changed_tree(tmp_path: Path) -> tuple[Path, Path, float]:
    """A workspace with a directory ``d`` and, beside it, a host directory holding 4 MiB, all
    changed after the returned start."""
    since = time.time() - 1
    ws, host = tmp_path / "ws", tmp_path / "host"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "small").write_bytes(b"x")
    host.mkdir()
    (host / "key.pem").write_bytes(b"k" * (4 * MiB))
    return ws, host, since


def test_a_directory_swapped_for_a_host_link_is_never_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: once the watcher had seen ``d`` as a directory, the job swapped it for a link
    to a host directory (renameat2 RENAME_EXCHANGE): the host listed that directory by its
    path, and counted /usr or a folder with key.pem as the workspace's."""
    ws, host, since = _changed_tree(tmp_path)
    real, listed = os.scandir, []

    def swapping(target: object) -> object:
        listed.append(target)
        if len(listed) == 2:  # the root was listed: its subdirectory becomes a host link
            os.rename(ws / "d", ws / "moved")
            os.symlink(host, ws / "d")
        return real(target)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", swapping)
    counted = watch.modified(ws, since)
    assert counted is not None and counted[0] < MiB  # the moved directory, not the host's 4 MiB


def test_a_directory_turned_into_a_link_while_counted_stops_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, host, since = _changed_tree(tmp_path)
    real = os.stat

    def swapping(name: object, **kw: object) -> os.stat_result:
        st = real(name, **kw)  # type: ignore[arg-type]
        if name == "d":  # seen as a directory, a link by the time it is opened
            os.rename(ws / "d", ws / "moved")
            os.symlink(host, ws / "d")
        return st

    monkeypatch.setattr(os, "stat", swapping)
    assert watch.modified(ws, since) is None


def _moving(ws: Path, monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make ``ws`` hold directories ``a``, ``b`` and ``c`` and, in the one the walk lists last,
    a 16 MiB file moved to the other end, ``times`` times, each time just before the
    directory holding it is listed. The directories listed, as the walks went."""
    for name in ("a", "b", "c"):
        (ws / name).mkdir()
    first, *_, last = (ws / entry.name for entry in os.scandir(ws))  # the walk's order
    (last / "big").write_bytes(b"b" * (16 * MiB))
    real, listed, moves = os.scandir, [], [times]
    ends = {first.stat().st_ino: (first, last), last.stat().st_ino: (last, first)}

    def moving(target: int) -> object:
        listed.append(os.fstat(target).st_ino)
        here, there = ends.get(listed[-1], (ws, ws))
        if moves[0] and (here / "big").exists():  # away from the one about to be listed
            os.rename(here / "big", there / "big")
            moves[0] -= 1
        return real(target)

    monkeypatch.setattr(os, "scandir", moving)
    return listed


def test_files_moved_into_a_directory_counted_already_stop_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a job kept its new files in the directory the walk lists last, moved them into
    one it had listed already (its access time showed when) and back before the next walk:
    no walk found them, and their growth was taken for another writer's and discounted for
    good (160 MiB kept under a 16 MiB cap)."""
    monkeypatch.setattr(watch, "MAX_WALK_ENTRIES", 100)
    ws = tmp_path / "ws"
    ws.mkdir()
    growth = _pinned(watch.WorkspaceGrowth(ws, MiB), 16 * MiB)
    base, listed = growth.base, _moving(ws, monkeypatch, times=1000)
    assert growth.exceeded()
    assert "could not be counted" in growth.overrun()
    assert growth.base == base  # nothing discounted as another writer's
    assert 4 < len(listed) < 100  # walked again while the budget lasted


def test_a_workspace_changed_while_counted_is_counted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file moved once, while the workspace was walked, is found by the next walk: the
    command's writes still count, and growth elsewhere is still discounted."""
    ws = tmp_path / "ws"
    ws.mkdir()
    growth = _pinned(watch.WorkspaceGrowth(ws, 32 * MiB), 64 * MiB)
    base, listed = growth.base, _moving(ws, monkeypatch, times=1)
    assert not growth.exceeded()
    assert 16 * MiB <= growth.written < 20 * MiB and len(listed) == 8  # walked twice
    assert growth.base == base + 64 * MiB - growth.written


def _grown(ws: Path) -> watch.WorkspaceGrowth:
    """A watch over ``ws`` with a 1 MiB cap, after the workspace grew by 16 MiB."""
    growth = _pinned(watch.WorkspaceGrowth(ws, MiB), 16 * MiB)
    (ws / "big").write_bytes(b"b" * (16 * MiB))
    return growth


def _pinned(growth: watch.WorkspaceGrowth, grown: int) -> watch.WorkspaceGrowth:
    """``growth`` reading its file system as grown by ``grown`` bytes and one entry: the
    decision alone is under test, and other tests' files come and go on the same file system
    (their deletions hid this growth now and then)."""
    base, entries = growth.base, growth.base_entries
    growth._used = lambda: (base + grown, entries + 1)  # type: ignore[method-assign]
    return growth


def test_a_workspace_too_big_to_count_is_taken_as_over_its_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a tree of millions of entries made the host walk it whole, every 0.1 s."""
    monkeypatch.setattr(watch, "MAX_WALK_ENTRIES", 50)
    ws, _, since = _changed_tree(tmp_path)
    for i in range(60):
        (ws / f"e{i}").touch()
    assert watch.modified(ws, since) is None
    growth = _grown(ws)
    assert growth.exceeded()
    assert "could not be counted" in growth.overrun()


def test_a_count_too_deep_to_finish_is_taken_as_over_its_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "MAX_WALK_DEPTH", 4)
    ws, _, since = _changed_tree(tmp_path)
    (ws / "a" / "b" / "c" / "d" / "e").mkdir(parents=True)
    assert watch.modified(ws, since) is None
    monkeypatch.setattr(watch, "MAX_WALK_DEPTH", 6)
    assert watch.modified(ws, since) is not None


@pytest.mark.parametrize("error", [PermissionError, FileNotFoundError])
def test_an_entry_the_host_cannot_look_at_stops_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[OSError]
) -> None:
    """A name listed but not looked at (its directory not searchable) is growth unseen; one
    removed between the listing and the look is nothing left to count."""
    ws, _, since = _changed_tree(tmp_path)
    real = os.stat

    def refused(name: object, **kw: object) -> os.stat_result:
        if name == "small":
            raise error(name)
        return real(name, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", refused)
    assert (watch.modified(ws, since) is None) == (error is PermissionError)
    growth = _grown(ws)
    assert growth.exceeded()
    assert ("could not be counted" in growth.overrun()) == (error is PermissionError)


def test_a_workspace_the_host_cannot_open_is_not_counted_as_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, _, since = _changed_tree(tmp_path)
    real = os.open

    def refused(path: object, *args: object, **kw: object) -> int:
        if path == ws:
            raise PermissionError(13, "refused")
        return real(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refused)
    assert watch.modified(ws, since) is None
    assert watch.modified(tmp_path / "gone", since) == (0, 0)


def _as_a_normal_user() -> list[str]:
    """The prefix that runs a command as a host user who is not root: root reads and looks
    into any directory (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so it sees what a job hides."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root without setpriv: cannot drop CAP_DAC_OVERRIDE to act as a user")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


_HIDE_AND_FILL = """
import os, sys, time
os.mkdir("d")
fd = os.open("d/f", os.O_CREAT | os.O_WRONLY, 0o600)
os.chmod(sys.argv[1], int(sys.argv[2], 8))
for _ in range(32):
    os.write(fd, bytes(1 << 20))
time.sleep(300)
"""
_RUN_CARD = """
import asyncio, inspect, sys
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.limits import ExecLimits
limits = ExecLimits(max_processes=None, workspace_write_bytes=1 << 20)
card = ExecTool(mode="local", limits=limits, allowed_commands=["python3"], timeout_s=100,
                workspace_id="fill")
out = {fn.__name__: fn for fn in card.get_tools()}["exec_command"](sys.argv[1])
print(asyncio.run(out) if inspect.isawaitable(out) else out)
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("hidden, mode", [("d", "600"), (".", "300")])
def test_a_directory_made_unsearchable_cannot_hide_what_is_written_in_it(
    workspaces: Path, hidden: str, mode: str
) -> None:
    """Attack: the job made ``d`` readable but not searchable (0600) and wrote 400 MiB through
    files it held open in it, under a 16 MiB cap: the host listed ``d`` but could not look at
    its entries, counted none, and took the growth for another writer's (exit 0). A workspace
    made unreadable (0300) was counted as empty."""
    ws = workspaces / "fill"
    ws.mkdir()
    (ws / "fill.py").write_text(_HIDE_AND_FILL)
    argv = [
        *_as_a_normal_user(),
        sys.executable,
        "-c",
        _RUN_CARD,
        f"python3 fill.py {hidden} {mode}",
    ]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=150, check=True).stdout
    finally:
        ws.chmod(0o700)
        with contextlib.suppress(FileNotFoundError):
            (ws / "d").chmod(0o700)
            (ws / "d" / "f").unlink()
    assert "killed: disk" in out


def test_the_count_stops_at_the_commands_deadline(tmp_path: Path) -> None:
    """The count ran inside the runner's loop, where the command's deadline was not checked:
    a huge tree cost its time without bound. Cut off by the deadline it decides nothing (the
    timeout does)."""
    ws, _, since = _changed_tree(tmp_path)
    assert watch.modified(ws, since, deadline=time.monotonic()) is None
    growth = _grown(ws)
    assert not growth.exceeded(deadline=time.monotonic())
    assert growth.exceeded(deadline=time.monotonic() + 60)


def test_small_writes_are_not_flagged(workspaces: Path) -> None:
    limits = ExecLimits(max_processes=CAP, workspace_write_bytes=16 * MiB)
    out = _run("local", "sh -c 'head -c 2000000 /dev/zero > small'", limits=limits)
    assert "exit_code: 0" in out and "killed" not in out and "warning" not in out


def test_tmpfs_budget_never_exceeds_memory() -> None:
    tmp, shm = ExecLimits(memory_bytes=32 * MiB, tmp_bytes=1 << 30).tmpfs_sizes()
    assert tmp + shm <= 32 * MiB
    tmp, shm = ExecLimits(tmp_bytes=64 * MiB).tmpfs_sizes()
    assert (tmp, shm) == (48 * MiB, 16 * MiB)


def test_tmpfs_budget_has_a_floor() -> None:
    with pytest.raises(ValidationError):
        ExecLimits(tmp_bytes=1000)


def test_bwrap_argv_caps_both_tmpfs_mounts(tmp_path: Path) -> None:
    spec = SandboxSpec(workspace=tmp_path, env={}, network=False, limits=SMALL_TMP)
    argv = BwrapBackend().argv(["true"], spec)
    sized = {argv[i + 3]: int(argv[i + 1]) for i, a in enumerate(argv) if a == "--size"}
    assert set(sized) == {"/tmp", "/dev/shm"} and sum(sized.values()) == 8 * MiB
    remounted = [argv[i + 1] for i, a in enumerate(argv) if a == "--remount-ro"]
    assert remounted == ["/dev", "/"]
    assert argv.index("--remount-ro") > argv.index("/workspace")  # after every mount point


def test_docker_argv_caps_tmp_and_shm(tmp_path: Path) -> None:
    spec = SandboxSpec(workspace=tmp_path, env={}, network=False, limits=SMALL_TMP)
    argv = DockerBackend(user="1000:1000").argv(["true"], spec, "n")
    assert f"/tmp:rw,nosuid,nodev,size={6 * MiB}" in argv
    assert argv[argv.index("--shm-size") + 1] == str(2 * MiB)
