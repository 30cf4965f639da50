"""Start `toolcards serve` processes for the stdio relay by forking one interpreter that has
imported the serving stack already, so each MCP session's server starts in milliseconds
instead of a whole interpreter start (a second or more of CPU each; the suite opens one
session per scenario).

    python fork_server.py SOCKET -- serve --config toolcards.yaml

Listens on the Unix socket ``SOCKET``; each connection passes one connected socket (SCM_RIGHTS)
that becomes the new server's stdin and stdout, and gets the child's pid back as a line. The
child runs the ``toolcards`` console entry point with the arguments after ``--``, exactly as
the console script would, and ends at the end of its stdin, as every stdio server does (the
relay never signals a pid: once the kernel reaps a child, its pid may be another process's).
The fork server reaps its children itself and, when its parent (the relay) is gone or it is
terminated, terminates those still running.
"""

from __future__ import annotations

import contextlib
import gc
import os
import selectors
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from support.zygote import import_all  # tests/ is not on the path of a script run by name

PRELOAD = ("typer", "sqlite3", "pydantic_ai", "mcp.server.stdio", "fixtures")
PACKAGES = ("toolcards.core", "toolcards.stores", "toolcards.governance", "toolcards.runtime",
            "toolcards.surfaces")  # fmt: skip
"""Imported before the first fork: these modules and every module of these packages but the
PostgreSQL and Ray ones (a module that fails to import is left to the child)."""


def _child(conn: socket.socket, args: list[str], runtime_dir: str) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # each server its own control endpoint: servers on one config started within the same
    # moment would race for one socket path (bind: address already in use)
    os.mkdir(runtime_dir, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = runtime_dir
    os.dup2(conn.fileno(), 0)
    os.dup2(conn.fileno(), 1)
    conn.close()
    code = 0
    try:
        from toolcards.surfaces.main import main

        sys.argv = ["toolcards", *args]
        main()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    os._exit(code)


def _serve_one(listener: socket.socket, args: list[str], children: set[int]) -> None:
    listener_path = listener.getsockname()
    control, _ = listener.accept()
    with control:
        _msg, fds, _flags, _addr = socket.recv_fds(control, 16, 1)
        if not fds:
            return
        conn = socket.socket(fileno=fds[0])
        pid = os.fork()
        if pid == 0:
            listener.close()
            control.close()
            _child(conn, args, os.path.join(os.path.dirname(listener_path), f"run-{os.getpid()}"))
        children.add(pid)
        conn.close()
        with contextlib.suppress(OSError):
            control.sendall(f"{pid}\n".encode())


def _reap(children: set[int]) -> None:
    """Wait for the children that ended (a pid stays ours, never reused, until then)."""
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        children.discard(pid)


def _stopped(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def main() -> None:
    path = sys.argv[1]
    args = sys.argv[sys.argv.index("--") + 1 :]
    parent = os.getppid()
    import_all(PRELOAD, PACKAGES, {"postgres", "ray"})
    gc.freeze()  # the children's collections leave the preloaded objects (and their pages) alone
    signal.signal(signal.SIGTERM, _stopped)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(16)
    os.rename(path + ".tmp", path)  # the socket appears once it accepts
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children: set[int] = set()
    try:
        while os.getppid() == parent:
            if selector.select(timeout=0.5):
                _serve_one(listener, args, children)
            _reap(children)
    finally:
        _reap(children)
        for pid in children:  # not reaped yet: still our children
            os.kill(pid, signal.SIGTERM)


if __name__ == "__main__":
    main()
