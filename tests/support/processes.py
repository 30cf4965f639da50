"""Server processes of the tests and benchmarks: free ports, waiting until a process listens,
and stopping it (terminate, then kill). Importable as ``support.processes`` (``tests`` is on
the test path; the benchmarks put it there)."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(
    port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0, what: str = "server"
) -> None:
    """Return once an HTTP server answers on 127.0.0.1:``port`` (any answer: a port can
    listen, its connections queued, before the server serves them); RuntimeError when
    ``proc`` exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    probe = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(probe)
                if sock.recv(1):
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer on port {port} within {timeout:g}s")


def wait_closed(port: int, timeout: float = 30.0) -> None:
    """Return once nothing accepts connections on 127.0.0.1:``port``; RuntimeError when
    something still does after ``timeout`` (a process started by the fork server dies a moment
    after its launcher: see :mod:`support.launch`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
        except OSError:
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} still accepts connections after {timeout:g}s")


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Terminate ``proc`` and wait for it; kill it when it does not end within ``timeout``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


class ListeningProcess:
    """``argv`` serving on 127.0.0.1:``port``: started (and waited for) by the constructor,
    ended by :meth:`stop`; :attr:`log` holds what it wrote to stderr."""

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        env: Mapping[str, str] | None = None,
        what: str = "server",
        timeout: float = 60.0,
    ) -> None:
        self.port = port
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            list(argv),
            env=None if env is None else dict(env),
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        try:
            wait_listening(port, self.proc, timeout=timeout, what=what)
        except RuntimeError as exc:
            output = self.output()[-2000:]
            self.stop()
            raise RuntimeError(f"{exc}: {output}") from None

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


@contextlib.contextmanager
def serving(
    argv: Sequence[str], port: int, env: Mapping[str, str] | None = None, timeout: float = 60.0
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` running (output discarded) and listening on ``port`` for the block."""
    proc = subprocess.Popen(
        list(argv),
        env=None if env is None else dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, proc, timeout, what=argv[0])
        yield proc
    finally:
        stop_process(proc)


def kill_at(proc: subprocess.Popen[Any], marker: Path, timeout: float, what: str) -> None:
    """SIGKILL ``proc`` once ``marker`` exists (the point the test kills it at); an
    AssertionError saying ``what`` did not happen when ``proc`` exits first or ``timeout``
    passes. ``proc`` is never left running."""
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, what
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
