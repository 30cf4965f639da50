"""An in-process BM25F keyword index over short multi-field documents.

Scores follow the classic BM25 formula (``k1``, ``b``, the same idf as SQLite FTS5's
``bm25()``), with per-column weights folded into term frequencies and document lengths. It is
an inverted index rather than an FTS5 table because FTS5 ranks every matching row through
its auxiliary function (~10 µs a row): a query sharing a common word with thousands of
entities would take tens of milliseconds. Here scoring is vectorised with numpy when it is
installed (the ``vector`` extra) and a plain loop otherwise; the ranking is the same.

Queries are free text from a model: they are reduced to word tokens, so punctuation and any
query syntax (``"``, ``NEAR(``, ``*``, ``AND``, ``col:``) are plain characters, never operators.
"""

from __future__ import annotations

import heapq
import math
import re
import unicodedata
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_TERMS = 32
_STOPWORD_TEXT = (
    "a an and are as at be by can could did do does for from had has have how i if in into is "
    "it its me my of on or our should so than that the their them then there these they this "
    "to us was we were what when where which who whom why will with would you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))
_VOWELS = frozenset("aeiouy")


def stem(token: str) -> str:
    """A light English suffix stripper: plurals, ``-ing``, ``-ed`` (``shoppers``: ``shopper``)."""
    if len(token) <= 3 or token.isdigit():
        return token
    if token.endswith("ies") and len(token) > 4:
        return token[:-3] + "y"
    if token.endswith("sses"):
        return token[:-2]
    if token.endswith(("ches", "shes", "xes", "zes")):
        return token[:-2]
    for suffix in ("ing", "ed"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            root = token[: -len(suffix)]
            if not _VOWELS.intersection(root):
                return token
            if len(root) > 3 and root[-1] == root[-2] and root[-1] not in "lsz":
                root = root[:-1]
            return root
    if token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def tokens(text: str) -> list[str]:
    """Index terms of ``text``: lowercase words without accents or stopwords, stemmed."""
    folded = text.casefold()
    if not folded.isascii():
        folded = unicodedata.normalize("NFKD", folded)
        folded = "".join(c for c in folded if not unicodedata.combining(c))
    return [stem(t) for t in _TOKEN.findall(folded) if t not in _STOPWORDS]


def query_terms(text: str) -> list[str]:
    """The distinct search terms of ``text`` (at most 32)."""
    return list(dict.fromkeys(tokens(text[:4000])))[:_MAX_TERMS]


_UNRESOLVED: Any = object()


def _numpy() -> Any | None:
    try:
        import numpy
    except ImportError:  # the vector extra is not installed: score with a plain loop
        return None
    return numpy


class KeywordIndex:
    """Documents with weighted text columns, ranked by BM25F (higher score is better).

    Not thread-safe by design: an owner (a tool actor) calls it from one thread at a time.
    """

    def __init__(
        self,
        columns: Sequence[str] = ("text",),
        weights: Sequence[float] | None = None,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        if not columns:
            raise ValueError("at least one column")
        if weights is not None and len(weights) != len(columns):
            raise ValueError("one weight per column")
        self.columns = tuple(columns)
        self._weights = tuple(float(w) for w in (weights or [1.0] * len(columns)))
        self.k1 = k1
        self.b = b
        self._slots: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._free: list[int] = []
        self._lengths = array("d")
        self._total = 0.0
        self._terms_of: dict[int, list[str]] = {}
        self._postings: dict[str, dict[int, float]] = {}
        self._arrays: dict[str, tuple[Any, Any]] = {}
        self._weights_of: dict[str, Any] = {}
        """Per term, ``(k1 + 1) * tf / (tf + k1 * (1 - b + b * len / avg))`` of each posting;
        valid while the collection's length statistics are ``_weights_for``."""
        self._weights_for: tuple[float, int, float, float] = (-1.0, -1, 0.0, 0.0)
        self._numpy: Any = _UNRESOLVED

    @property
    def _np(self) -> Any:
        """numpy, imported at the first search (building an index does not need it), or None
        without the vector extra."""
        if self._numpy is _UNRESOLVED:
            self._numpy = _numpy()
        return self._numpy

    @_np.setter
    def _np(self, module: Any) -> None:
        """Set the module to score with (None: the plain loop)."""
        self._numpy = module

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slots

    def upsert(self, doc_id: str, *values: str) -> None:
        """Insert or replace a document; one value per column."""
        if len(values) != len(self.columns):
            raise ValueError(f"expected {len(self.columns)} values, got {len(values)}")
        self.remove(doc_id)
        freq: dict[str, float] = {}
        length = 0.0
        for weight, value in zip(self._weights, values, strict=True):
            for term in tokens(value):
                freq[term] = freq.get(term, 0.0) + weight
                length += weight
        if self._free:
            slot = self._free.pop()
            self._ids[slot] = doc_id
            self._lengths[slot] = length
        else:
            slot = len(self._ids)
            self._ids.append(doc_id)
            self._lengths.append(length)
        self._slots[doc_id] = slot
        self._total += length
        self._terms_of[slot] = list(freq)
        for term, count in freq.items():
            self._postings.setdefault(term, {})[slot] = count
            self._arrays.pop(term, None)
            self._weights_of.pop(term, None)

    def upsert_many(self, docs: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Insert or replace many documents."""
        for doc_id, values in docs:
            self.upsert(doc_id, *values)

    def remove(self, doc_id: str) -> None:
        """Drop a document (no error when it is absent)."""
        slot = self._slots.pop(doc_id, None)
        if slot is None:
            return
        for term in self._terms_of.pop(slot, ()):
            posting = self._postings[term]
            del posting[slot]
            if not posting:
                del self._postings[term]
            self._arrays.pop(term, None)
            self._weights_of.pop(term, None)
        self._total -= self._lengths[slot]
        self._lengths[slot] = 0.0
        self._ids[slot] = None
        self._free.append(slot)

    def clear(self) -> None:
        """Drop every document."""
        for doc_id in list(self._slots):
            self.remove(doc_id)

    def search(
        self, query: str, top_k: int = 10, allowed: set[str] | None = None
    ) -> list[tuple[str, float]]:
        """Documents matching any term of ``query``, best first, as ``(doc_id, score)``.

        ``allowed`` restricts hits to those ids (applied before the cut to ``top_k``).
        """
        count = len(self._slots)
        if top_k <= 0 or count == 0:
            return []
        terms = [t for t in query_terms(query) if t in self._postings]
        if not terms:
            return []
        avg = self._total / count or 1.0
        c1 = self.k1 * (1.0 - self.b)
        c2 = self.k1 * self.b / avg
        weighted = [(t, self._idf(len(self._postings[t]), count)) for t in terms]
        if self._np is not None:
            ranked = self._search_numpy(weighted, c1, c2, top_k, allowed)
        else:
            ranked = self._search_loop(weighted, c1, c2, top_k, allowed)
        return [(doc_id, score) for doc_id, score in ranked]

    def score_bound(self, query: str) -> float:
        """The most any document could score for ``query``: ``idf * (k1 + 1)`` summed over its
        terms (each matched with a saturated frequency; an unseen term with the idf of a term
        no document holds). 0 for an empty index or a query without terms."""
        count = len(self._slots)
        if count == 0:
            return 0.0
        terms = query_terms(query)
        postings = self._postings
        k1p = self.k1 + 1.0
        return sum(self._idf(len(postings.get(t, ())), count) * k1p for t in terms)

    @staticmethod
    def _idf(df: int, count: int) -> float:
        return math.log(1.0 + (count - df + 0.5) / (df + 0.5))

    def _allowed_slots(self, allowed: set[str]) -> set[int]:
        return {self._slots[d] for d in allowed if d in self._slots}

    def _search_loop(
        self,
        weighted: list[tuple[str, float]],
        c1: float,
        c2: float,
        top_k: int,
        allowed: set[str] | None,
    ) -> list[tuple[str, float]]:
        keep = None if allowed is None else self._allowed_slots(allowed)
        lengths = self._lengths
        scores: dict[int, float] = {}
        k1p = self.k1 + 1.0
        for term, idf in weighted:
            for slot, tf in self._postings[term].items():
                if keep is None or slot in keep:
                    part = idf * (tf * k1p / (tf + c1 + c2 * lengths[slot]))
                    scores[slot] = scores.get(slot, 0.0) + part
        best = heapq.nlargest(top_k, scores.items(), key=lambda item: (item[1], -item[0]))
        return [(str(self._ids[slot]), score) for slot, score in best]

    def _search_numpy(
        self,
        weighted: list[tuple[str, float]],
        c1: float,
        c2: float,
        top_k: int,
        allowed: set[str] | None,
    ) -> list[tuple[str, float]]:
        np = self._np
        scores = np.zeros(len(self._ids), dtype=np.float64)
        stats = (self._total, len(self._slots), self.k1, self.b)
        if stats != self._weights_for:  # lengths changed: every cached weight is stale
            self._weights_of.clear()
            self._weights_for = stats
        for term, idf in weighted:
            slots, weights = self._term_weights(term, c1, c2)
            scores[slots] += idf * weights
        if allowed is not None:
            mask = np.zeros(len(scores), dtype=bool)
            picked = list(self._allowed_slots(allowed))
            if picked:
                mask[np.asarray(picked, dtype=np.int64)] = True
            scores[~mask] = 0.0
        best = self._best(scores, top_k)
        return [(str(self._ids[s]), float(scores[s])) for s in best.tolist()]

    def _best(self, scores: Any, top_k: int) -> Any:
        """Slots of the ``top_k`` positive scores, by score then slot (ties: lower slot).

        A strided sample's ``top_k``-th best score is a lower bound of the whole array's, so
        only the scores reaching it are sorted (a few times ``top_k``, not every hit).
        """
        np = self._np
        floor = 0.0
        stride = len(scores) // (64 * top_k)
        if stride > 1:
            sample = scores[::stride]
            if np.count_nonzero(sample) >= top_k:
                floor = float(np.partition(sample, len(sample) - top_k)[len(sample) - top_k])
        hits = np.flatnonzero(scores >= floor) if floor > 0.0 else np.flatnonzero(scores > 0.0)
        order = np.lexsort((hits, -scores[hits]))[:top_k]
        return hits[order]

    def _term_weights(self, term: str, c1: float, c2: float) -> tuple[Any, Any]:
        slots, tfs = self._posting_arrays(term)
        weights = self._weights_of.get(term)
        if weights is None:
            lengths = self._np.frombuffer(self._lengths, dtype=self._np.float64)
            weights = tfs * (self.k1 + 1.0) / (tfs + c1 + c2 * lengths[slots])
            self._weights_of[term] = weights
        return slots, weights

    def _posting_arrays(self, term: str) -> tuple[Any, Any]:
        found = self._arrays.get(term)
        if found is None:
            np = self._np
            posting = self._postings[term]
            slots = np.fromiter(posting.keys(), dtype=np.int64, count=len(posting))
            tfs = np.fromiter(posting.values(), dtype=np.float64, count=len(posting))
            found = self._arrays[term] = (slots, tfs)
        return found
