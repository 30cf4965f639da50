"""A small stateful card and its tool actor, shared by the runtime tests (and their subprocesses).

Importable as ``runtime.stateful_cards`` (``tests`` is on the test path).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from pydantic import BaseModel

from toolcards.core import ToolCard
from toolcards.runtime import ActorHandle, ToolActor
from toolcards.tools._common.team import team_observer

COUNTER = "#Counter"


class CounterConfig(BaseModel):
    step: int = 1


class CounterActor(ToolActor):
    """Counts, and keeps one state row per recorded item (``item:<n>``) plus ``total``."""

    config_type = CounterConfig
    starts = 0
    _starts_lock = threading.Lock()

    def on_start(self) -> None:
        with CounterActor._starts_lock:
            CounterActor.starts += 1
        self.total: int = self.state.get("total") or 0

    def add(self, label: str) -> int:
        step = self.config.step if isinstance(self.config, CounterConfig) else 1
        with self.state.batch():
            self.total += step
            self.state.put(f"item:{self.total:08d}", label)
            self.state.put("total", self.total)
            self.emit({"added": [label]})
        return self.total

    def touch(self) -> None:
        self.emit({"added": []})

    def value(self) -> int:
        return self.total

    def identity(self) -> str:
        """Which process and object answers (one per team, wherever it runs)."""
        return f"{os.getpid()}:{id(self)}"

    def items(self) -> list[tuple[str, Any]]:
        return list(self.state.items("item:"))

    def fail(self, message: str) -> None:
        raise KeyError(message)


class CounterCard(ToolCard):
    """A card whose tools share one ``#Counter`` per team."""

    step: int = 1

    def _actor(self) -> ActorHandle[CounterActor]:
        return team_observer(self).tool_actor(COUNTER, CounterActor, CounterConfig(step=self.step))

    def get_tools(self) -> list[Any]:
        def counter_add(label: str) -> int:
            """Count one more ``label``; returns the new total."""
            return int(self._actor().ask(CounterActor.add, label))

        def counter_value() -> int:
            """The current total."""
            return int(self._actor().ask(CounterActor.value))

        return [counter_add, counter_value]
