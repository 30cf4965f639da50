"""Files others may plant where toolcards reads: a FIFO that answers a reader, so a test sees
whether the code read it (a reader that waits on a FIFO nobody writes hangs the test instead);
the host's approvals with a secret waiting in them, for a link an agent plants to reach."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.identity import Identity
from toolcards.governance import SqliteApprovalStore

__all__ = ["feeding_fifo", "host_approvals_with_a_pending_secret"]


@contextlib.contextmanager
def feeding_fifo(path: Path, text: str) -> Iterator[None]:
    """``path`` replaced by a FIFO that gives ``text`` to the first reader who waits for it
    (a blocking read gets it whole); on exit a feeder nobody read from is let go."""
    path.unlink(missing_ok=True)
    os.mkfifo(path)

    def feed() -> None:
        with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as fifo:
            fifo.write(text)  # the open waits for a reader

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        yield
    finally:
        try:
            reader: int | None = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # ends a wait
        except FileNotFoundError:  # it was read, then removed
            reader = None
        feeder.join()
        if reader is not None:
            os.close(reader)


def host_approvals_with_a_pending_secret(folder: Path) -> Path:
    """The host team's approvals file, a call waiting in it with a secret in its arguments."""
    folder.mkdir()
    path = folder / "audit.approvals.db"
    store = SqliteApprovalStore(path, "toolcards")
    now = time.time()
    store.add(
        ApprovalRequest(
            call_id="c1", tool_id="workspace_write", args_digest="d", principal="root",
            args={"content": "HOST-SECRET=abc123"}, reason="needs a human",
            expires_at=now + 60, surface="cli", identity=Identity("root"), created_at=now,
        ),
        now,
    )  # fmt: skip
    store.close()
    return path
