"""The main job's state directory: what it holds, when it is complete, and how a run claims it.

A first run is complete once its team is set up (members hired, the first requests answered):
then ``demo.json`` is written. A directory holding the job's files without that marker is the
remains of a run that stopped early; the next run says so and starts over. Only the files
listed in :data:`OWNED` are ever removed, so ``--state`` may point at a directory that holds
other things too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolcards.core.errors import ToolcardsError

STORE = "team.db"
AUDIT = "audit.db"
MARKER = "demo.json"
CONFIG = "toolcards.yaml"
POLICY = "policy.yaml"
WORKSPACES = "workspaces"
OWNED = (
    *(f"{db}{suffix}" for db in (STORE, AUDIT) for suffix in ("", "-wal", "-shm", ".endpoint")),
    MARKER,
    CONFIG,
    POLICY,
    WORKSPACES,
    f"{STORE}.lock",
)
"""Everything the job creates in its state directory (the lock file last)."""


class DemoError(ToolcardsError):
    """A problem the job reports in one line (what went wrong, where, and what to do)."""


def prepare(state_dir: Path) -> None:
    """Create ``state_dir`` and make sure this process can write in it."""
    fix = "pass --state with a writable directory"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise DemoError(
            f"the demo state {state_dir} exists and is not a directory; {fix}"
        ) from None
    except OSError as exc:
        raise DemoError(
            f"cannot create the demo state directory {state_dir}: {exc.strerror}; {fix}"
        ) from None
    try:
        with tempfile.TemporaryFile(dir=state_dir):
            pass
    except OSError as exc:
        raise DemoError(
            f"the demo state directory {state_dir} is not writable: {exc.strerror}; {fix}"
        ) from None


def is_complete(state_dir: Path) -> bool:
    """True when a first run finished setting up the team in ``state_dir``."""
    return (state_dir / MARKER).is_file() and (state_dir / STORE).is_file()


def has_leftovers(state_dir: Path) -> bool:
    """True when ``state_dir`` holds any of the job's files."""
    return any((state_dir / name).exists() or (state_dir / name).is_symlink() for name in OWNED)


def mark_complete(state_dir: Path, **facts: Any) -> None:
    """Record that the first run set the team up (written atomically)."""
    record = {"completed_at": time.time(), **facts}
    tmp = state_dir / f"{MARKER}.{os.getpid()}"
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, state_dir / MARKER)


def in_use(state_dir: Path, pid: str) -> DemoError:
    return DemoError(
        f"the demo state {state_dir} is in use by another process (pid {pid}): wait for it "
        "to finish (or stop `toolcards serve` on it), or pass --state with another directory"
    )


@contextlib.contextmanager
def _claimed(state_dir: Path) -> Iterator[None]:
    """Hold the store's lock file (the one the team store takes) while files are removed."""
    lock = state_dir / f"{STORE}.lock"
    if not lock.is_file():
        yield
        return
    import fcntl  # lazy: fcntl is POSIX only

    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            raise in_use(state_dir, fh.read().strip() or "unknown") from None
        yield


def clear(state_dir: Path) -> None:
    """Remove the job's files from ``state_dir`` (never anything else); the directory itself
    goes too when nothing else is left in it. Refused while another process uses the store."""
    if not state_dir.is_dir():
        return
    with _claimed(state_dir):
        for name in OWNED:
            path = state_dir / name
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                elif path.exists() or path.is_symlink():
                    path.unlink()
            except OSError as exc:
                raise DemoError(
                    f"cannot remove {path}: {exc.strerror}; delete it by hand or pass --state "
                    "with another directory"
                ) from None
    with contextlib.suppress(OSError):
        state_dir.rmdir()  # only when empty
