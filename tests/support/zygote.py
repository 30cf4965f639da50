"""A fork server for the processes a test session starts: ``toolcards`` and ``python``.

Every ``toolcards serve`` or CLI process of the suite would import pydantic, pydantic-ai, the
MCP SDK, typer and the HTTP stack again (about 1.5 s of CPU of a serve's 1.8 s), and so would
the suite's Python helpers (MCP servers, the demo, the docs' snippets). This server imports
those third-party packages once and forks a child per process asked for; the child becomes the
process the launcher (:mod:`support.launch`) stands for: that process's argument list, working
directory, environment, standard streams and ``sys.path``, then the console entry point (or
``-c``, ``-m`` or a script, as the interpreter runs them), and a normal interpreter exit.
toolcards' own modules are imported once too: importing them keeps no per-process state
(``tests/test_import_state.py``). A launcher whose process would differ from a child in what
the child cannot change (namespaces, limits, cgroup, ids, umask, a ``PYTHON*`` variable, a
``sitecustomize``, an interpreter option, a toolcards of its own on its path) is told to start
the real one.

    python zygote.py SOCKET

One request per connection: a 4-byte length with the standard streams (SCM_RIGHTS), then the
JSON request; the answer is ``real`` or the child's pid as a line, and later its ending as
``exit N`` or ``signal N``. A connection that closes before its child ended (the launcher was
killed) kills the child. The server ends, killing its children, when its standard input ends
(its parent, the test worker, is gone) or on SIGTERM.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import json
import os
import pkgutil
import selectors
import signal
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any

PRELOAD = (
    "asyncio",
    "sqlite3",
    "pydantic",
    "pydantic.json_schema",
    "pydantic_ai",
    "pydantic_ai.toolsets.function",
    "pydantic_ai.models.test",
    "mcp",
    "mcp.server.mcpserver",
    "mcp.server.stdio",
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
    "typer",
    "rich.console",
    "rich.table",
    "yaml",
    "anyio",
    "httpx",
    "starlette.applications",
    "starlette.routing",
    "sse_starlette",
    "uvicorn",
    "uvicorn.config",
    "jinja2",
    "pykka",
    "psycopg",
    "opentelemetry.trace",
)
"""Third-party modules: none of them reads the environment when imported in a way the suite
changes per process (ray and the vector stack are left to the child)."""

OWN_PACKAGES = ("toolcards.core", "toolcards.stores", "toolcards.governance", "toolcards.runtime",
                "toolcards.tools", "toolcards.surfaces")  # fmt: skip
"""toolcards' own modules, imported too: none reads the environment or keeps per-process state
when imported (``tests/test_import_state.py`` checks it), so a child finds them as it would
have made them. A child whose path finds another toolcards first (a clone's ``src``) starts
for real; this checkout's ``src`` on its path is the toolcards imported here."""

_NOT_PRELOADED = {"postgres", "ray", "vector_store", "demo", "bridges"}
"""Module name parts left to the child: optional or heavy dependencies (psycopg's pool, ray,
onnxruntime), and the demo."""


@dataclass
class Request:
    mode: str
    """``toolcards`` (the console script) or ``python`` (the interpreter)."""
    program: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    streams: list[int]
    """Which of 0, 1, 2 the launcher had open; the received descriptors, in that order."""
    fds: list[int]
    context: dict[str, Any]
    """The launcher's namespaces, resource limits, cgroup, ids and umask."""


def import_all(modules: tuple[str, ...], packages: tuple[str, ...], skip: set[str]) -> None:
    """Import ``modules``, and ``packages`` with every module in them but those with a name
    part in ``skip``; a module that fails to import is left to the process that needs it."""
    names = list(modules)
    for package in packages:
        names.append(package)
        with contextlib.suppress(Exception):
            found = pkgutil.walk_packages(importlib.import_module(package).__path__, package + ".")
            names += [m.name for m in found if not skip & set(m.name.split("."))]
    for name in names:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def _receive(conn: socket.socket) -> Request | None:
    try:
        head, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
        if len(head) != 4:
            return None
        (size,) = struct.unpack("!I", head)
        body = b""
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                return None
            body += chunk
        data = json.loads(body)
        return Request(
            data["mode"],
            data["program"],
            data["argv"],
            data["cwd"],
            data["env"],
            data["streams"],
            fds,
            data["context"],
        )
    except (OSError, ValueError, KeyError):
        return None


_OWN_PYTHON_VARIABLES = ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
                         "PYTHONIOENCODING")  # fmt: skip
"""What a child sets up itself; any other ``PYTHON*`` variable changes how the interpreter
starts, so a launcher whose value differs from the server's starts for real."""


def _differs(request: Request, own: dict[str, Any], env: dict[str, str]) -> str | None:
    """Why a forked child would not be the process the launcher stands for (None: it would):
    another namespace (bwrap), other limits, cgroup, ids or umask, another interpreter set-up
    by a ``PYTHON*`` variable, a ``sitecustomize`` on its path (run at start-up), or another
    toolcards first on its path than the one imported here (a clone's ``src``)."""
    if request.mode == "python" and _python_form(request.argv) is None:
        return "an interpreter option"
    for key, value in own.items():
        if request.context.get(key) != value:
            return key
    for name in {*env, *request.env}:
        own = name in _OWN_PYTHON_VARIABLES or not name.startswith("PYTHON")
        if not own and env.get(name) != request.env.get(name):
            return name
    given = [p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    for folder in given:
        for name in ("sitecustomize.py", "usercustomize.py", "sitecustomize", "usercustomize"):
            if os.path.exists(os.path.join(folder, name)):
                return name
    imported = getattr(sys.modules.get("toolcards"), "__file__", None)
    preloaded = os.path.realpath(os.path.dirname(imported)) if imported else None
    for folder in [_first_path(request), *given]:
        package = os.path.join(request.cwd, folder, "toolcards")
        if os.path.exists(os.path.join(package, "__init__.py")):  # the first one is imported
            return None if os.path.realpath(package) == preloaded else "a toolcards of its own"
    return None


def _first_path(request: Request) -> str:
    """``sys.path[0]`` of the process: the console script's folder, ``""`` for ``-c``, the
    working directory for ``-m``, the script's folder for a script."""
    form = _python_form(request.argv) if request.mode == "python" else None
    if form is None:
        return os.path.dirname(request.program)
    if form == "-c":
        return ""
    if form == "-m":
        return request.cwd
    return os.path.dirname(os.path.realpath(os.path.join(request.cwd, request.argv[0])))


def _python_form(argv: list[str]) -> str | None:
    """``-c``, ``-m`` or ``script`` for the interpreter command lines a child runs; None for
    one with interpreter options (or none: an interactive interpreter)."""
    if len(argv) >= 2 and argv[0] in ("-c", "-m"):
        return argv[0]
    if argv and not argv[0].startswith("-"):
        return "script"
    return None


def own_context() -> dict[str, Any]:
    """This process's context, as the launcher describes its own (see :mod:`support.launch`)."""
    import resource

    spaces = {}
    for name in ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup"):
        with contextlib.suppress(OSError):
            spaces[name] = os.readlink(f"/proc/self/ns/{name}")
    with open("/proc/self/cgroup") as cgroup:
        groups = cgroup.read()
    mask = os.umask(0o22)
    os.umask(mask)
    limits = {
        name: list(resource.getrlimit(getattr(resource, name)))
        for name in dir(resource)
        if name.startswith("RLIMIT_")
    }
    ids = [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups())]
    return {"namespaces": spaces, "limits": limits, "cgroup": groups, "ids": ids, "umask": mask}


def _stdio(fd: int, env: dict[str, str]) -> io.TextIOWrapper:
    """A standard stream for ``fd`` as the interpreter makes it at start-up."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    writing = fd != 0
    raw = io.FileIO(fd, "wb" if writing else "rb", closefd=False)
    buffered: io.RawIOBase | io.BufferedIOBase = raw
    if not (unbuffered and writing):
        buffered = io.BufferedWriter(raw) if writing else io.BufferedReader(raw)
    template = (sys.stdin, sys.stdout, sys.stderr)[fd]
    encoding, errors = template.encoding, template.errors
    given = env.get("PYTHONIOENCODING")
    if given:
        name, _, handler = given.partition(":")
        encoding = name or encoding
        errors = handler or (errors if fd != 2 else "backslashreplace")
    line = not unbuffered and (raw.isatty() or fd == 2)
    return io.TextIOWrapper(
        buffered,  # type: ignore[arg-type]
        encoding=encoding,
        errors=errors,
        newline="\n",
        line_buffering=line,
        write_through=unbuffered,
    )


def _become(request: Request, own_path: list[str]) -> None:
    """Turn this fresh child into the process the launcher stands for."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    for target, fd in zip(request.streams, request.fds, strict=True):
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)
    for target in {0, 1, 2} - set(request.streams):
        with contextlib.suppress(OSError):
            os.close(target)
    sys.stdin, sys.stdout, sys.stderr = (_stdio(fd, request.env) for fd in (0, 1, 2))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    given = [p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    form = _python_form(request.argv) if request.mode == "python" else None
    if form is None:
        sys.argv = [request.program, *request.argv]
    elif form == "-c":
        sys.argv = ["-c", *request.argv[2:]]
    elif form == "-m":
        sys.argv = ["-m", *request.argv[2:]]
    else:
        sys.argv = request.argv
    sys.path[:] = [_first_path(request), *given, *own_path]
    importlib.invalidate_caches()
    sys.dont_write_bytecode = bool(request.env.get("PYTHONDONTWRITEBYTECODE"))
    if "random" in sys.modules:
        sys.modules["random"].seed()


class Server:
    def __init__(self, path: str) -> None:
        self.context = own_context()
        self.env = dict(os.environ)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path + ".tmp")
        self.listener.listen(64)
        os.rename(path + ".tmp", path)  # the socket appears once it accepts
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", 0))
        self.selector.register(sys.stdin, selectors.EVENT_READ, ("parent", 0))
        self.children: dict[int, tuple[socket.socket, int]] = {}
        self.quiet: set[int] = set()
        """Children whose launcher is gone (their connection is no longer watched)."""

    def run(self) -> Request | None:
        """Serve until the parent is gone (None); in a forked child, its request."""
        while True:
            for key, _ in self.selector.select():
                kind, pid = key.data
                if kind == "accept":
                    request = self._accept()
                    if request is not None:
                        return request
                elif kind == "exit":
                    self._reap(pid)
                elif kind == "launcher":
                    self._launcher_readable(pid)
                elif not os.read(0, 4096):  # the parent's end of our stdin closed
                    self.stop()
                    return None

    def _accept(self) -> Request | None:
        conn, _ = self.listener.accept()
        request = _receive(conn)
        if request is None:
            conn.close()
            return None
        reason = _differs(request, self.context, self.env)
        if reason is not None:
            print(f"real start ({reason}): {request.mode} {request.argv[:3]}", file=sys.stderr)
            with contextlib.suppress(OSError):
                conn.sendall(b"real\n")
            for fd in request.fds:
                os.close(fd)
            conn.close()
            return None
        pid = os.fork()
        if pid == 0:
            self._close_all(conn)
            return request
        for fd in request.fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (conn, pidfd)
        self.selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))
        self.selector.register(conn, selectors.EVENT_READ, ("launcher", pid))
        with contextlib.suppress(OSError):
            conn.sendall(f"{pid}\n".encode())
        return None

    def _close_all(self, conn: socket.socket) -> None:
        """In a new child: nothing of the server stays open."""
        conn.close()
        self.selector.close()
        self.listener.close()
        for other, pidfd in self.children.values():
            other.close()
            os.close(pidfd)
        self.children.clear()

    def _reap(self, pid: int) -> None:
        conn, pidfd = self.children.pop(pid)
        _, status = os.waitpid(pid, 0)
        ending = (
            f"signal {os.WTERMSIG(status)}"
            if os.WIFSIGNALED(status)
            else f"exit {os.waitstatus_to_exitcode(status)}"
        )
        with contextlib.suppress(OSError):
            conn.sendall(f"{ending}\n".encode())
        self.selector.unregister(pidfd)
        if pid not in self.quiet:
            self.selector.unregister(conn)
        self.quiet.discard(pid)
        os.close(pidfd)
        conn.close()

    def _launcher_readable(self, pid: int) -> None:
        conn, _ = self.children[pid]
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if not data:  # the launcher is gone (killed): its process goes too
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            self.selector.unregister(conn)
            self.quiet.add(pid)

    def stop(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in list(self.children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _terminated(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def main() -> Request | None:
    path = sys.argv[1]
    given = set(os.environ.pop("PYTHONPATH", "").split(os.pathsep))
    own_path = [p for p in sys.path[1:] if p not in given]  # nor this script's folder
    import_all(PRELOAD, OWN_PACKAGES, _NOT_PRELOADED)
    gc.freeze()  # the children's collections leave the preloaded objects (and pages) alone
    signal.signal(signal.SIGTERM, _terminated)
    server = Server(path)
    try:
        request = server.run()
    except SystemExit:
        server.stop()
        raise
    if request is not None:
        _become(request, own_path)
    return request


def run(request: Request) -> None:
    """Run the command the child stands for, as the console script or the interpreter runs
    it (an uncaught exception ends it as there: its traceback, exit code 1)."""
    if request.mode == "toolcards":
        from toolcards.surfaces.main import main as toolcards

        sys.exit(toolcards())
    import runpy

    form, argv = _python_form(request.argv), request.argv
    if form == "-c":
        import builtins
        import types

        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = module
        exec(compile(argv[1], "<string>", "exec"), module.__dict__)
    elif form == "-m":
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    request = main()
    if request is not None:
        run(request)
