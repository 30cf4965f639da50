"""``toolcards`` command lines run by the console entry point in the test's own process, answered
as a real process answers: exit code, standard output, standard error.

The process's state a command line reads is the test's: the working directory, environment
variables and ``sys.path`` (a ``PYTHONPATH``) are set for the one command and restored after
it, the listing cache lives in the test's temporary folder, and modules the command imported
from the folders it was given are forgotten after it (the next test may write a module of the
same name). A command that leaves a thread it started running (but for the process's shared
pool of tool threads) has not stopped what it started: the call fails.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from toolcards.surfaces.main import main

__all__ = ["InProcessCli"]

EXAMPLE_STATE = shutil.ignore_patterns("*.db", "*.db-*", "*.grants", "workspaces")
"""What copying ``examples/team`` leaves behind: the state a reader's own commands made there
(the README's commands store it beside the config), which a test's copy must not inherit."""


class InProcessCli:
    """``cli(*argv, cwd=..., env=..., path=...)``: ``toolcards ARGV`` run by :func:`main`."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], cache: Path
    ) -> None:
        self.monkeypatch = monkeypatch
        self.capsys = capsys
        self.cache = cache

    def __call__(
        self,
        *argv: str | Path,
        cwd: Path | None = None,
        env: dict[str, str | None] | None = None,
        path: tuple[Path, ...] = (),
        entry: Callable[[list[str]], object] = main,
    ) -> subprocess.CompletedProcess[str]:
        """``env``: variables set for this command (None: unset); ``path``: folders put first
        on ``sys.path``, as ``PYTHONPATH`` puts them; ``entry``: the function that runs the
        command line (the console entry point by default)."""
        args = [str(a) for a in argv]
        before = set(threading.enumerate())
        self.capsys.readouterr()  # what the test printed before is not the command's
        with self.monkeypatch.context() as patch:
            patch.setenv("XDG_CACHE_HOME", str(self.cache))
            for name, value in (env or {}).items():
                if value is None:
                    patch.delenv(name, raising=False)
                else:
                    patch.setenv(name, value)
            if cwd is not None:
                patch.chdir(cwd)
            for folder in reversed(path):
                patch.syspath_prepend(str(folder))
            ended: list[tuple[int, str]] = []
            known = set(sys.modules)
            try:
                if _in_event_loop():  # an async test: the command runs its own loops
                    runner = threading.Thread(target=lambda: ended.append(_run(entry, args)))
                    runner.start()
                    runner.join()
                    before.add(runner)
                else:
                    ended.append(_run(entry, args))
            finally:
                _forget_modules_under(path, known)
        code, trace = ended[0]
        said = self.capsys.readouterr()
        deadline = time.monotonic() + 10
        while (left := _new_threads(before)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not left, f"toolcards {' '.join(args)} left threads running: {left}"
        return subprocess.CompletedProcess(args, code, said.out, said.err + trace)


def _run(entry: Callable[[list[str]], object], args: list[str]) -> tuple[int, str]:
    """The exit code of ``entry(ARGS)``, and the traceback of an exception it let out."""
    try:
        entry(args)
    except SystemExit as ended:
        return _exit_code(ended.code), ""
    except Exception:
        return 1, traceback.format_exc()
    return 0, ""


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as the interpreter does
    return 1


_SHARED_POOLS = ("toolcards-tool",)
"""Thread name prefixes of the process's shared pools (the sync tools' worker threads), which
stay for the next call by design."""


def _new_threads(before: set[threading.Thread]) -> list[str]:
    return [
        t.name
        for t in threading.enumerate()
        if t not in before and t.is_alive() and not t.name.startswith(_SHARED_POOLS)
    ]


def _forget_modules_under(folders: tuple[Path, ...], known: set[str]) -> None:
    """Forget the modules the command imported (those not in ``known``) from ``folders``."""
    roots = tuple(str(Path(f).resolve()) + os.sep for f in folders)
    if not roots:
        return
    for name in set(sys.modules) - known:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if file and str(Path(file).resolve()).startswith(roots):
            del sys.modules[name]
