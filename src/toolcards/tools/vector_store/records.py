"""Durable vector records in a per-key state store: one row per id, so an add writes O(delta).

Row ``v/<collection>/<id>`` holds ``{"h": text hash, "t": text, "v": base64 float32}``; row
``meta`` holds the provider, model and dimension the vectors belong to. The text is kept
(bounded) so the store can re-embed everything when the model changes.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from toolcards.tools._common.batch import one_line
from toolcards.tools._common.vector_api import CARD_COLLECTIONS
from toolcards.tools.vector_store.base import require

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

logger = logging.getLogger(__name__)

COLLECTION_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
MAX_ID_CHARS = 1024


class StateStore(Protocol):
    """The slice of the runtime's per-tool KV state the store uses."""

    def get(self, key: str) -> Any: ...

    def put(self, key: str, value: Any) -> None: ...

    def delete(self, key: str) -> None: ...

    def iter_items(self, prefix: str = "") -> Iterable[tuple[str, Any]]: ...

    def count(self, prefix: str = "") -> int: ...

    def batch(self) -> contextlib.AbstractContextManager[Any]: ...


class MemoryState:
    """A dict-backed :class:`StateStore` that counts writes (tests, benchmarks)."""

    def __init__(self) -> None:
        self.rows: dict[str, Any] = {}
        self.writes = 0
        self.batches = 0

    def get(self, key: str) -> Any:
        return self.rows.get(key)

    def put(self, key: str, value: Any) -> None:
        self.writes += 1
        self.rows[key] = value

    def delete(self, key: str) -> None:
        self.writes += 1
        self.rows.pop(key, None)

    def iter_items(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        for key in sorted(self.rows):
            if key.startswith(prefix):
                yield key, self.rows[key]

    def count(self, prefix: str = "") -> int:
        return sum(key.startswith(prefix) for key in self.rows)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        self.batches += 1
        yield


def check_collection(name: Any) -> str:
    """A valid collection name or ValueError."""
    if not isinstance(name, str) or not COLLECTION_RE.match(name):
        raise ValueError(f"collection names match {COLLECTION_RE.pattern}, got {name!r}")
    return name


KEY_SEPARATOR = "\x1f"
"""The unit separator a card's composite ids are joined with (a graph relation's ends and
type): no line break, and shown escaped, so it is the one control character an id may hold."""


def check_id(item: Any) -> str:
    """A valid record id (non-empty string, at most 1024 characters, one line of visible
    text but for :data:`KEY_SEPARATOR`: search answers show it at the start of a line, where a
    line break in it wrote made-up hits for every member) or ValueError."""
    if not isinstance(item, str) or not item.strip() or len(item) > MAX_ID_CHARS:
        raise ValueError(f"ids are non-empty strings of at most {MAX_ID_CHARS} chars: {item!r:.80}")
    try:
        one_line(item.replace(KEY_SEPARATOR, " "))
    except ValueError as exc:
        raise ValueError(f"ids {exc}: {item!r:.80}") from None
    return item


def valid_pair(pair: Any) -> tuple[str, str]:
    """An ``(id, text)`` pair or TypeError/ValueError."""
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        raise TypeError(f"items must be (id, text) pairs, got {pair!r:.80}")
    item, text = pair
    if not isinstance(text, str):
        raise TypeError(f"text of {item!r:.80} must be a string")
    return check_id(item), text


def text_hash(text: str) -> str:
    """A short stable fingerprint of ``text``: re-embedding happens only when it changes."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def encode_vector(vector: Matrix) -> str:
    np = require("numpy")
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(data: str, dimension: int) -> Matrix:
    np = require("numpy")
    vec: Matrix = np.frombuffer(base64.b64decode(data), dtype="<f4").astype(np.float32)
    if vec.shape != (dimension,):
        raise ValueError(f"stored vector has {vec.size} values, expected {dimension}")
    return vec


@dataclass(frozen=True, slots=True)
class Record:
    """One stored vector with the hash and (bounded) text it was embedded from."""

    id: str
    hash: str
    text: str
    vector: Matrix


class RecordStore:
    """Reads and writes records and the model meta row in a :class:`StateStore`."""

    def __init__(self, state: StateStore, *, max_text_chars: int = 8_000) -> None:
        self.state = state
        self.max_text_chars = max_text_chars
        self.left_out = 0
        """Rows the last :meth:`load` did not read, past its cap."""

    @staticmethod
    def _key(collection: str, item: str) -> str:
        return f"v/{collection}/{item}"

    def meta(self) -> dict[str, Any] | None:
        found = self.state.get("meta")
        return found if isinstance(found, dict) else None

    def set_meta(self, meta: dict[str, Any]) -> None:
        self.state.put("meta", meta)

    def put_many(self, collection: str, records: Iterable[Record]) -> None:
        """One row per record, inside one state batch."""
        with self.state.batch():
            for rec in records:
                self.state.put(
                    self._key(collection, rec.id),
                    {
                        "h": rec.hash,
                        "t": rec.text[: self.max_text_chars],
                        "v": encode_vector(rec.vector),
                    },
                )

    def delete_many(self, collection: str, ids: Iterable[str]) -> None:
        with self.state.batch():
            for item in ids:
                self.state.delete(self._key(collection, item))

    def load(self, dimension: int | None, cap: int) -> Iterator[tuple[str, Record | None]]:
        """Every stored record as ``(collection, record)`` (None: a row that holds none) of
        the rows :meth:`_rows` reads; vectors are decoded only when ``dimension`` is given
        (otherwise ``record.vector`` is empty, for re-embedding).

        A row under a collection or id the store refuses is skipped (and logged): one such
        row, planted in the team's store, made every restore raise and took the store down."""
        np = require("numpy")
        empty = np.zeros((0,), dtype=np.float32)
        for key, value in self._rows(cap):
            collection, _, item = key[2:].partition("/")
            try:
                check_collection(collection)
                check_id(item)
            except ValueError:
                logger.warning("vector store: skipped a stored row under an invalid key")
                continue
            if not isinstance(value, dict):
                yield collection, None
                continue
            try:
                vector = empty if dimension is None else decode_vector(value["v"], dimension)
                text = str(value.get("t", ""))[: self.max_text_chars]
                yield collection, Record(item, str(value["h"]), text, vector)
            except (KeyError, ValueError, TypeError):
                yield collection, None

    def _rows(self, cap: int) -> Iterator[tuple[str, Any]]:
        """The record rows, a batch at a time, those outside the cards' collections only up to
        ``cap`` (each card bounds its own): :attr:`left_out` then counts the rows not read.
        Rows written around the tools were all read into one list before the store's cap
        applied: 1,000,000 of them took 1.6 GiB."""
        self.left_out = read = others = 0
        for key, value in self.state.iter_items("v/"):
            if key[2:].partition("/")[0] not in CARD_COLLECTIONS:
                if others == cap:
                    break
                others += 1
            read += 1
            yield key, value
        else:
            return
        for name in sorted(CARD_COLLECTIONS):  # a collection's keys are one range: past it?
            if self._key(name, "") > key:
                for row in self.state.iter_items(self._key(name, "")):
                    read += 1
                    yield row
        self.left_out = self.state.count("v/") - read
