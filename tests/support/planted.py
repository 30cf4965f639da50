"""Files others may plant where toolcards reads: a FIFO that answers a reader, so a test sees
whether the code read it (a reader that waits on a FIFO nobody writes hangs the test instead)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = ["feeding_fifo"]


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
