"""docs/distributed.md's local walkthrough, run as the page writes it: its bash blocks, each in
a "terminal" (bash in a copy of the repository's examples/distributed, with a new terminal's
environment), start a real PostgreSQL and a real Ray cluster with the page's own commands, use
the team from an MCP server, the CLI and an agent worker, and stop everything as the page
says (Ctrl-C is SIGINT to the terminal's foreground group). Only the ports and the /tmp folders
are replaced by free ones, since other tests run on this machine.

Checked on the way: every socket the cluster listens on is on the loopback address; the CLI
prints none of Ray's INFO lines; a terminal that did not source env.sh gets one line naming
RAY_ADDRESS, and one with the address but without the token one line naming RAY_AUTH_TOKEN
(Ray retried for 20 s, printing a line per try); after Ctrl-C no process of the cluster is
left."""

from __future__ import annotations

import contextlib
import glob
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from support.processes import free_port, wait_listening
from toolcards.surfaces.outcomes import ExitCode

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("ray")]

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "distributed.md"
EXAMPLE = REPO / "examples" / "distributed"
BIN = Path(sys.executable).parent  # toolcards, ray and python of this environment
PG_BIN = "/usr/lib/postgresql/15/bin"


def walkthrough_blocks(language: str) -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## A local walkthrough", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_the_pages_files_are_the_examples_files() -> None:
    """What the page shows is what the folder holds (the rest of the test runs the folder)."""
    assert walkthrough_blocks("bash")[0] == (EXAMPLE / "env.sh").read_text(encoding="utf-8")
    assert walkthrough_blocks("yaml") == [(EXAMPLE / "team.yaml").read_text(encoding="utf-8")]
    assert walkthrough_blocks("python") == [(EXAMPLE / "worker.py").read_text(encoding="utf-8")]


def _commands(block: str) -> list[str]:
    """The block's command lines (continuations joined)."""
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


class Terminal:
    """A new terminal in ``root``: the page's ``cd``/``.`` lines are its state, every other
    line runs in bash after them."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env, self.setup = root, env, ["set -e"]

    def run(self, line: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        if line.startswith(("cd ", ". ")):
            self.setup.append(line)
            return subprocess.CompletedProcess(line, 0, "", "")
        return subprocess.run(
            ["bash", "-c", "\n".join([*self.setup, line])], cwd=self.root, env=self.env,
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def start(self, line: str, log: Path) -> subprocess.Popen[bytes]:
        """``line`` in the foreground of this terminal (its own process group)."""
        with open(log, "wb") as out:
            return subprocess.Popen(
                ["bash", "-c", "\n".join([*self.setup, f"exec {line}"])], cwd=self.root,
                env=self.env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_as_in_a_new_terminal,
            )  # fmt: skip


def _ctrl_c(process: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    """Ctrl-C to the foreground of a terminal, and its end (``timeout``: a bound)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = [  # how the process stands: its state and the signals it ignores or catches
            line.strip()
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
            if line.startswith(("State", "SigIgn", "SigCgt", "SigBlk"))
        ]
        log_tail = log.read_text(errors="replace")[-3000:]
        raise AssertionError(f"still running after Ctrl-C ({status}): {log_tail}") from None


def _as_in_a_new_terminal() -> None:
    """A new terminal's signals: a test run started in the background (``nohup make test &``)
    has SIGINT, SIGQUIT and SIGHUP ignored, and a program inherits that, so Ctrl-C could not
    stop `ray start --block` (its SigIgn showed SIGINT)."""
    for signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _descendants(pid: int) -> dict[int, str]:
    """``pid`` and every process below it (by parent pid), each with its start time (so a
    pid the kernel gave to another process since is never taken for one of them)."""
    parents: dict[int, tuple[int, str]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            parents[int(stat.split("/")[2])] = (int(fields[1]), fields[19])
    found, grown = {pid}, True
    while grown:
        below = {child for child, (parent, _) in parents.items() if parent in found}
        grown = not below <= found
        found |= below
    return {p: parents[p][1] for p in found if p in parents}


def _running(pid: int, started: str) -> bool:
    """Whether the process ``pid`` that started at ``started`` still runs."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19] == started
    except (OSError, IndexError):
        return False


def _listening(pids: Iterable[int]) -> list[str]:
    """The addresses (``ip:port``) the processes ``pids`` listen on over TCP."""
    inodes: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                raw = b"".join(
                    bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, len(address), 8)
                )
                ip = ipaddress.ip_address(raw)
                if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
                    ip = ip.ipv4_mapped
                found.append(f"{ip}:{int(port, 16)}")
    return found


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in lines[0]
    return lines[0]


@pytest.fixture
def root() -> Iterator[Path]:
    """A short folder under /tmp (Ray's socket paths are bounded) that the postgres user can
    enter, holding a copy of examples/distributed as a checkout would."""
    if os.geteuid() != 0:
        pytest.skip("the page's PostgreSQL commands are a root's (runuser -u postgres)")
    if not shutil.which("runuser") or not shutil.which("createdb") or not (BIN / "ray").exists():
        pytest.skip("needs runuser, createdb and the ray extra")
    folder = Path(tempfile.mkdtemp(prefix="tcw-", dir="/tmp"))
    folder.chmod(0o755)
    shutil.copytree(EXAMPLE, folder / "examples" / "distributed")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_walkthrough_runs_as_written(root: Path) -> None:
    bindir = PG_BIN if Path(PG_BIN, "initdb").exists() else None
    if bindir is None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            pytest.skip("PostgreSQL server binaries are not installed")
        bindir = str(Path(found[-1]).parent)
    pg_port, ray_port, mcp_port = free_port(), free_port(), free_port()
    here = {
        "5432": str(pg_port), "6379": str(ray_port), "8765": str(mcp_port),
        "/tmp/pg": str(root / "pg"), "/tmp/ray-t1": str(root / "ray-t1"), PG_BIN: bindir,
    }  # fmt: skip

    def local(text: str) -> str:
        for old, new in here.items():
            text = text.replace(old, new)
        return text

    folder = root / "examples" / "distributed"
    for name in ("env.sh", "team.yaml", "worker.py"):
        (folder / name).write_text(local((folder / name).read_text()))
    home = root / "home"
    home.mkdir()
    new_terminal = {"PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(home), "LANG": "C.UTF-8"}
    env_sh, first, second, third, teardown = (local(b) for b in walkthrough_blocks("bash"))
    assert env_sh == (folder / "env.sh").read_text()

    ray_head = serve = None
    cluster: dict[int, str] = {}
    try:
        one = Terminal(root, new_terminal)
        *setup, ray_start = _commands(first)
        assert "--block" in ray_start and "ray stop" not in first + teardown
        for line in setup:
            done = one.run(line)
            assert done.returncode == 0, (line, done.stdout, done.stderr)
        ray_head = one.start(ray_start, root / "ray.log")
        deadline = time.monotonic() + 180
        while "Ray runtime started" not in (root / "ray.log").read_text(errors="replace"):
            assert ray_head.poll() is None, (root / "ray.log").read_text()
            assert time.monotonic() < deadline, (root / "ray.log").read_text()
            time.sleep(0.2)
        cluster = _descendants(ray_head.pid)
        bound = _listening(cluster)
        assert f"127.0.0.1:{ray_port}" in bound, bound
        assert all(address.startswith("127.0.0.1:") for address in bound), bound

        # a terminal that did not source env.sh, and one that has the address but no token
        bare = Terminal(root, new_terminal)
        bare.run("cd examples/distributed")
        done = bare.run("toolcards list --config team.yaml")
        assert done.returncode == ExitCode.USAGE and "RAY_ADDRESS" in _one_line(done)
        done = bare.run(f"RAY_ADDRESS=127.0.0.1:{ray_port} toolcards list --config team.yaml")
        line = _one_line(done)
        assert done.returncode == ExitCode.FAILED
        assert "RAY_AUTH_TOKEN" in line and "RAY_AUTH_MODE=token" in line, line

        two = Terminal(root, new_terminal)
        *setup, serve_line = _commands(second)
        for line in setup:
            two.run(line)
        serve = two.start(serve_line, root / "serve.log")
        wait_listening(mcp_port, serve, timeout=180, what="toolcards serve")

        three = Terminal(root, new_terminal)
        said = {}
        for line in _commands(third):
            done = three.run(line)
            assert done.returncode == 0, (line, done.stdout, done.stderr)
            if line.startswith("toolcards"):  # Ray's INFO lines are a library's, not the CLI's
                assert "INFO" not in done.stderr and "Ray" not in done.stderr, (line, done.stderr)
            said[line] = done.stdout
        worker = next(out for line, out in said.items() if "worker.py" in line)
        assert "from the CLI" in worker and "from alice" in worker, worker
        trail = next(out for line, out in said.items() if "audit tail" in line)
        assert "update_planning" in trail, trail

        cluster = _descendants(ray_head.pid)  # with the workers Ray started since
        _ctrl_c(serve, root / "serve.log")
        _ctrl_c(ray_head, root / "ray.log")
        deadline = time.monotonic() + 60
        while alive := [pid for pid, started in cluster.items() if _running(pid, started)]:
            assert time.monotonic() < deadline, f"left running after Ctrl-C: {alive}"
            time.sleep(0.2)
        for line in _commands(teardown):
            done = one.run(line)
            assert done.returncode == 0, (line, done.stdout, done.stderr)
        assert not (root / "pg").exists() and not (root / "ray-t1").exists()
    finally:
        for process in (serve, ray_head):
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        for pid, started in cluster.items():  # what Ray started: workers have groups of their own
            if _running(pid, started):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if (root / "pg" / "data" / "postmaster.pid").exists():
            subprocess.run(
                ["runuser", "-u", "postgres", "--", f"{bindir}/pg_ctl", "-D",
                 str(root / "pg" / "data"), "-m", "immediate", "-w", "stop"],
                capture_output=True, timeout=60, check=False,
            )  # fmt: skip
