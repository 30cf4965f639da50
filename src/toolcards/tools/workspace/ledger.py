"""Per-agent read ledger: which version of each file an agent last saw."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from toolcards.core.errors import RetriableError

_LOCK = threading.Lock()
_SEEN: dict[tuple[str, str], dict[str, str]] = {}
_MAX_FILES_PER_AGENT = 10_000


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ReadLedger:
    """Shared by every card bound to the same workspace; one view per agent."""

    def __init__(self, root: Path, agent: str) -> None:
        self._key = (str(root), agent)

    def saw(self, rel: str, data: bytes) -> None:
        """Record that this agent has seen (read or written) ``data`` as ``rel``."""
        with _LOCK:
            seen = _SEEN.setdefault(self._key, {})
            if len(seen) >= _MAX_FILES_PER_AGENT and rel not in seen:
                seen.pop(next(iter(seen)))
            seen[rel] = digest(data)

    def forget(self, rel: str) -> None:
        with _LOCK:
            _SEEN.get(self._key, {}).pop(rel, None)

    def check_fresh(self, rel: str, data: bytes) -> None:
        """Refuse an edit of ``rel`` when it changed on disk since this agent last saw it."""
        with _LOCK:
            known = _SEEN.get(self._key, {}).get(rel)
        if known is not None and known != digest(data):
            raise RetriableError(
                f"{rel} changed on disk since you last read it; re-read first "
                "(workspace_read) and base the edit on the current content"
            )
