"""What every embedding provider and index shares: errors, the provider protocol, helpers
(among them :func:`read_capped`, the bounded read of an HTTP answer).

The providers (:mod:`.embeddings`, :mod:`.openai_provider`) and the indexes import from here and
never from each other; :mod:`.providers` picks one by kind.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toolcards.core.errors import ToolcardsError

if TYPE_CHECKING:
    import httpx
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

EXTRA_HINT = "install the extra: pip install 'toolcards[vector]'"
LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSION = 384
OPENAI_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Vector lengths of the OpenAI embedding models (also served by Azure OpenAI)."""


class VectorExtraMissing(ToolcardsError, ImportError):
    """numpy / onnxruntime / tokenizers / the model package are not installed."""


class EmbeddingError(ToolcardsError):
    """An embedding request failed (bad key, service error, malformed answer)."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """Provider kind: ``local``, ``openai``, ``azure`` or ``hash``."""
        ...

    @property
    def model(self) -> str:
        """The model id the vectors belong to (vectors of different models never mix)."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: list[str]) -> Matrix:
        """Vectors for ``texts``: shape ``(len(texts), dimension)``, float32, unit length."""
        ...


def require(module: str) -> Any:
    """Import ``module`` or raise :class:`VectorExtraMissing` naming ``toolcards[vector]``."""
    found = sys.modules.get(module)  # every search asks for numpy: the short way first
    if found is not None:
        return found
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise VectorExtraMissing(f"{module} is not installed; {EXTRA_HINT}") from exc


def normalize_rows(matrix: Matrix) -> Matrix:
    """Scale each row to unit length (zero rows stay zero)."""
    np = require("numpy")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: Matrix = (matrix / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out


def usable_cpus() -> int:
    """CPUs this process may run on (affinity-aware), capped at 8."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return max(1, min(count, 8))


def read_capped(
    response: httpx.Response,
    cap: int,
    deadline: float,
    what: str,
    error: Callable[[str], Exception] = EmbeddingError,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> bytes:
    """The body of ``response`` as sent, asked for ``Accept-Encoding: identity``: ``error`` when
    it comes encoded (inflated, a few bytes were gigabytes) or past ``cap`` bytes, TimeoutError
    past ``deadline`` (a reading of ``clock``, the caller's: httpx bounds each read, not the
    whole answer)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        raise error(f"{what} came {encoding}-encoded: not read")
    chunks: list[bytes] = []
    size = 0
    for raw in _raw(response):
        size += len(raw)
        if size > cap:
            raise error(f"{what} exceeded {cap} bytes: not read")
        if clock() > deadline:
            raise TimeoutError(f"{what} was not read within its deadline")
        chunks.append(raw)
    return b"".join(chunks)


def _raw(response: httpx.Response) -> Iterator[bytes]:
    """The body's chunks as they come (as built, for a response made in memory: a mock's)."""
    if response.is_stream_consumed:
        yield response.content
    else:
        yield from response.iter_raw()
