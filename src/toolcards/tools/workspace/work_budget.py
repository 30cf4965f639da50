"""The work one model-supplied input may cost (a glob's steps on a path, a patch's places
weighed in a file): spent as the work goes, refused past it with a message the model can act
on."""

from __future__ import annotations

from collections.abc import Callable

from toolcards.core.errors import RetriableError


class WorkBudget:
    """``steps`` to spend; past them :meth:`spend` raises RetriableError with ``refusal()``
    (made only then: most work never reaches it)."""

    __slots__ = ("left", "refusal")

    def __init__(self, steps: int, refusal: Callable[[], str]) -> None:
        self.left = steps
        self.refusal = refusal

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise RetriableError(self.refusal())
